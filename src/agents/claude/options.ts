import { z } from "@hono/zod-openapi";

// The runner options an operator sets in config and a client may set per session; one enum
// each so that config, the sessions API and the command builder accept the same values.

export const PERMISSION_MODES = [
  "default",
  "acceptEdits",
  "auto",
  "plan",
  "dontAsk",
  "bypassPermissions",
  "dangerously-skip-permissions",
] as const;
export const PermissionMode = z.enum(PERMISSION_MODES).openapi("PermissionMode");
export type PermissionMode = z.infer<typeof PermissionMode>;

export const EFFORTS = ["low", "medium", "high", "xhigh", "max"] as const;
export const Effort = z.enum(EFFORTS).openapi("Effort");
export type Effort = z.infer<typeof Effort>;
