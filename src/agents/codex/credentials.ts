import { stat } from "node:fs/promises";
import { join } from "node:path";

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
