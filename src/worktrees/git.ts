import path from "node:path";
import { commandAs } from "../process/agent-user.js";
import { type Ended, runToEnd } from "../process/run-to-end.js";
import type { Launch, Sandbox } from "../process/sandbox.js";
import type { AgentIdentity, TenantHomes } from "../process/tenant-homes.js";

// Plain `git` as a subprocess: argument arrays, never a shell; the output of one command at a time.
//
// A session's repository is its agent's to write, `.git/config` included, and that config can make
// git run commands (core.fsmonitor, hooks through core.hooksPath, filter.<x>.clean, diff.external…);
// git has no switch to ignore it. So the server's git in a session's repository runs as that
// session's agent would: as its tenant's user, in a sandbox like its runs' (only the repository
// and the tenant's HOME writable, every other work dir hidden) and with no network at all.
// Whatever a planted command does there, the tenant's own agent could do anyway.

/** Output past this is a failure: git's answers here are short lists. */
const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;

/**
 * How long one git command may take: its work here is local and quick, and a command a
 * repository's config planted must not hold a session's removal, or the sweep, for ever.
 */
const TIME_LIMIT_MS = 60_000;

/**
 * Git refuses a repository another user owns, and a tenant's git works in repositories of the
 * agent user's (the tenant's ~/.gitconfig says the same, for the CLI's git).
 */
const ANY_OWNER = {
  GIT_CONFIG_COUNT: "1",
  GIT_CONFIG_KEY_0: "safe.directory",
  GIT_CONFIG_VALUE_0: "*",
};

/** What git's environment takes of the agents': where the tools are, and whose HOME. */
const KEPT = ["PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "LANG", "LC_ALL"] as const;

export class GitError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly code: number | null,
    readonly stderr: string,
  ) {
    super(`git ${args.join(" ")} failed (${code ?? "signal"}): ${stderr.trim() || "no output"}`);
  }
}

/** How one git command starts: its command line and its complete environment. */
type Start = (
  cwd: string,
  args: string[],
  reads: readonly string[],
) => Promise<Launch & { env: Record<string, string> }>;

export interface GitRunOptions {
  /**
   * Directories outside the repository the command reads (a checkout cache to fetch from): shown
   * read-only in its sandbox, where they would be hidden.
   */
  reads?: readonly string[];
  /** Its own time limit: a fetch may bring many objects. Default: the runner's. */
  timeLimitMs?: number;
}

const within = (p: string, dir: string) => p === dir || p.startsWith(`${dir}/`);

/** Git in one repository, as whoever the server runs it as there. */
export class Git {
  constructor(
    /** The repository's top directory: a session's work dir. */
    readonly repo: string,
    private readonly start: Start,
    private readonly timeLimitMs: number = TIME_LIMIT_MS,
  ) {}

  /** Whether `p` lies in the repository, where this git may run. */
  holds(p: string): boolean {
    return within(path.resolve(p), path.resolve(this.repo));
  }

  /**
   * Runs `git <args>` in `cwd` (the repository, or a worktree in it); resolves with stdout,
   * rejects with a GitError.
   */
  async run(
    args: readonly string[],
    cwd: string = this.repo,
    { reads = [], timeLimitMs = this.timeLimitMs }: GitRunOptions = {},
  ): Promise<string> {
    if (!this.holds(cwd)) throw new GitError(args, null, `${cwd} is not in ${this.repo}`);
    // Started in the repository, and taken into a worktree by git itself: the sandbox's user
    // enters its work dir before it is the tenant's, and a worktree is the tenant's alone.
    const into = path.resolve(cwd) === path.resolve(this.repo) ? [] : ["-C", cwd];
    let ended: Ended;
    try {
      const launch = await this.start(this.repo, [...into, ...args], reads);
      // stdin is closed: nothing waits for input.
      ended = await runToEnd(
        launch,
        this.repo,
        {},
        {
          timeLimitMs,
          maxOutputBytes: MAX_OUTPUT_BYTES,
        },
      );
    } catch (err) {
      // A missing directory, or a link planted on its path (the sandbox refuses to follow it).
      throw new GitError(args, null, (err as Error).message);
    }
    const { stdout, stderr, exit, late } = ended;
    if (late) throw new GitError(args, null, `stopped after ${timeLimitMs} ms`);
    if (exit.code === 0 && stdout !== undefined) return stdout;
    throw new GitError(args, exit.code, stderr ?? "more output than git gives here");
  }

