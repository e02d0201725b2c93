import { z } from "@hono/zod-openapi";

// Tool rules: what a key's policy and a session say of the agent's tool uses, whatever the
// permission mode (bypass included), enforced by the agent's own pre-tool hook (Claude Code's
// PreToolUse: src/agents/claude/hooks.ts). An ordered list; the first rule whose patterns match a
// tool use decides it: `deny` refuses it with the rule's reason, `ask` makes it a permission
// request (answered as the session's `approvals` says), `allow` ends the search and leaves the
// use to the permission mode (so a rule never grants what the mode would not). No rule matches:
// the permission mode decides, as without rules. The key's rules are checked before the
// session's, so a session cannot take back what its key asks or denies. A leaf, as
// session-settings.ts, so that the store, auth and the agents all read it.

export const TOOL_RULE_DECISIONS = ["allow", "ask", "deny"] as const;
export type ToolRuleDecision = (typeof TOOL_RULE_DECISIONS)[number];

/** Most entries in one list (a key's or a session's). */
export const MAX_TOOL_RULE_ENTRIES = 64;
/** Longest pattern. */
export const MAX_TOOL_PATTERN = 256;
/** Longest reason. */
export const MAX_TOOL_RULE_REASON = 500;

/** The shell tool, the one tool whose rules may name a command. */
export const SHELL_TOOL = "Bash";

// No control characters (U+0000 among them) and no lone surrogates: `\p{Cc}`, `\p{Cs}`.
const PRINTABLE = /^[^\p{Cc}\p{Cs}]*$/u;

const Pattern = z
  .string()
  .min(1)
  .max(MAX_TOOL_PATTERN)
  .regex(PRINTABLE, { error: "expected printable text, without control characters" });

export const ToolRule = z
  .object({
    tool: Pattern.openapi({
      description:
        "The tool's name, `*` matching any run of characters: `Bash`, `mcp__github__*`, `*`.",
    }),
    command: Pattern.optional().openapi({
      description:
        "For the shell tool (`Bash`) only: the whole command as the agent wrote it, `*` matching any run of characters (`rm *` matches `rm -rf x`, not `ls; rm x`; `*rm *` matches both); without `*`, the command exactly. Absent: any command.",
    }),
    decision: z.enum(TOOL_RULE_DECISIONS).openapi({
      description:
        "`deny`: refused with the reason; `ask`: a permission request (a denial under `approvals: deny`); `allow`: no later rule is looked at, the permission mode decides.",
    }),
    reason: z
      .string()
      .min(1)
      .max(MAX_TOOL_RULE_REASON)
      .regex(PRINTABLE, { error: "expected printable text, without control characters" })
      .optional()
      .openapi({
        description: "Said to the agent (and in the request) when the rule denies or asks.",
      }),
  })
  .strict()
  .refine((rule) => rule.command === undefined || rule.tool === SHELL_TOOL, {
    error: `command applies to the shell tool only: tool must be ${SHELL_TOOL}`,
    path: ["command"],
  })
  .openapi("ToolRule");
export type ToolRule = z.infer<typeof ToolRule>;

export const TOOL_RULE_PRESETS = ["supervised", "plan"] as const;
export type ToolRulePreset = (typeof TOOL_RULE_PRESETS)[number];

export const ToolRulePresetEntry = z
  .object({
    preset: z.enum(TOOL_RULE_PRESETS).openapi({
      description:
        "`supervised`: ask for every tool but Glob, Grep, NotebookRead, Read, Task and TodoWrite; `plan`: ask for ExitPlanMode only. Stands for those rules at its place in the list.",
    }),
  })
  .strict()
  .openapi("ToolRulePreset");

export const ToolRuleEntry = z
  .union([ToolRule, ToolRulePresetEntry], {
    error:
      'expected a rule {"tool", "command"?, "decision": "allow" | "ask" | "deny", "reason"?} or {"preset": "supervised" | "plan"}',
  })
  .openapi("ToolRuleEntry");
