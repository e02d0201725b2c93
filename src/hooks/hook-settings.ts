import {
  Approvals,
  Effort,
  PermissionMode,
  type SessionSettings,
  type SettingsDefaults,
  settingsWithDefaults,
} from "../session-settings.js";
import type { HookRow } from "../store/schema.js";

type HookFields = Pick<
  HookRow,
  "agent" | "permissionMode" | "model" | "effort" | "worktree" | "mcpServers" | "approvals"
>;

/**
 * The settings a hook's sessions get: its own, the server's defaults for what it leaves unset.
 * What a hook is checked against when it is defined (its agent, its key's policy), and what each
 * session a delivery or a schedule makes is given.
 */
export function hookSettings(config: SettingsDefaults, hook: HookFields): SessionSettings {
  return settingsWithDefaults(config, hookAgent(config, hook), {
    permissionMode: hook.permissionMode === null ? null : PermissionMode.parse(hook.permissionMode),
    model: hook.model,
    effort: hook.effort === null ? null : Effort.parse(hook.effort),
    worktree: hook.worktree,
    mcpServers: hook.mcpServers,
    approvals: Approvals.parse(hook.approvals),
  });
}

export const hookAgent = (config: SettingsDefaults, hook: Pick<HookRow, "agent">): string =>
  hook.agent ?? config.agents.default;
