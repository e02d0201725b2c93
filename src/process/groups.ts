import { readFileSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import type { Logger } from "../log.js";

// Process-group handling for agent CLI children (spawned with `detached: true`, so a pid is its
// process group id) and the bounded stderr tail.

/** Sends `signal` to every process of the group; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return false;
    throw err;
  }
}

/**
 * Whether any live process is left in the group. On Linux, zombies do not count: an init that
 * does not reap orphans (common in containers) would otherwise keep a dead group "alive".
 */
export async function groupAlive(pgid: number): Promise<boolean> {
  try {
    process.kill(-pgid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
  if (process.platform !== "linux") return true;
  // The leader's own state answers while it lives, as it mostly does while this is asked: the
  // scan of every process on the machine is left for a group whose leader is gone.
  const leader = processState(await readFile(`/proc/${pgid}/stat`, "utf8").catch(() => undefined));
  if (leader?.pgrp === pgid && leader.live) return true;
  const members = await liveGroupMembers(pgid);
  return members === undefined || members.length > 0;
}

/** A /proc/<pid>/stat line's process group and whether the process is more than a zombie. */
function processState(stat: string | undefined): { pgrp: number; live: boolean } | undefined {
  if (stat === undefined) return undefined;
  // Fields after the command name (which may itself contain ") "): state ppid pgrp …
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { pgrp: Number(fields[2]), live: fields[0] !== "Z" && fields[0] !== "X" };
}

/** Pids of the group's live (non-zombie) processes, from /proc; undefined when unreadable. */
export async function liveGroupMembers(pgid: number): Promise<number[] | undefined> {
  let entries: string[];
  try {
    entries = await readdir("/proc");
  } catch {
    return undefined;
  }
  const pids = entries.filter((e) => /^\d+$/.test(e));
  const stats = await Promise.all(
    pids.map((pid) => readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined)),
  );
  const live: number[] = [];
  stats.forEach((stat, i) => {
    const state = processState(stat);
    if (state?.pgrp === pgid && state.live) live.push(Number(pids[i]));
  });
  return live;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function waitGone(pgid: number, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  for (;;) {
    if (!(await groupAlive(pgid))) return true;
    const left = deadline - performance.now();
    if (left <= 0) return false;
    await sleep(Math.min(25, left));
  }
}

let boot: string | null | undefined;

/**
 * This boot of the machine (Linux's random boot id), so that a process group number recorded
 * before a restart is only acted on when it cannot have been reused by a reboot; null elsewhere.
 */
export function bootId(): string | null {
  if (boot === undefined) {
    try {
      boot = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || null;
    } catch {
      boot = null;
    }
  }
  return boot;
}

/** SIGTERM to the whole group, then SIGKILL to what is left after `graceMs`. */
export async function terminateGroup(
  pgid: number,
  graceMs: number,
  logger?: Logger,
): Promise<void> {
  if (!signalGroup(pgid, "SIGTERM")) return;
  if (await waitGone(pgid, graceMs)) return;
  logger?.warn("an agent process group ignored SIGTERM; sending SIGKILL", {
    pgid,
    grace_ms: graceMs,
  });
  if (!signalGroup(pgid, "SIGKILL")) return;
  if (!(await waitGone(pgid, 1000)))
    logger?.error("an agent process group survived SIGKILL", { pgid });
}

/** Keeps the last `maxBytes` bytes written to it. */
export class ByteTail {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): void {
    if (this.maxBytes <= 0 || chunk.length === 0) return;
    if (chunk.length >= this.maxBytes) {
      this.chunks = [Buffer.from(chunk.subarray(chunk.length - this.maxBytes))];
      this.size = this.maxBytes;
      return;
    }
    this.chunks.push(chunk);
    this.size += chunk.length;
    // Compact once twice the bound is held: amortised linear, however small the chunks.
    if (this.size > 2 * this.maxBytes) {
      const all = Buffer.concat(this.chunks, this.size);
      this.chunks = [Buffer.from(all.subarray(all.length - this.maxBytes))];
      this.size = this.maxBytes;
    }
  }

  text(): string {
    const all = Buffer.concat(this.chunks, this.size);
    const tail = all.length > this.maxBytes ? all.subarray(all.length - this.maxBytes) : all;
    // The cut may fall inside a multibyte character; drop its undecodable remains.
    return tail.toString("utf8").replace(/^\uFFFD+/, "");
  }
}
