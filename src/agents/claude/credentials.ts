import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";

// Whether the CLI has something to authenticate with, found the way CLI 2.1.328 looks for it and
// without calling the API: its environment first, then a cloud provider switch, then the files
// under its config dir (`$CLAUDE_CONFIG_DIR`, else `$HOME/.claude`). Whether the credential is
// still valid only the API can say; a run that is refused says so with `agent_not_authenticated`.

/** Variables that carry a credential themselves. */
const CREDENTIAL_VARIABLES = [
  "ANTHROPIC_API_KEY",
  "ANTHROPIC_AUTH_TOKEN",
  "CLAUDE_CODE_OAUTH_TOKEN",
] as const;

/** Switches to a cloud provider, whose own credentials (AWS_*, GOOGLE_*…) the CLI then uses. */
const PROVIDER_SWITCHES = [
  "CLAUDE_CODE_USE_BEDROCK",
  "CLAUDE_CODE_USE_VERTEX",
  "CLAUDE_CODE_USE_FOUNDRY",
  "CLAUDE_CODE_USE_ANTHROPIC_AWS",
] as const;

/** Settings every user of the machine gets, an `apiKeyHelper` among them. */
const MANAGED_SETTINGS = "/etc/claude-code/managed-settings.json";

/** What the CLI would authenticate with: a variable's or a file's name (never a path or a value). */
export type CredentialSource = string;

export class MissingCredentialsError extends Error {
  constructor() {
    super(
      "the claude CLI has no credentials: set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) in the server's environment, or log the CLI in (`claude /login`) as the user the server runs as",
    );
  }
}

const isOn = (value: string | undefined) =>
  value !== undefined && !["", "0", "false", "no", "off"].includes(value.trim().toLowerCase());

async function readJson(path: string): Promise<Record<string, unknown> | undefined> {
  try {
    const value: unknown = JSON.parse(await readFile(path, "utf8"));
    return typeof value === "object" && value !== null
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

async function isFile(path: string): Promise<boolean> {
  return (await stat(path).catch(() => undefined))?.isFile() ?? false;
}

const nonEmpty = (value: unknown) => typeof value === "string" && value.trim() !== "";

/**
 * Where the CLI, run with `env`, finds its credentials; throws MissingCredentialsError when it has
 * none. On macOS the CLI keeps its login in the Keychain, which cannot be seen from here: a login
 * is then assumed.
 */
export async function findCredentials(
  env: Record<string, string>,
  platform: NodeJS.Platform = process.platform,
): Promise<CredentialSource> {
  for (const name of CREDENTIAL_VARIABLES) if (nonEmpty(env[name])) return name;
  for (const name of PROVIDER_SWITCHES) if (isOn(env[name])) return name;
  const home = env.HOME;
  const configDir = env.CLAUDE_CONFIG_DIR ?? (home ? join(home, ".claude") : undefined);
  if (configDir) {
    const login = join(configDir, ".credentials.json");
    if (await isFile(login)) return ".credentials.json";
    // A key saved by `/login` with a Console account.
    const state = join(env.CLAUDE_CONFIG_DIR ?? home ?? configDir, ".claude.json");
    if (nonEmpty((await readJson(state))?.primaryApiKey)) return ".claude.json";
  }
  const settings = [...(configDir ? [join(configDir, "settings.json")] : []), MANAGED_SETTINGS];
  for (const file of settings) {
    if (nonEmpty((await readJson(file))?.apiKeyHelper)) return "apiKeyHelper";
  }
  if (platform === "darwin") return "macOS Keychain (assumed)";
  throw new MissingCredentialsError();
}
