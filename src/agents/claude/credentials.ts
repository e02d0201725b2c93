import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Upstream } from "../../gateway/upstream.js";

// Whether the CLI has something to authenticate with, found the way CLI 2.1.328 looks for it and
// without calling the API: its environment first, then a cloud provider switch, then the files
// under its config dir (`$CLAUDE_CONFIG_DIR`, else `$HOME/.claude`). Whether the credential is
// still valid only the API can say; a run that is refused says so with `agent_not_authenticated`.

/** Variables that carry a credential themselves. */
export const CREDENTIAL_VARIABLES = [
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

/** Where the CLI's API is when the operator names none. */
const DEFAULT_BASE_URL = "https://api.anthropic.com";

/** The API the CLI would call with the operator's variables, as the gateway's upstream. */
export interface AnthropicUpstream extends Upstream {
  /**
   * The variable the operator's credential came from (what /readyz names), and the one the CLI is
   * given its run's token in: so that it authenticates as it would have (an OAuth token brings
   * beta headers and defaults of its own).
   */
  variable: (typeof CREDENTIAL_VARIABLES)[number];
  /** The same variable: the operator's credential came from it. */
  source: (typeof CREDENTIAL_VARIABLES)[number];
}

/**
 * The upstream of the CLI's calls when the operator gave a credential in the environment (its
 * `_FILE` form read already), with the headers CLI 2.1.328 would send: `ANTHROPIC_API_KEY` as
 * `x-api-key` and `ANTHROPIC_AUTH_TOKEN` as a bearer token, both when both are set; only without
 * either, `CLAUDE_CODE_OAUTH_TOKEN` as a bearer token. Undefined when there is none, or when a
 * cloud provider is switched on (the CLI then calls the provider with the provider's
 * credentials): the CLI then talks to its API itself, as it is logged in.
 */
export function anthropicUpstream(env: Record<string, string>): AnthropicUpstream | undefined {
  if (PROVIDER_SWITCHES.some((name) => isOn(env[name]))) return undefined;
  const baseUrl = env.ANTHROPIC_BASE_URL ?? DEFAULT_BASE_URL;
  const { ANTHROPIC_API_KEY: apiKey, ANTHROPIC_AUTH_TOKEN: authToken } = env;
  const given = (value: string | undefined): value is string => nonEmpty(value);
  if (given(apiKey) || given(authToken)) {
    const variable = given(apiKey) ? "ANTHROPIC_API_KEY" : "ANTHROPIC_AUTH_TOKEN";
    return {
      baseUrl,
      credential: {
        ...(given(apiKey) ? { "x-api-key": apiKey } : {}),
        ...(given(authToken) ? { authorization: `Bearer ${authToken}` } : {}),
      },
      variable,
      source: variable,
    };
  }
  const oauthToken = env.CLAUDE_CODE_OAUTH_TOKEN;
  if (!given(oauthToken)) return undefined;
  return {
    baseUrl,
    credential: { authorization: `Bearer ${oauthToken}` },
    variable: "CLAUDE_CODE_OAUTH_TOKEN",
    source: "CLAUDE_CODE_OAUTH_TOKEN",
  };
}

/**
 * The CLI's environment when its calls go through the gateway: none of the operator's credentials
 * and no API address of its own (each run adds the gateway's, and its token).
 */
export function withoutUpstream(env: Record<string, string>): Record<string, string> {
  const out = { ...env };
  for (const name of [...CREDENTIAL_VARIABLES, "ANTHROPIC_BASE_URL"]) delete out[name];
  return out;
}
