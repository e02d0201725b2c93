import { chmod, mkdtemp, rm } from "node:fs/promises";
import type { Server } from "node:http";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

// A sandboxed run has no network but its own loopback (src/process/sandbox.ts): it reaches the
// gateway through a Unix socket of its own, bound into its sandbox, whose connections the
// gateway's HTTP server serves as if they had come to its port. One socket a run, so that what a
// run does to it stays the run's: its connections are capped, and a run that opens them without
// end exhausts its own share, not the server's file descriptors nor the other runs' access.

/** Connections one run may hold open to the gateway at once. */
export const MAX_RUN_CONNECTIONS = 256;

/** One run's socket, until it is closed. */
export interface RunSocket {
  path: string;
  /** Stops listening, ends the run's connections, and removes the socket. */
  close(): void;
}

export class RunSockets {
  private dir: Promise<string> | undefined;
  private made = 0;
  private readonly open = new Set<RunSocket>();

  constructor(private readonly server: Server) {}

  /** A new socket, in a directory of the server's alone (0700), for the run's agent to connect to. */
  async listen(): Promise<RunSocket> {
    this.dir ??= mkdtemp(path.join(tmpdir(), "agent-bridge-gateway-"));
    // Short: a socket's path may have 107 bytes at most.
    const socketPath = path.join(await this.dir, `run-${++this.made}.sock`);
    const connections = new Set<Socket>();
    const listener = createServer((socket) => {
      connections.add(socket);
      socket.once("close", () => connections.delete(socket));
      this.server.emit("connection", socket);
    });
    listener.maxConnections = MAX_RUN_CONNECTIONS;
    await new Promise<void>((resolve, reject) => {
      listener.once("error", reject);
      listener.listen(socketPath, () => {
        listener.off("error", reject);
        // The public server keeps the process alive; the gateway alone must not.
        listener.unref();
        resolve();
      });
    });
    // The agent connects as a user of its own.
    await chmod(socketPath, 0o666);
    const socket: RunSocket = {
      path: socketPath,
      close: () => {
        if (!this.open.delete(socket)) return;
        listener.close();
        for (const connection of connections) connection.destroy();
        // In the server's own directory; what cannot be removed goes with it at the close.
        rm(socketPath, { force: true }).catch(() => undefined);
      },
    };
    this.open.add(socket);
    return socket;
  }

  /** Closes every run's socket and removes their directory. */
  async close(): Promise<void> {
    for (const socket of [...this.open]) socket.close();
    if (this.dir) await rm(await this.dir, { recursive: true, force: true });
  }
}
