import { createHash } from "node:crypto";
import { realpathSync, rmSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";
import path from "node:path";

// The embedded database is one process's: a second one on the same files would corrupt them.
//
// The lock is a listening Unix socket, because Node has no flock and the kernel closes a socket
// the moment its holder dies, even by SIGKILL: nothing stale is left for a later start to judge
// (a pid file was, and a reused pid after a reboot, or a killed server not yet reaped, blocked
// start-up). On Linux it lives in the abstract namespace, named after the data dir's real path:
// binding is atomic and there is no file to clean up. The lock holds within one network
// namespace (two containers sharing a data dir on separate networks would not see each other).
// Elsewhere it is a socket file in the data dir; one left by a dead holder refuses connections
// and is taken over. A native flock package was not used: it needs a compiler at install time.
// The holder answers a connection with its pid, so that a refused process can name it.

export interface DataDirLock {
  release(): Promise<void>;
}

export class DataDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly holderPid: number | undefined,
  ) {
    super(
      `the embedded database in ${dir} is in use by ${holderPid ? `process ${holderPid}` : "another process"} (a running agent-bridge?); stop it first, or use another AGENT_BRIDGE_DATA_DIR`,
    );
  }
}

/** Where the lock of `dir` (an existing directory) lives. */
function lockAddress(dir: string): string {
  const real = realpathSync(dir);
  if (process.platform !== "linux") return path.join(real, "pglite.lock.sock");
  // Hashed: an abstract name has the same 107-byte limit as a socket path.
  return `\0agent-bridge/pglite/${createHash("sha256").update(real).digest("hex")}`;
}

/** Takes the lock of the data dir `dir`, or throws DataDirLockedError naming its holder. */
export async function lockDataDir(dir: string): Promise<DataDirLock> {
  const address = lockAddress(dir);
  const server = createServer((socket) => socket.end(String(process.pid)));
  // Versions before this one locked with a pid file; it means nothing now.
  rmSync(path.join(dir, "pglite.lock"), { force: true });
  for (;;) {
    const error = await listen(server, address);
    if (!error) break;
    if (error.code !== "EADDRINUSE") throw error;
    const holder = await askHolder(address);
    if (holder === "gone" && !address.startsWith("\0")) {
      rmSync(address, { force: true });
      continue;
    }
    throw new DataDirLockedError(dir, holder === "gone" ? undefined : holder);
  }
  // Held for the process's life, but never what keeps it alive.
  server.unref();
  return { release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

function listen(server: Server, address: string): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const onError = (err: NodeJS.ErrnoException) => resolve(err);
    server.once("error", onError);
    server.listen(address, () => {
      server.off("error", onError);
      resolve(undefined);
    });
  });
}

/** The holder's pid; "gone" when nothing listens (a socket file left by a dead holder). */
function askHolder(address: string): Promise<number | undefined | "gone"> {
  return new Promise((resolve) => {
    let answer = "";
    const socket = connect(address);
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      answer += chunk;
    });
    socket.on("end", () => resolve(Number(answer) || undefined));
    socket.on("error", (err: NodeJS.ErrnoException) =>
      resolve(err.code === "ECONNREFUSED" || err.code === "ENOENT" ? "gone" : undefined),
    );
    // A holder too busy to answer is still the holder.
    socket.setTimeout(2000, () => {
      socket.destroy();
      resolve(undefined);
    });
  });
}
