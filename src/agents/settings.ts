import { z } from "@hono/zod-openapi";

// The values of a session's settings, for every agent: one enum each so that config, the sessions
// and hooks APIs and key policies accept the same ones. Their names are Claude Code's, where they
// came from; each back-end maps them onto its CLI and refuses what it cannot honour (agent.ts).

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
