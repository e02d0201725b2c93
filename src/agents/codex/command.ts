import { InvalidRunRequestError } from "../../process/errors.js";
import type { CodexReasoningEffort, CodexSandbox } from "./options.js";

// The `codex` command line for one run, as an argument array (never a shell string). The prompt
// is not an argument: `-` makes codex read it from stdin, so no prompt text can become an option.
//
// codex works in the directory it is started in: spawn it with the session's work dir as cwd.
// (`exec resume` has no `--cd`; a resumed thread takes the new cwd, observed with 0.171.0.)
// `--skip-git-repo-check` because the bridge, not codex, decides where the agent may work.

export interface CodexCommandInput {
  sandbox: CodexSandbox;
  model?: string;
  reasoningEffort?: CodexReasoningEffort;
  /** Added to codex's own instructions, as a developer message. */
  developerInstructions?: string;
  /** The thread to resume; absent for the session's first run. */
  threadId?: string;
  /** Image files sent with the prompt. */
  images?: readonly string[];
  /** A file holding the JSON Schema of the answer (src/output-schema.ts). */
  outputSchemaFile?: string;
  /** Set: codex's model provider is this one, in place of the one its config.toml selects. */
  provider?: CodexProvider;
}

/** A Responses API codex calls (the bridge's model gateway), with a key from its environment. */
export interface CodexProvider {
  /** The API's base URL: codex calls `POST {baseUrl}/responses`. */
  baseUrl: string;
  /** The variable that holds the key codex sends as a bearer token. */
  envKey: string;
}

/** The provider's id among codex's, beside its built-in ones and the operator's. */
const PROVIDER_ID = "agent_bridge";

/** codex thread ids are UUIDs (v7); anything else would be looked up as a thread *name*. */
const THREAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A `-c key=value` override; the value is a TOML string (JSON string syntax is valid TOML). */
function config(key: string, value: string): string[] {
  return ["-c", `${key}=${JSON.stringify(value)}`];
}

export function buildCodexArgs(input: CodexCommandInput): string[] {
  if (input.threadId !== undefined && !THREAD_ID.test(input.threadId)) {
    throw new InvalidRunRequestError(`invalid codex thread id: ${JSON.stringify(input.threadId)}`);
  }
  const args = input.threadId === undefined ? ["exec"] : ["exec", "resume"];
  args.push("--json", "--skip-git-repo-check");
  // `exec resume` has no `--sandbox`; the config key works for both.
  args.push(...config("sandbox_mode", input.sandbox));
  // `--model=` so that a value starting with "-" cannot be read as a flag.
  if (input.model !== undefined) args.push(`--model=${input.model}`);
  if (input.reasoningEffort !== undefined) {
    args.push(...config("model_reasoning_effort", input.reasoningEffort));
  }
  if (input.developerInstructions !== undefined) {
    args.push(...config("developer_instructions", input.developerInstructions));
  }
  if (input.provider !== undefined) {
    const { baseUrl, envKey } = input.provider;
    const table = [
      `name=${JSON.stringify("agent-bridge model gateway")}`,
      `base_url=${JSON.stringify(baseUrl)}`,
      `env_key=${JSON.stringify(envKey)}`,
      `wire_api="responses"`,
    ];
    args.push("-c", `model_providers.${PROVIDER_ID}={${table.join(",")}}`);
    args.push(...config("model_provider", PROVIDER_ID));
  }
  // `--image=` for each: the option is variadic, and a path starting with "-" stays a value.
  for (const image of input.images ?? []) args.push(`--image=${image}`);
  // A path, as codex takes it; `=` so that one starting with "-" stays a value.
  if (input.outputSchemaFile !== undefined) args.push(`--output-schema=${input.outputSchemaFile}`);
  // After `--` everything is positional: the thread id, then `-` (the prompt comes on stdin).
  args.push("--");
  if (input.threadId !== undefined) args.push(input.threadId);
  args.push("-");
  return args;
}
