import { z } from "@hono/zod-openapi";
import { PERMISSION_MODES } from "./permission-modes.js";

// The values of a session's settings, for every agent: one enum each so that config, the sessions
// and hooks APIs and key policies accept the same ones. Their names are Claude Code's, where they
// came from; each back-end maps them onto its CLI and refuses what it cannot honour (agent.ts).

export const PermissionMode = z.enum(PERMISSION_MODES).openapi("PermissionMode");
export type PermissionMode = z.infer<typeof PermissionMode>;

export const EFFORTS = ["low", "medium", "high", "xhigh", "max"] as const;
export const Effort = z.enum(EFFORTS).openapi("Effort");
export type Effort = z.infer<typeof Effort>;

export const APPROVAL_MODES = ["deny", "api"] as const;
export const Approvals = z.enum(APPROVAL_MODES).openapi("Approvals", {
  description:
    "Who answers the agent's permission requests (a tool the permission mode does not allow, a question to the user): `deny`, the bridge refuses each at once (unattended runs) and says so in the stream; `api`, each waits for an answer at `POST /v1/runs/{id}/permissions/{request_id}` until `approval_timeout_seconds`. Claude Code only; `api` is a 400 for a codex session (codex exec asks for no approvals).",
});
export type Approvals = z.infer<typeof Approvals>;

/** A model name or alias, as the CLIs take them (a name that cannot be read as a flag). */
export const ModelName = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9._:\-[\]/]+$/, { error: "expected a model name or alias, e.g. sonnet" });
