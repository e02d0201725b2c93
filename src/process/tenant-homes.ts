import { chmod, chown, mkdir, stat } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "../log.js";
import type { Database } from "../store/db.js";
import { getKey } from "../store/keys.js";
import { agentFiles } from "./agent-files.js";
import { type AgentUser, AgentUserError, type RunAs } from "./agent-user.js";

// Each tenant (API key) gets a HOME of its own for its agents: the CLI's transcripts, settings
// and caches, and its TMPDIR. All tenants' agents share one OS user, so what keeps them apart is
// the group: tenant n's agents run with group id `gidBase + n` as their real and effective
// group, and its HOME is owned by the server with that group and mode 2770. Another tenant's
// agent is neither the owner nor in the group, so it can neither list nor read the HOME; and the
// kernel lets a process read another's /proc/<pid>/environ, memory or cwd only when user AND
// group ids match, so it cannot reach a running agent of another tenant either.
//
// Every state dir a CLI keeps goes in the tenant's HOME: Claude's ~/.claude by itself, and
// codex's CODEX_HOME (its threads) is pointed there too, never at the operator's shared one,
// where one tenant's agent (the same OS user as every other's) could read another's threads.
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

export class TenantHomes {
  /** Key id -> its tenant number, which never changes. */
  private readonly numbers = new Map<string, number>();
  private rootReady: Promise<void> | undefined;

  private readonly homesDir: string;
  private readonly gidBase: number;

  constructor(
    private readonly db: Database,
    readonly user: AgentUser,
    where: { homesDir: string; tenantGidBase: number },
    /** The agents' environment: its PATH finds the tools the agent's file work runs. */
    private readonly env: Record<string, string>,
    private readonly logger: Logger,
  ) {
    this.homesDir = where.homesDir;
    this.gidBase = where.tenantGidBase;
  }

  /** The identity a session of `ownerKeyId` (null: auth is off) runs its agents with. */
  async identityFor(ownerKeyId: string | null): Promise<AgentIdentity> {
    const number = ownerKeyId === null ? 0 : await this.tenantNumber(ownerKeyId);
    const gid = this.gidBase + number;
    const home = path.join(this.homesDir, ownerKeyId ?? "no-key");
    const tmp = path.join(home, "tmp");
    const codexHome = path.join(home, ".codex");
    const runAs = { uid: this.user.uid, gid };
    await this.prepare();
    await this.ownedByTenant(home, gid);
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
      const key = await getKey(this.db, keyId);
      if (!key) throw new Error(`no API key ${keyId} for the session's tenant`);
      number = key.tenantNumber;
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

  /** Made if missing, and (again) given to the tenant's group: 2770, so new files keep the group. */
  private async ownedByTenant(home: string, gid: number) {
    await mkdir(home, { recursive: true });
    await chown(home, process.getuid?.() ?? 0, gid);
    await chmod(home, 0o2770);
  }
}
