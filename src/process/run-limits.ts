import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  writeFileSync,
} from "node:fs";
import { mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "../log.js";
import { MemoryLimitError, ProcessLimitError, type RunLimitError } from "./errors.js";

// Each sandboxed run gets a cgroup of its own in the memory and pids controllers of cgroup v1, made
// beneath the server's own (so whatever bounds the server, a container's or a service's limit,
// bounds its runs too) and removed after it. The run's command enters it before anything in it
// can fork: it starts as `sh -c`, which moves itself into each group and then execs the sandbox, so
// bwrap and all it starts are born inside. It moves its one thread, writing `0` (itself) to
// `tasks`: a pid written to `cgroup.procs` moves a whole process under the kernel's global lock on
// every process's group, which waits out an RCU grace period (bench/results/HISTORY.md has what
// that cost a run); a thread moving itself takes no such lock (cgroup_procs_write_start in the
// kernel's kernel/cgroup/cgroup.c).
//
// A hit limit ends the run at once, `failed` with its own code: a memory hog is OOM-killed by the
// kernel, but the CLI would go on (and a fork bomb, whose forks only fail, would run to the
// timeout), so the bridge watches the groups' counters while the run lasts (a few small reads a
// second) and reads them once more at its end, which catches a limit hit just before the CLI's
// outcome. What counts as hit: an OOM kill in the group (`oom_kill` in memory.oom_control; not
// memory.failcnt, which also counts the page cache reclaimed at the limit, harmlessly), and a
// refused fork (`max` in pids.events).
//
// cgroup v2 (the unified hierarchy) is detected and reported, not used: there a group with
// processes (the server's) cannot hand its controllers to groups beneath it, so it needs a
// delegated subtree the server moves itself into first.

/** What the operator asked for; 0: no limit of that kind. */
export interface LimitsConfig {
  memoryBytes: number;
  maxProcesses: number;
}

/** What `/readyz` shows of the runs' limits. */
export type LimitsStatus =
  | {
      enabled: true;
      mechanism: "cgroup v1";
      /** null: no limit of that kind. */
      memory_mb: number | null;
      max_processes: number | null;
    }
  | { enabled: false; reason: string };

/** The server's own groups, one directory per controller this uses; or why there are none. */
export type OwnCgroups = { memory?: string; pids?: string } | { unified: string } | string;

/**
 * The directories of the groups this process is in, from /proc/self/mountinfo and
 * /proc/self/cgroup: a v1 controller's mount point plus the group's path below the mount's root
 * (not "/" in a container that was given a subtree).
 */
export function ownCgroups(mountinfo: string, cgroup: string): OwnCgroups {
  const groupOf = new Map<string, string>();
  for (const line of cgroup.split("\n")) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    const [, controllers = "", group = ""] = match;
    for (const name of controllers.split(",")) groupOf.set(name, group);
  }
  const found: { memory?: string; pids?: string } = {};
  let unified: string | undefined;
  for (const line of mountinfo.split("\n")) {
    const [before, after] = line.split(" - ");
    const fields = before?.split(" ") ?? [];
    const [fstype, , superOptions = ""] = after?.split(" ") ?? [];
    const root = fields[3];
    const mountPoint = fields[4];
    if (!root || !mountPoint) continue;
    const at = (group: string | undefined) => {
      if (group === undefined) return undefined;
      const below = path.posix.relative(root, group);
      return below.startsWith("..") ? undefined : path.posix.join(mountPoint, below);
    };
    if (fstype === "cgroup2") unified ??= at(groupOf.get(""));
    if (fstype !== "cgroup") continue;
    const options = superOptions.split(",");
    for (const name of ["memory", "pids"] as const) {
      if (options.includes(name)) found[name] ??= at(groupOf.get(name));
    }
  }
  if (found.memory || found.pids) return found;
  if (unified) return { unified };
  return "no cgroup hierarchy with the memory or pids controller is mounted";
}

const errorCode = (err: unknown) => (err as NodeJS.ErrnoException).code ?? String(err);

/** This process's own groups, as /proc says. */
export function readOwnCgroups(): OwnCgroups {
  try {
    return ownCgroups(
      readFileSync("/proc/self/mountinfo", "utf8"),
      readFileSync("/proc/self/cgroup", "utf8"),
    );
  } catch (err) {
    return `cannot read this process's cgroups (${errorCode(err)})`;
  }
}