  /**
   * Runs `git <args>` in `cwd` and resolves with the first `maxBytes` of its stdout, `cut` when
   * there was more (git is stopped there); exit codes in `exitCodes` (default 0) count as success,
   * as `git diff --no-index` exits 1 when the files differ.
   */
  async read(
    args: readonly string[],
    cwd: string,
    { maxBytes, exitCodes = [0] }: { maxBytes: number; exitCodes?: readonly number[] },
  ): Promise<{ text: string; cut: boolean }> {
    if (!this.holds(cwd)) throw new GitError(args, null, `${cwd} is not in ${this.repo}`);
    const into = path.resolve(cwd) === path.resolve(this.repo) ? [] : ["-C", cwd];
    let ended: Ended;
    try {
      const launch = await this.start(this.repo, [...into, ...args], []);
      ended = await runToEnd(
        launch,
        this.repo,
        {},
        {
          timeLimitMs: this.timeLimitMs,
          maxOutputBytes: maxBytes,
          keepHead: true,
        },
      );
    } catch (err) {
      throw new GitError(args, null, (err as Error).message);
    }
    const { stdout, stderr, exit, late, cut = false } = ended;
    if (late) throw new GitError(args, null, `stopped after ${this.timeLimitMs} ms`);
    if (stdout !== undefined && (cut || (exit.code !== null && exitCodes.includes(exit.code)))) {
      return { text: stdout, cut };
    }
    throw new GitError(args, exit.code, stderr ?? "more output than git gives here");
  }

  /** stdout trimmed, or undefined when git exits non-zero (a "no" answer, not a failure). */
  async maybe(args: readonly string[], cwd: string = this.repo): Promise<string | undefined> {
    try {
      return (await this.run(args, cwd)).trim();
    } catch (err) {
      if (err instanceof GitError) return undefined;
      throw err;
    }
  }
}

export interface GitRunnerOptions {
  /** The agents' environment: git's PATH, and its HOME where tenants have none of their own. */
  env: Record<string, string>;
  /** Set: git for a session runs in a sandbox like its runs'. */
  sandbox?: Sandbox;
  /** Set: git for a session runs as its tenant's user (AGENT_BRIDGE_AGENT_USER). */
  homes?: TenantHomes;
  /** How long one git command may take; a minute by default. */
  timeLimitMs?: number;
}

/** Starts the server's git: for a session, as that session's agent would run. */
export class GitRunner {
  constructor(private readonly opts: GitRunnerOptions) {}

  /**
   * Git in a session's repository `repo`, as the session's tenant (`ownerKeyId`, null when auth
   * is off) and, with a sandbox, in one with the repository's `.git` writable and no network.
   */
  forSession(ownerKeyId: string | null, repo: string): Git {
    const { homes } = this.opts;
    let identity: Promise<AgentIdentity | undefined> | undefined;
    const start: Start = async (cwd, args, reads) => {
      identity ??= homes ? homes.identityFor(ownerKeyId) : Promise.resolve(undefined);
      return this.launch(repo, cwd, args, await identity, reads);
    };
    return new Git(repo, start, this.opts.timeLimitMs);
  }

  private async launch(
    repo: string,
    cwd: string,
    args: string[],
    who: AgentIdentity | undefined,
    reads: readonly string[],
  ): Promise<Launch> {
    const env = gitEnv({ ...this.opts.env, ...who?.env }, who !== undefined);
    if (this.opts.sandbox) {
      const launch = await this.opts.sandbox.command({
        bin: "git",
        args,
        cwd,
        env,
        ...(who ? { runAs: who.runAs } : {}),
        // Besides `cwd`: the objects, refs and worktree records git writes. Never a network: a
        // pull request's head comes from the server's checkout cache (checkout-cache.ts).
        reach: { writable: [path.join(repo, ".git")], readOnly: [...reads], offline: true },
      });
      return { ...launch, env: { ...env, ...launch.env } };
    }
    const [bin, argv] = who ? commandAs(who.runAs, "git", args) : ["git", args];
    return { bin, args: argv, dirs: [], env };
  }

  /**
   * Git in `dir` as the server's own user, outside any sandbox: only for commands that read
   * config and refs and run nothing a repository's config names (the worktree prerequisites).
   */
  asServer(dir: string): Git {
    const env = gitEnv(this.opts.env, this.opts.homes !== undefined);
    const start: Start = async (_cwd, args) => ({ bin: "git", args, dirs: [], env });
    return new Git(dir, start, this.opts.timeLimitMs);
  }
}

/** `base`'s few variables git needs; told to work in repositories of other users' when `shared`. */
function gitEnv(base: Record<string, string>, shared: boolean): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of KEPT) {
    const value = base[name];
    if (value !== undefined) env[name] = value;
  }
  return shared ? { ...env, ...ANY_OWNER } : env;
}