export type ToolRuleEntry = z.infer<typeof ToolRuleEntry>;

export const ToolRules = z
  .array(ToolRuleEntry)
  .max(MAX_TOOL_RULE_ENTRIES, { error: `at most ${MAX_TOOL_RULE_ENTRIES} tool rules` })
  .openapi("ToolRules", {
    description:
      "Rules of the agent's tool uses, checked in order, the first match deciding, in every permission mode (bypass included); the key's are checked before the session's. Claude Code only. See docs/api.md#tool-rules.",
  });

/** Tools the `supervised` preset lets run without asking: they only read. */
export const READ_ONLY_TOOLS = ["Glob", "Grep", "NotebookRead", "Read", "Task", "TodoWrite"];

const PRESETS: Record<ToolRulePreset, readonly ToolRule[]> = {
  supervised: [
    ...READ_ONLY_TOOLS.map((tool) => ({ tool, decision: "allow" as const })),
    { tool: "*", decision: "ask", reason: "the session is supervised: every tool use is asked" },
  ],
  plan: [
    {
      tool: "ExitPlanMode",
      decision: "ask",
      reason: "the plan is to be approved before work starts",
    },
  ],
};

/** Whose list a rule is in. */
export type ToolRuleSource = "key" | "session";

/** The rule that decided a tool use, and where it stands. */
export interface ToolRuleMatch {
  rule: ToolRule;
  source: ToolRuleSource;
  /** Its entry's index in its list, as given (a preset's: the preset's). */
  index: number;
  preset?: ToolRulePreset;
}

/** The lists a run is under. */
export interface RunToolRules {
  key: readonly ToolRuleEntry[];
  session: readonly ToolRuleEntry[];
}

export function hasToolRules(rules: RunToolRules | undefined): rules is RunToolRules {
  return rules !== undefined && (rules.key.length > 0 || rules.session.length > 0);
}

/**
 * `*` matches any run of characters (newlines too); everything else itself. Greedy with one
 * step back to the last `*`: at most pattern × text steps, whatever the pattern (a regex of many
 * `*` could backtrack for ages on a long command).
 */
export function globMatches(pattern: string, text: string): boolean {
  let p = 0;
  let t = 0;
  let star = -1;
  let resume = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] === "*") {
      star = p++;
      resume = t;
    } else if (p < pattern.length && pattern[p] === text[t]) {
      p++;
      t++;
    } else if (star >= 0) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern[p] === "*") p++;
  return p === pattern.length;
}

function ruleMatches(rule: ToolRule, toolName: string, input: unknown): boolean {
  if (!globMatches(rule.tool, toolName)) return false;
  if (rule.command === undefined) return true;
  const command =
    typeof input === "object" && input !== null && "command" in input ? input.command : undefined;
  return typeof command === "string" && globMatches(rule.command, command.trim());
}

/** The first rule (the key's, then the session's) that matches the tool use; undefined: none. */
export function matchToolRule(
  rules: RunToolRules,
  toolName: string,
  input: unknown,
): ToolRuleMatch | undefined {
  for (const source of ["key", "session"] as const) {
    for (const [index, entry] of rules[source].entries()) {
      const preset = "preset" in entry ? entry.preset : undefined;
      const expanded = preset ? PRESETS[preset] : [entry as ToolRule];
      const rule = expanded.find((r) => ruleMatches(r, toolName, input));
      if (rule) return { rule, source, index, ...(preset ? { preset } : {}) };
    }
  }
  return undefined;
}

/** What the agent is told of a rule's denial or question. */
export function toolRuleReason(match: ToolRuleMatch): string {
  const which = `the ${match.source}'s tool rule ${match.index}${match.preset ? ` (preset ${match.preset})` : ""}`;
  if (match.rule.reason) return `${match.rule.reason} (${which})`;
  return match.rule.decision === "deny"
    ? `${which} denies this tool use`
    : `${which} asks for an approval of this tool use`;
}
