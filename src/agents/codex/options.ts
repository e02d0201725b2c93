import { z } from "@hono/zod-openapi";

// The Codex session options a client may set (`POST /v1/sessions` with `agent: "codex"`), one
// schema so that the sessions API, config and the command builder accept the same values.
// Checked against codex-cli 0.171.0: `--sandbox` lists the three modes; the reasoning efforts are
// those its bundled model catalog offers (`codex debug models`). codex itself passes any effort
// string on to the API unchecked, so the enum is the only guard.

export const CODEX_SANDBOX_MODES = ["read-only", "workspace-write", "danger-full-access"] as const;
export const CodexSandbox = z.enum(CODEX_SANDBOX_MODES).openapi("CodexSandbox", {
  description:
    "Where the commands codex runs may write: `read-only` (nowhere), `workspace-write` (the work dir), `danger-full-access` (anywhere, no sandbox). `codex exec` asks for no approvals in any mode.",
});
export type CodexSandbox = z.infer<typeof CodexSandbox>;

export const CODEX_REASONING_EFFORTS = ["low", "medium", "high", "xhigh", "max", "ultra"] as const;
export const CodexReasoningEffort = z.enum(CODEX_REASONING_EFFORTS).openapi("CodexReasoningEffort");
export type CodexReasoningEffort = z.infer<typeof CodexReasoningEffort>;

/** A model slug: what codex's catalog and the API use; never something a parser could misread. */
const ModelSlug = z
  .string()
  .max(100)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]*$/, "a model slug such as gpt-5.5");

export const CodexSessionOptions = z
  .object({
    sandbox: CodexSandbox.default("read-only"),
    model: ModelSlug.optional(),
    reasoning_effort: CodexReasoningEffort.optional(),
  })
  .strict()
  .openapi("CodexSessionOptions");
export type CodexSessionOptions = z.infer<typeof CodexSessionOptions>;
