import { closeSync, constants, fstatSync, openSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Upstream } from "../../gateway/upstream.js";

// Where codex's API key comes from, read once at start-up: the server's environment, else the key
// `codex login --with-api-key` saved in the operator's CODEX_HOME (default ~/.codex). Either way
// it stays with the gateway: codex gets a token of its run's instead, and a tenant's CODEX_HOME
// never gets the operator's auth.json. A ChatGPT login (`codex login`) holds refreshable tokens
// for another API, which the gateway does not carry: codex then has no credentials here.

const KEY_VARIABLES = ["OPENAI_API_KEY", "CODEX_API_KEY"] as const;

/** Why codex cannot run here: no API key the gateway can hold for it. */
export class CodexMissingCredentialsError extends Error {
  constructor(chatgptLogin: boolean) {
    super(
      chatgptLogin
        ? "the codex CLI is logged in with ChatGPT, which the model gateway cannot carry: give it an API key (OPENAI_API_KEY in the server's environment, or `codex login --with-api-key` as the user the server runs as)"
        : "the codex CLI has no credentials: set OPENAI_API_KEY in the server's environment, or save a key with `codex login --with-api-key` as the user the server runs as",
    );
  }
}

/** Where codex's model API is when the operator names none. */
export const DEFAULT_CODEX_BASE_URL = "https://api.openai.com/v1";

/** The API codex calls with the operator's key, as the gateway's upstream. */
export interface CodexUpstream extends Upstream {
  /** The variable codex gets its run's token in. */
  variable: (typeof KEY_VARIABLES)[number];
  /** Where the operator's key came from, as /readyz names it: the variable, or `auth.json`. */
  source: string;
}

/** The operator's CODEX_HOME: as the server's environment names it, else ~/.codex. */
export function operatorCodexHome(env: Record<string, string>): string {
  return env.CODEX_HOME ?? join(env.HOME ?? homedir(), ".codex");
}

/** Larger than any auth.json codex writes. */
const MAX_LOGIN_BYTES = 64 * 1024;

/**
 * The file at `path` when it is a regular file of at most MAX_LOGIN_BYTES, opened without
 * following a link or waiting on a FIFO: without an agent user, runs share the operator's HOME and
 * could have put either there.
 */
function readLoginFile(path: string): string {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size > MAX_LOGIN_BYTES) throw new Error(`${path}: not a login file`);
    return readFileSync(fd, "utf8");
  } finally {
    closeSync(fd);
  }
}

/** What `codex login` saved in the operator's CODEX_HOME; empty when nothing readable is there. */
function savedLogin(env: Record<string, string>): { apiKey?: string; chatgpt: boolean } {
  let saved: unknown;
  try {
    saved = JSON.parse(readLoginFile(join(operatorCodexHome(env), "auth.json")));
  } catch {
    return { chatgpt: false };
  }
  if (typeof saved !== "object" || saved === null) return { chatgpt: false };
  const { OPENAI_API_KEY: apiKey, tokens } = saved as Record<string, unknown>;
  return {
    ...(typeof apiKey === "string" && apiKey.trim() !== "" ? { apiKey } : {}),
    chatgpt: typeof tokens === "object" && tokens !== null,
  };
}

/**
 * The upstream of codex's calls: the operator's key (OPENAI_API_KEY, its `_FILE` read already,
 * else CODEX_API_KEY, else auth.json's), sent as codex sends a key, a bearer token, at `baseUrl`
 * (an OpenAI base URL, which ends in `/v1`). Without a key, the error that says what to give.
 */
export function codexUpstream(
  env: Record<string, string>,
  baseUrl: string,
): CodexUpstream | CodexMissingCredentialsError {
  const variable = KEY_VARIABLES.find((name) => env[name]?.trim());
  const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
  if (variable)
    return { baseUrl, credential: bearer(env[variable] ?? ""), variable, source: variable };
  const login = savedLogin(env);
  if (login.apiKey === undefined) return new CodexMissingCredentialsError(login.chatgpt);
  return {
    baseUrl,
    credential: bearer(login.apiKey),
    variable: "OPENAI_API_KEY",
    source: "auth.json",
  };
}

/**
 * codex's environment: none of the operator's keys and no API address of its own (each run adds
 * the gateway's provider, and its token).
 */
export function withoutCodexUpstream(env: Record<string, string>): Record<string, string> {
  const out = { ...env };
  for (const name of [...KEY_VARIABLES, "OPENAI_BASE_URL"]) delete out[name];
  return out;
}
