import { execFile } from "node:child_process";
import { chmod, chown, lstat, mkdir, stat } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import type { Logger } from "../log.js";
import { agentFiles } from "./agent-files.js";
import { type AgentUser, AgentUserError, commandAs, type RunAs } from "./agent-user.js";
import { type TenantIdRange, tenantIdRangeRefusal, tenantIds } from "./tenant-ids.js";

// Each tenant (API key) gets a HOME of its own for its agents: the CLI's transcripts, settings
// and caches, and its TMPDIR. Tenant n's agents run as user id `uidBase + n` with group id
// `gidBase + n` (tenant-ids.ts), and its HOME is theirs, mode 0700. Another tenant's agent is
// another user: it can neither list nor read the HOME, nor signal a running agent (the kernel
// asks for the same user), nor read its /proc/<pid>/environ, memory or cwd (the same user and
// group), nor reach the socket its CLI listens on (Claude Code puts it in its TMPDIR, now that
// the directory above is its user's alone). Two sessions of one key share the uid: one tenant's
// agents are one user.
//
// Every state dir a CLI keeps goes in the tenant's HOME: Claude's ~/.claude by itself, and
// codex's CODEX_HOME (its threads) is pointed there too, never at the operator's shared one.
//
// The server makes the HOME itself, in the homes' directory, which is the server's alone: nothing
// there can be swapped under it. Inside, the agent can change everything, so the directories the
// server makes there (TMPDIR, CODEX_HOME) are made as the agent (agent-files.ts says why).

/** A tenant's agent: who it runs as and the environment that places it in its HOME. */
export interface AgentIdentity {
  runAs: RunAs;
  /** HOME, TMPDIR and the user's names, laid over the CLI's environment. */
  env: Record<string, string>;
}

/**
 * The tenant number of an API key, which never changes; undefined when there is no such key.
 * The caller reads it from the keys' table.
 */
export type TenantNumberOf = (keyId: string) => Promise<number | undefined>;

const run = promisify(execFile);
/** How long the server waits on a tool it runs on a HOME: far more than its work needs. */
const TOOL_TIME_LIMIT_MS = 30_000;

/** `home` its tenant's alone. Safe by path: the homes' directory is root's, so `home` is it. */
async function own(home: string, to: RunAs) {
  await chown(home, to.uid, to.gid);
  await chmod(home, 0o700);
}

export class TenantHomes {
  /** Key id -> its tenant number, which never changes. */
  private readonly numbers = new Map<string, number>();
  /** HOME -> its preparation at first use (moving it from the shared agent user, if it was). */
  private readonly owned = new Map<string, Promise<void>>();
  private rootReady: Promise<void> | undefined;

  private readonly homesDir: string;
  private readonly range: TenantIdRange;

  constructor(
    private readonly tenantNumberOf: TenantNumberOf,
    readonly user: AgentUser,
    where: TenantIdRange & { homesDir: string },
    /** The agents' environment: its PATH finds the tools the agent's file work runs. */
    private readonly env: Record<string, string>,
    private readonly logger: Logger,
  ) {
    this.homesDir = where.homesDir;
    this.range = where;
    const server = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
    const refusal = tenantIdRangeRefusal(where, {
      uids: { root: 0, "the server": server.uid, [`the agent user ${user.name}`]: user.uid },
      gids: { root: 0, "the server": server.gid, [`the agent user ${user.name}`]: user.gid },
    });
    if (refusal) throw new AgentUserError(refusal);
  }

  /** The identity a session of `ownerKeyId` (null: auth is off) runs its agents with. */
  async identityFor(ownerKeyId: string | null): Promise<AgentIdentity> {
    const number = ownerKeyId === null ? 0 : await this.tenantNumber(ownerKeyId);
    const { uid, gid } = tenantIds(this.range, number);
    const home = path.join(this.homesDir, ownerKeyId ?? "no-key");
    const tmp = path.join(home, "tmp");
    const codexHome = path.join(home, ".codex");
    const runAs = { uid, gid, groups: this.user.groups };
    await this.prepare();
    await this.ownedByTenant(home, runAs);
    const replaced = await agentFiles(this.env, runAs).makeDirs([tmp, codexHome]);
    for (const dir of replaced) {
      this.logger.warn("replaced what the agent left in place of a directory of its HOME", {
        path: dir,
      });
    }
    return {
      runAs,
      env: {
        HOME: home,
        TMPDIR: tmp,
        CLAUDE_CODE_TMPDIR: tmp,
        CODEX_HOME: codexHome,
        USER: this.user.name,
        LOGNAME: this.user.name,
      },
    };
  }

