import { readFileSync } from "node:fs";
import path from "node:path";
import type { z } from "zod";

// The environment as the sections read it: empty variables unset, secrets read from their files,
// old names moved to new ones; and the problem lines of a value that does not parse.

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  ${p}`).join("\n")}`);
  }
}

/** The variables that are set: an empty one means "not set", as in most shells' `VAR= cmd` idiom. */
export function presentVariables(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ""),
  );
}

/**
 * `env` with each `<NAME>_FILE` of a secret setting (`secrets`) replaced by `<NAME>` and the file's
 * content (the Docker-secrets convention, so that no secret need be in the process's environment
 * at all), and the files read.
 */
export function readSecretFiles(
  env: Record<string, string>,
  secrets: readonly string[],
): { env: Record<string, string>; files: string[] } {
  const out = { ...env };
  const files: string[] = [];
  const problems: string[] = [];
  for (const name of secrets) {
    const file = out[`${name}_FILE`];
    if (file === undefined) continue;
    delete out[`${name}_FILE`];
    if (out[name] !== undefined) {
      problems.push(`${name}_FILE: set either ${name} or ${name}_FILE, not both`);
      continue;
    }
    let value: string;
    try {
      // A file written by `echo` or an editor ends in a newline that is not part of the secret.
      value = readFileSync(file, "utf8").replace(/\r?\n$/, "");
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      problems.push(`${name}_FILE: cannot read ${JSON.stringify(file)} (${code})`);
      continue;
    }
    if (value === "") problems.push(`${name}_FILE: ${JSON.stringify(file)} is empty`);
    else out[name] = value;
    files.push(path.resolve(file));
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { env: out, files };
}

/**
 * Settings of every agent that had Claude's name before there was a second agent: the old name
 * still works (start-up logs that it is deprecated), but not together with the new one.
 */
const RENAMED = {
  AGENT_BRIDGE_CLAUDE_WORK_DIR: "AGENT_BRIDGE_WORK_DIR",
  AGENT_BRIDGE_CLAUDE_PERMISSION_MODE: "AGENT_BRIDGE_PERMISSION_MODE",
  AGENT_BRIDGE_CLAUDE_TIMEOUT_SECONDS: "AGENT_BRIDGE_RUN_TIMEOUT_SECONDS",
  AGENT_BRIDGE_CLAUDE_IDLE_TIMEOUT_SECONDS: "AGENT_BRIDGE_IDLE_TIMEOUT_SECONDS",
  AGENT_BRIDGE_CLAUDE_WORKTREE_ENABLED: "AGENT_BRIDGE_WORKTREE_ENABLED",
  AGENT_BRIDGE_CLAUDE_EFFORT: "AGENT_BRIDGE_EFFORT",
  AGENT_BRIDGE_CLAUDE_MAX_LINE_BYTES: "AGENT_BRIDGE_MAX_LINE_BYTES",
} as const;

/** `env` with each old name of a renamed setting moved to its new name. */
export function renameDeprecated(env: Record<string, string>): {
  env: Record<string, string>;
  deprecated: string[];
  /** New name -> the old one it was set as, so that a problem names what the operator wrote. */
  setAs: Record<string, string>;
} {
  const out = { ...env };
  const deprecated: string[] = [];
  const setAs: Record<string, string> = {};
  const problems: string[] = [];
  for (const [old, name] of Object.entries(RENAMED)) {
    if (out[old] === undefined) continue;
    if (out[name] !== undefined) problems.push(`${old}: set ${name} (its new name), not both`);
    else {
      out[name] = out[old];
      setAs[name] = old;
      deprecated.push(`${old} is deprecated: it applies to every agent now, as ${name}`);
    }
    delete out[old];
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { env: out, deprecated, setAs };
}

/** One line per problem, naming the setting as the operator wrote it, and its value unless secret. */
export function problemLines(
  issues: readonly z.core.$ZodIssue[],
  env: Record<string, string>,
  setAs: Record<string, string>,
  secrets: readonly string[],
): string[] {
  return issues.map((i) => {
    const name = String(i.path[0]);
    // A secret's value is not repeated: the line may end up in a log.
    const got = secrets.includes(name) ? "" : ` (got ${JSON.stringify(env[name])})`;
    return `${[setAs[name] ?? name, ...i.path.slice(1)].join(".")}: ${i.message}${got}`;
  });
}
