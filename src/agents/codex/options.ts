import type { z } from "@hono/zod-openapi";
import type { PermissionMode } from "../../session-settings.js";
import { type SessionSettings, SessionSettings as Settings } from "../../session-settings.js";

// How a session's settings map onto codex-cli 0.171.0. `codex exec` asks for no approvals in any
// mode, so a permission mode becomes the sandbox its commands run in; a mode that has no such
// equivalent is refused rather than run as something else. Efforts are those its bundled model
// catalog offers (`codex debug models`): codex itself passes any string on to the API unchecked,
// so this schema is the only guard. codex has no cap on turns, and takes MCP servers only from its
// config.toml or as `-c` overrides in its argv (where their secrets would be readable by every
// process on the machine), so a session or message asking for those is refused too. A cap on
// spend needs nothing of codex: the model gateway refuses a run's call once its metered calls
// have spent it (src/gateway/admission.ts).

export const CODEX_SANDBOX_MODES = ["read-only", "workspace-write", "danger-full-access"] as const;
export type CodexSandbox = (typeof CODEX_SANDBOX_MODES)[number];

export const CODEX_REASONING_EFFORTS = ["low", "medium", "high", "xhigh", "max", "ultra"] as const;
export type CodexReasoningEffort = (typeof CODEX_REASONING_EFFORTS)[number];

/** The sandbox of each permission mode that has one (docs/agents.md's table). */
export const SANDBOX_OF: Partial<Record<PermissionMode, CodexSandbox>> = {
  plan: "read-only",
  // Claude's default asks before edits and commands, and nobody can answer in a bridged run.
  default: "read-only",
  acceptEdits: "workspace-write",
  bypassPermissions: "danger-full-access",
  "dangerously-skip-permissions": "danger-full-access",
};

/**
 * Where a mode's sandbox is enforced. With the bridge's own sandbox around every run
 * (src/process/sandbox.ts) codex's is off, `danger-full-access`: codex would make its own with
 * bubblewrap nested in the bridge's, which fails there (`execvp codex-linux-sandbox`, issue 38);
 * the bridge's enforces the mode instead, `read-only` as a read-only work dir (what else a run
 * may write, its HOME and private /tmp, is the same in every mode). Without the bridge's sandbox
 * codex's own does it, as before.
 */
export function codexSandboxing(
  mode: CodexSandbox,
  bridgeSandboxed: boolean,
): { codexSandbox: CodexSandbox; workDirReadOnly: boolean } {
  return bridgeSandboxed
    ? { codexSandbox: "danger-full-access", workDirReadOnly: mode === "read-only" }
    : { codexSandbox: mode, workDirReadOnly: false };
}

/** A model slug: what codex's catalog and the API use; never something a parser could misread. */
const MODEL_SLUG = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/;

/** The session settings codex can honour. */
export const CodexSettings: z.ZodType<SessionSettings> = Settings.superRefine((s, ctx) => {
  if (SANDBOX_OF[s.permissionMode] === undefined) {
    ctx.addIssue({
      code: "custom",
      path: ["permissionMode"],
      message: `permission mode ${s.permissionMode} has no codex equivalent; use one of ${Object.keys(SANDBOX_OF).join(", ")}`,
    });
  }
  if (s.model !== null && !MODEL_SLUG.test(s.model)) {
    ctx.addIssue({
      code: "custom",
      path: ["model"],
      message: "expected a model slug such as gpt-5.5",
    });
  }
  const unsupported = [
    ["mcpServers", s.mcpServers.length > 0, "codex takes MCP servers only in its config"],
    ["maxTurns", s.maxTurns !== null, "codex exec has no cap on turns"],
    ["approvals", s.approvals === "api", "codex exec asks for no approvals"],
    // codex 0.171.0 has no list of tools to refuse, and `--add-dir` only on `exec`, not on
    // `exec resume` (a session's later runs).
    ["disallowedTools", s.disallowedTools.length > 0, "codex exec has no tools to disallow"],
    ["toolRules", s.toolRules.length > 0, "codex exec has no hooks to enforce tool rules with"],
    ["addDirs", s.addDirs.length > 0, "codex exec resume takes no --add-dir"],
    ["requireCleanWorkDir", s.requireCleanWorkDir, "codex exec has no Stop hook to check with"],
  ] as const;
  for (const [path, asked, message] of unsupported) {
    if (asked) ctx.addIssue({ code: "custom", path: [path], message });
  }
});
