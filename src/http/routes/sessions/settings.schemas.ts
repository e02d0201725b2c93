import { z } from "@hono/zod-openapi";
import type { ZodError } from "zod";
import { InvalidRequestError, type ValidationIssue } from "../../../errors.js";
import { Approvals, Effort, ModelName, PermissionMode } from "../../../session-settings.js";
import { ToolRules as ToolUseRules } from "../../../tool-rules.js";
import { locationOf } from "../../errors.js";
import {
  AddDirs,
  CreateSessionBody,
  DISALLOWED_TOOLS_HELP,
  MAX_BUDGET_HELP,
  MAX_TURNS_HELP,
  MaxBudgetUsd,
  MaxTurns,
  McpServerNames,
  REQUIRE_CLEAN_WORK_DIR_HELP,
  ToolRules,
} from "./sessions.schemas.js";

// `PATCH /v1/sessions/{id}`: a JSON merge patch (RFC 7396) of a session's settings. A field left
// out stays as it is; `null` sets it back to what a session created without it gets.

const create = CreateSessionBody.shape;
const resets = (what: string) => `null: ${what}.`;

export const UpdateSessionBody = z
  .strictObject({
    title: create.title
      .unwrap()
      .nullable()
      .optional()
      .openapi({ description: resets("none") }),
    metadata: create.metadata
      .unwrap()
      .nullable()
      .optional()
      .openapi({ description: `Replaces the whole of it (no merge of keys). ${resets("none")}` }),
    permission_mode: PermissionMode.nullable()
      .optional()
      .openapi({ description: resets("`AGENT_BRIDGE_PERMISSION_MODE`") }),
    model: ModelName.nullable()
      .optional()
      .openapi({ description: resets("the server's default model for the session's agent") }),
    effort: Effort.nullable()
      .optional()
      .openapi({ description: resets("`AGENT_BRIDGE_EFFORT`") }),
    system_prompt: create.system_prompt
      .unwrap()
      .nullable()
      .optional()
      .openapi({ description: `Appended to the CLI's system prompt. ${resets("none")}` }),
    mcp_servers: McpServerNames.nullable().optional(),
    max_turns: MaxTurns.nullable()
      .optional()
      .openapi({ description: `${MAX_TURNS_HELP} ${resets("no cap")}` }),
    max_budget_usd: MaxBudgetUsd.nullable()
      .optional()
      .openapi({ description: `${MAX_BUDGET_HELP} ${resets("no cap")}` }),
    approvals: Approvals.nullable()
      .optional()
      .openapi({ description: resets("`deny`") }),
    approval_timeout_seconds: create.approval_timeout_seconds
      .unwrap()
      .nullable()
      .optional()
      .openapi({ description: resets("`AGENT_BRIDGE_APPROVAL_TIMEOUT_SECONDS`") }),
    allowed_tools: ToolRules.nullable()
      .optional()
      .openapi({
        description: `Tool rules each later run gets as \`--allowedTools\`, in place of the session's (answers with \`scope: session\` add to them). ${resets("none")}`,
      }),
    disallowed_tools: ToolRules.nullable()
      .optional()
      .openapi({ description: `${DISALLOWED_TOOLS_HELP} ${resets("none")}` }),
    tool_rules: ToolUseRules.nullable()
      .optional()
      .openapi({
        description: `Rules of the tool uses of each later run, in place of the session's, after its key's. ${resets("none")}`,
      }),
    add_dirs: AddDirs.nullable().optional(),
    require_clean_work_dir: z
      .boolean()
      .nullable()
      .optional()
      .openapi({ description: `${REQUIRE_CLEAN_WORK_DIR_HELP} ${resets("false")}` }),
  })
  .openapi("UpdateSession", { example: { model: "opus", title: "renamed" } });
export type UpdateSessionBody = z.infer<typeof UpdateSessionBody>;

/** Fields a session is created with that stay for its life: a patch naming one is refused. */
const FIXED: Record<string, string> = {
  agent: "the session's agent is fixed for its life; create a new session for another",
  work_dir: "the session's work dir is fixed for its life; use add_dirs for more directories",
  worktree: "whether the session has a worktree of its own is fixed for its life",
};

/**
 * A patch's issues, each naming its field: a field that cannot change, or one the API does not
 * have, by its name (zod reports unknown keys all at once, at the body).
 */
export function patchValidationError(target: string, error: ZodError): InvalidRequestError {
  const location = locationOf(target);
  const issues: ValidationIssue[] = error.issues.flatMap((issue) => {
    const at = issue.path.join(".");
    if (issue.code !== "unrecognized_keys" || at !== "") {
      return [{ location, path: at, message: issue.message }];
    }
    return issue.keys.map((key) => ({
      location,
      path: key,
      message: (Object.hasOwn(FIXED, key) && FIXED[key]) || "no such setting of a session",
    }));
  });
  return new InvalidRequestError(issues);
}