/** A flat-keyed cgroup file ("oom_kill 3\nunder_oom 0", "max 12") as name -> number. */
export function parseFlatKeyed(text: string): Map<string, number> {
  const values = new Map<string, number>();
  for (const line of text.split("\n")) {
    const [name, value] = line.trim().split(/\s+/);
    if (name && value !== undefined && /^\d+$/.test(value)) values.set(name, Number(value));
  }
  return values;
}

/** The run's groups are named after the server's pid: the sweep leaves a live server's alone. */
const PREFIX = "agent-bridge-";
const groupName = (suffix: string) => `${PREFIX}${process.pid}-${suffix}`;

/** Moves itself (one thread) into each `tasks` given before `--`, then execs what follows it. */
const ENTER = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"';

/** How often a running run's counters are read. */
const WATCH_MS = 250;

/** Whether a process of that pid exists (of any user). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** One run's groups, from its start until `remove()`. */
export class RunCgroup {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dirs: { memory?: string; pids?: string },
    private readonly limits: LimitsConfig,
    private readonly logger: Logger,
  ) {}

  /** The command line that runs `bin` with `args` inside the groups. */
  enter(bin: string, args: string[]): [string, string[]] {
    const tasks = Object.values(this.dirs).map((dir) => path.join(dir, "tasks"));
    return ["/bin/sh", ["-c", ENTER, "agent-bridge-limits", ...tasks, "--", bin, ...args]];
  }

  /** The limit the run hit, if it hit one (the memory limit first: it is also what breaks forks). */
  async limitHit(): Promise<RunLimitError | undefined> {
    const counter = async (dir: string | undefined, file: string, name: string) =>
      dir
        ? (parseFlatKeyed(await readFile(path.join(dir, file), "utf8").catch(() => "")).get(name) ??
          0)
        : 0;
    const [oomKills, refusedForks] = await Promise.all([
      counter(this.dirs.memory, "memory.oom_control", "oom_kill"),
      counter(this.dirs.pids, "pids.events", "max"),
    ]);
    if (oomKills > 0) return new MemoryLimitError(this.limits.memoryBytes);
    if (refusedForks > 0) return new ProcessLimitError(this.limits.maxProcesses);
    return undefined;
  }

  /** Calls `onHit` once, as soon as a limit is hit, until `remove()`. */
  watch(onHit: (err: RunLimitError) => void): void {
    const look = async () => {
      const hit = await this.limitHit();
      if (this.timer === undefined) return;
      if (hit) onHit(hit);
      else this.timer = setTimeout(look, WATCH_MS);
    };
    this.timer = setTimeout(look, WATCH_MS);
  }

  /**
   * Removes the groups, once what is left in them is killed (a sandbox's processes die with it,
   * but not all in the same instant). Never throws: a group it cannot remove is logged.
   */
  async remove(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    let left = Object.values(this.dirs);
    for (let attempt = 0; left.length > 0; attempt++) {
      const results = await Promise.all(left.map((dir) => removeGroup(dir)));
      const failed = left.filter((_, i) => results[i] !== undefined);
      if (failed.length === 0) return;
      if (attempt === 100) {
        this.logger.warn("could not remove a run's cgroup", {
          cgroups: failed,
          error: results.find((r) => r !== undefined),
        });
        return;
      }
      left = failed;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** Kills what is in the group and removes it; the error code when it is still there. */
async function removeGroup(dir: string): Promise<string | undefined> {
  try {
    const procs = await readFile(path.join(dir, "cgroup.procs"), "utf8");
    for (const pid of procs.split("\n").filter(Boolean)) {
      try {
        process.kill(Number(pid), "SIGKILL");
      } catch {
        // Gone already.
      }
    }
    await rmdir(dir);
    return undefined;
  } catch (err) {
    return errorCode(err) === "ENOENT" ? undefined : errorCode(err);
  }
}

/** Makes a cgroup per run beneath the server's own. */
export class RunLimits {
  private made = 0;

  constructor(
    private readonly parents: { memory?: string; pids?: string },
    readonly limits: LimitsConfig,
    private readonly logger: Logger,
  ) {}

  /** A group for one run (named after `runId` when given), its limits set; nothing in it yet. */
  async open(runId?: string): Promise<RunCgroup> {
    const name = groupName(runId ?? `${++this.made}`);
    const dirs: { memory?: string; pids?: string } = {};
    const group = new RunCgroup(dirs, this.limits, this.logger);
    try {
      for (const { controller, settings } of this.plan()) {
        const dir = path.join(this.parents[controller] as string, name);
        await mkdir(dir);
        dirs[controller] = dir;
        for (const [file, value] of settings) await writeFile(path.join(dir, file), value);
      }
      return group;
    } catch (err) {
      await group.remove();
      throw err;
    }
  }

  /**
   * Makes a group as a run's, and removes it (at start-up: the hierarchy may be mounted read-only,
   * or not the server's to write). Why not, when it cannot.
   */
  probe(): string | undefined {
    const name = groupName("probe");
    for (const { controller, settings } of this.plan()) {
      const dir = path.join(this.parents[controller] as string, name);
      try {
        mkdirSync(dir);
        for (const [file, value] of settings) writeFileSync(path.join(dir, file), value);
      } catch (err) {
        return `cannot make a cgroup beneath ${this.parents[controller]} (${errorCode(err)})`;
      } finally {
        if (existsSync(dir)) rmdirSync(dir);
      }
    }
    return undefined;
  }

  /** Each group a run gets, and the files that set its limit, in the order they are written. */
  private plan() {
    const plan: { controller: "memory" | "pids"; settings: [string, string][] }[] = [];
    if (this.parents.memory) {
      const limit = String(this.limits.memoryBytes);
      const settings: [string, string][] = [["memory.limit_in_bytes", limit]];
      // With swap accounting, swap would otherwise stretch the limit (written after: it must stay
      // at least the memory limit).
      if (existsSync(path.join(this.parents.memory, "memory.memsw.limit_in_bytes")))
        settings.push(["memory.memsw.limit_in_bytes", limit]);
      plan.push({ controller: "memory", settings });
    }
    if (this.parents.pids) {
      plan.push({
        controller: "pids",
        settings: [["pids.max", String(this.limits.maxProcesses)]],
      });
    }
    return plan;
  }

  /** Removes the groups a server that is gone left behind (it died before removing them). */
  sweep(): void {
    for (const parent of Object.values(this.parents)) {
      for (const name of readdirSync(parent)) {
        const pid = new RegExp(`^${PREFIX}(\\d+)-`).exec(name)?.[1];
        if (pid === undefined || running(Number(pid))) continue;
        try {
          rmdirSync(path.join(parent, name));
        } catch (err) {
          this.logger.warn("could not remove a stale run cgroup", {
            cgroup: path.join(parent, name),
            error: errorCode(err),
          });
        }
      }
    }
  }
}

/**
 * The runs' limits as configured, where this machine allows them: none when both are 0, or when
 * the server cannot make cgroups here (logged: the runs then run without, bounded only by the
 * machine; the sandbox itself does not depend on them).
 */
export function startRunLimits(
  limits: LimitsConfig,
  logger: Logger,
  own: OwnCgroups = readOwnCgroups(),
): { limits?: RunLimits; status: LimitsStatus } {
  if (limits.memoryBytes === 0 && limits.maxProcesses === 0) {
    return {
      status: {
        enabled: false,
        reason: "AGENT_BRIDGE_RUN_MEMORY_MB and AGENT_BRIDGE_RUN_MAX_PROCESSES are 0",
      },
    };
  }
  const unavailable = (reason: string) => {
    logger.warn("runs have no memory or process limit", { reason });
    return { status: { enabled: false as const, reason } };
  };
  if (typeof own === "string") return unavailable(own);
  if ("unified" in own) {
    return unavailable("cgroup v2 (the unified hierarchy) is not supported yet; only cgroup v1");
  }
  const parents: { memory?: string; pids?: string } = {};
  for (const [name, wanted] of [
    ["memory", limits.memoryBytes > 0],
    ["pids", limits.maxProcesses > 0],
  ] as const) {
    if (!wanted) continue;
    const dir = own[name];
    if (!dir) return unavailable(`the cgroup v1 ${name} controller is not mounted`);
    parents[name] = dir;
  }
  const runLimits = new RunLimits(parents, limits, logger);
  const refused = runLimits.probe();
  if (refused) return unavailable(refused);
  runLimits.sweep();
  const mb = limits.memoryBytes / (1024 * 1024);
  return {
    limits: runLimits,
    status: {
      enabled: true,
      mechanism: "cgroup v1",
      memory_mb: limits.memoryBytes > 0 ? mb : null,
      max_processes: limits.maxProcesses > 0 ? limits.maxProcesses : null,
    },
  };
}
