import type { PermissionAnswer } from "../agents/agent.js";
import { isRecord } from "../agents/line-fields.js";
import { isQuestion } from "../agents/registry.js";
import type { PermissionRequestRow } from "../store/schema.js";
import { PermissionAnswerMismatchError } from "./errors.js";

// A client's reply to a permission request, as the CLI takes it: what src/runs/approvals.ts
// records and delivers.

/** A client's answer, as the route takes it. */
export type ClientReply =
  | {
      decision: "allow" | "deny";
      scope?: "once" | "session" | undefined;
      updatedInput?: Record<string, unknown> | undefined;
      message?: string | undefined;
      interrupt?: boolean | undefined;
    }
  | { answers: Record<string, string | string[]> };

/**
 * What the CLI gets for a client's reply: a question's answers are an allow whose input carries
 * them (as the CLI's own dialog does), and `scope: "session"` adds the request's suggested rules
 * (or its tool) for the CLI's session and, as `rules`, for the bridge session's later runs.
 */
export function answerOf(
  agent: string,
  row: PermissionRequestRow,
  reply: ClientReply,
): { answer: PermissionAnswer; scope?: "once" | "session"; rules: string[] } {
  const question = isQuestion(agent, row.toolName);
  if ("answers" in reply !== question && !("decision" in reply && reply.decision === "deny")) {
    throw question
      ? new PermissionAnswerMismatchError(
          "decision",
          `request ${row.requestId} asks the user a question: answer it with answers, or deny it`,
        )
      : new PermissionAnswerMismatchError(
          "answers",
          `request ${row.requestId} asks to use ${row.toolName}, not a question: answer it with a decision`,
        );
  }
  if ("answers" in reply) {
    return {
      answer: { behavior: "allow", updatedInput: { ...row.input, answers: reply.answers } },
      rules: [],
    };
  }
  if (reply.decision === "deny") {
    const answer: PermissionAnswer = {
      behavior: "deny",
      message: reply.message ?? `The user denied the use of ${row.toolName}.`,
      ...(reply.interrupt ? { interrupt: true } : {}),
    };
    // A scope means what an allow covers; a denial is always this request's alone.
    return { answer, rules: [] };
  }
  const scope = reply.scope ?? "once";
  const updatedInput = reply.updatedInput ?? row.input;
  if (scope === "once") return { answer: { behavior: "allow", updatedInput }, scope, rules: [] };
  const rules = sessionRules(row);
  return {
    answer: {
      behavior: "allow",
      updatedInput,
      updatedPermissions: [{ type: "addRules", rules, behavior: "allow", destination: "session" }],
    },
    scope,
    rules: rules.map((r) => (r.ruleContent ? `${r.toolName}(${r.ruleContent})` : r.toolName)),
  };
}

interface Rule {
  toolName: string;
  ruleContent?: string;
}

/** The allow rules the CLI suggested for the request; else its tool, whatever the input. */
function sessionRules(row: PermissionRequestRow): Rule[] {
  const rules: Rule[] = [];
  for (const suggestion of row.suggestions) {
    if (!isRecord(suggestion) || suggestion.type !== "addRules") continue;
    if (suggestion.behavior !== "allow" || !Array.isArray(suggestion.rules)) continue;
    for (const rule of suggestion.rules) {
      if (!isRecord(rule) || typeof rule.toolName !== "string") continue;
      rules.push({
        toolName: rule.toolName,
        ...(typeof rule.ruleContent === "string" ? { ruleContent: rule.ruleContent } : {}),
      });
    }
  }
  return rules.length > 0 ? rules : [{ toolName: row.toolName }];
}