  private async tenantNumber(keyId: string): Promise<number> {
    let number = this.numbers.get(keyId);
    if (number === undefined) {
      number = await this.tenantNumberOf(keyId);
      if (number === undefined) throw new Error(`no API key ${keyId} for the session's tenant`);
      this.numbers.set(keyId, number);
    }
    return number;
  }

  /**
   * Makes the homes' directory: the agents may pass through it (x) but not list it (r), so a
   * tenant cannot learn of another's HOME. Fails, naming it, when a directory above it keeps the
   * agents out. Called at start-up; runs wait for it too.
   */
  prepare(): Promise<void> {
    this.rootReady ??= (async () => {
      await mkdir(this.homesDir, { recursive: true, mode: 0o711 });
      await chmod(this.homesDir, 0o711);
      for (let dir = path.dirname(this.homesDir); ; dir = path.dirname(dir)) {
        if (((await stat(dir)).mode & 0o001) === 0) {
          throw new AgentUserError(
            `the agent user cannot reach its homes in ${this.homesDir}: ${dir} is not searchable by other users; chmod o+x ${dir}, or set AGENT_BRIDGE_AGENT_HOMES_DIR to a directory the agent user can reach`,
          );
        }
        if (dir === path.dirname(dir)) break;
      }
    })();
    return this.rootReady;
  }

  /**
   * Made if missing, and (again) given to the tenant's uid and group, 0700. Once per HOME and
   * process: a HOME of the days when every tenant's agents were the agent user (root's, its
   * files the agent user's) is handed over first, and git is told to trust the work dirs.
   */
  private async ownedByTenant(home: string, to: RunAs) {
    let ready = this.owned.get(home);
    if (!ready) {
      ready = this.takeOver(home, to);
      this.owned.set(home, ready);
      ready.catch(() => this.owned.delete(home));
    }
    await ready;
    await own(home, to);
  }

  private async takeOver(home: string, to: RunAs) {
    const made = await mkdir(home, { recursive: true, mode: 0o700 });
    if (!made && (await lstat(home)).uid !== to.uid) await this.handOver(home, to);
    await own(home, to);
    // Git refuses a repository another user owns, and the work dirs are the agent user's, shared
    // with every tenant through its group. The CLI runs git without the environment's GIT_CONFIG_*,
    // so this goes in ~/.gitconfig, written by git run as the tenant (the agent may have put
    // anything there: a failure is its own tenant's, logged, and the run goes on).
    const [bin, args] = commandAs(to, "git", [
      "config",
      "--global",
      "--replace-all",
      "safe.directory",
      "*",
    ]);
    await run(bin, args, {
      env: { ...this.toolEnv(), HOME: home },
      cwd: "/",
      timeout: TOOL_TIME_LIMIT_MS,
    }).catch((err: Error) =>
      this.logger.warn("could not tell the tenant's git to trust the work dirs", {
        path: home,
        error: err.message,
      }),
    );
  }

  /** The environment of the tools the server runs here: the agents' PATH, and nothing else. */
  private toolEnv(): Record<string, string> {
    return { LC_ALL: "C", ...(this.env.PATH ? { PATH: this.env.PATH } : {}) };
  }

  private async handOver(home: string, to: RunAs) {
    // Shut first: while the HOME is root's and 0700, no agent (an old one of the agent user's
    // with the tenant's group, or a new one of the tenant's) can change anything in it under the
    // walk. chown -R -P never follows a link (it changes the link), opens each directory from its
    // parent's handle, no-follow, and opens no file; it gives the tenant only what the agent user
    // made with the tenant's group: a hard link to a file of anyone else's is left as it is.
    await chmod(home, 0o700);
    await run(
      "chown",
      [
        "-R",
        "-P",
        "--no-dereference",
        `--from=${this.user.uid}:${to.gid}`,
        `${to.uid}:${to.gid}`,
        "--",
        home,
      ],
      { env: this.toolEnv(), timeout: TOOL_TIME_LIMIT_MS },
    );
    this.logger.info("gave a HOME of the shared agent user's to its tenant's own user", {
      path: home,
      uid: to.uid,
    });
  }
}
