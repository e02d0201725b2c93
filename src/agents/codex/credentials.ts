import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { Upstream } from "../../gateway/upstream.js";

// Where codex finds its credentials, seen without calling the API: a key in its environment, or
// the login `codex login` saved under CODEX_HOME (default ~/.codex).

const KEY_VARIABLES = ["OPENAI_API_KEY", "CODEX_API_KEY"] as const;

export class CodexMissingCredentialsError extends Error {
  constructor() {
    super(
      "the codex CLI has no credentials: set OPENAI_API_KEY in the server's environment, or log codex in (`codex login`) as the user the server runs as",
    );
  }
}

/** The variable or file codex would authenticate with; throws when it has none. */
export async function findCodexCredentials(env: Record<string, string>): Promise<string> {
  for (const name of KEY_VARIABLES) if (env[name]?.trim()) return name;
  const home = env.CODEX_HOME ?? (env.HOME ? join(env.HOME, ".codex") : undefined);
  if (home && (await stat(join(home, "auth.json")).catch(() => undefined))?.isFile()) {
    return "auth.json";
  }
  throw new CodexMissingCredentialsError();
}

/** Where codex's model API is when the operator names none. */
export const DEFAULT_CODEX_BASE_URL = "https://api.openai.com/v1";

/** The API codex calls with the operator's key, as the gateway's upstream. */
export interface CodexUpstream extends Upstream {
  /** The variable the operator's key came from: /readyz names it, codex gets its token in it. */
  variable: (typeof KEY_VARIABLES)[number];
}

/**
 * The upstream of codex's calls when the operator gave its key in the environment (OPENAI_API_KEY,
 * its `_FILE` read already, else CODEX_API_KEY), sent as codex sends a key: a bearer token; at
 * `baseUrl` (an OpenAI base URL, which ends in `/v1`). Undefined without a key: codex then calls
 * its API itself, as it is logged in (`codex login`).
 */
export function codexUpstream(
  env: Record<string, string>,
  baseUrl: string,
): CodexUpstream | undefined {
  const variable = KEY_VARIABLES.find((name) => env[name]?.trim());
  if (!variable) return undefined;
  return { baseUrl, credential: { authorization: `Bearer ${env[variable]}` }, variable };
}

/**
 * codex's environment when its calls go through the gateway: none of the operator's keys and no
 * API address of its own (each run adds the gateway's provider, and its token).
 */
export function withoutCodexUpstream(env: Record<string, string>): Record<string, string> {
  const out = { ...env };
  for (const name of [...KEY_VARIABLES, "OPENAI_BASE_URL"]) delete out[name];
  return out;
}
