import { execFileSync } from "node:child_process";
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";

// A Postgres server of the test's own, for tests that stop the database under a running bridge:
// the machine's shared server is never stopped. initdb refuses to run as root, so as root the
// cluster belongs to the `postgres` user.

export interface OwnPostgres {
  /** The URL of its `postgres` database (trust auth on loopback). */
  url: string;
  /** Stops the server (fast shutdown: open connections are cut, as in a crash or failover). */
  stop(): void;
  /** Starts it again on the same port and data. */
  start(): void;
  /**
   * Stops its processes (SIGSTOP) without closing a connection: every statement then waits, with
   * no error, as across a network partition. Returns what lets them go on (SIGCONT).
   */
  freeze(): () => void;
  /** Starts it unless it runs (after a test that failed while it was stopped). */
  ensureStarted(): void;
  /** Stops it for good and removes its files. */
  destroy(): void;
}

const BIN = (() => {
  const versions = readdirSync("/usr/lib/postgresql").sort();
  const latest = versions.at(-1);
  if (!latest) throw new Error("no Postgres server binaries under /usr/lib/postgresql");
  return join("/usr/lib/postgresql", latest, "bin");
})();

export const ownPostgresAvailable = (() => {
  try {
    readdirSync(BIN);
    return true;
  } catch {
    return false;
  }
})();

// Its port stays its own while it is stopped, for it starts again there: a port the kernel hands
// out for other sockets (32768-60999 here) could be taken by one meanwhile, and the restart fail.
// So below that range, each of vitest's workers in its own hundred, each server of a worker the
// next port of it: no test server, connection or other worker's own server takes it.
const OWN_PORTS = 20_000 + Number(process.env.VITEST_POOL_ID ?? 0) * 100;
let nextPort = 0;

async function ownPort(): Promise<number> {
  for (let tries = 0; tries < 100; tries++) {
    const port = OWN_PORTS + (nextPort++ % 100);
    const probe = createServer().listen(port, "127.0.0.1");
    const bound = await new Promise<boolean>((resolve) => {
      probe.once("listening", () => resolve(true)).once("error", () => resolve(false));
    });
    if (bound) {
      await new Promise((resolve) => probe.close(resolve));
      return port;
    }
  }
  throw new Error(`no free port from ${OWN_PORTS} to ${OWN_PORTS + 99}`);
}

export async function startOwnPostgres(): Promise<OwnPostgres> {
  const dir = mkdtempSync(join(tmpdir(), "own-pg-"));
  const data = join(dir, "data");
  const asRoot = userInfo().uid === 0;
  if (asRoot) chownSync(dir, uid("postgres"), uid("postgres", "-g"));
  const run = (tool: string, args: string[]) =>
    execFileSync(
      asRoot ? "runuser" : join(BIN, tool),
      asRoot ? ["-u", "postgres", "--", join(BIN, tool), ...args] : args,
      { stdio: ["ignore", "pipe", "pipe"], cwd: dir },
    );
  run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  const port = await ownPort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const start = () =>
    run("pg_ctl", ["-D", data, "-o", options, "-l", join(dir, "log"), "-w", "-t", "60", "start"]);
  const stop = () => run("pg_ctl", ["-D", data, "-m", "fast", "-w", "-t", "60", "stop"]);
  start();
  let running = true;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start: () => {
      start();
      running = true;
    },
    stop: () => {
      stop();
      running = false;
    },
    freeze: () => {
      const [postmaster] = readFileSync(join(data, "postmaster.pid"), "utf8").split("\n");
      // The postmaster first: stopped, it starts no child after its children are listed.
      process.kill(Number(postmaster), "SIGSTOP");
      const children = execFileSync("pgrep", ["-P", String(postmaster)], { encoding: "utf8" });
      const pids = [Number(postmaster), ...children.split("\n").filter(Boolean).map(Number)];
      for (const pid of pids.slice(1)) process.kill(pid, "SIGSTOP");
      return () => {
        for (const pid of pids) process.kill(pid, "SIGCONT");
      };
    },
    ensureStarted: () => {
      if (!running) start();
      running = true;
    },
    destroy: () => {
      try {
        stop();
      } catch {
        // already stopped
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function uid(user: string, flag = "-u"): number {
  return Number(execFileSync("id", [flag, user], { encoding: "utf8" }).trim());
}
