import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { BridgeEvent } from "../events.js";
import type { AgentIdentity } from "./tenant-homes.js";

// Files one run hands its CLI by path rather than in argv (which any process on the machine can
// read in /proc/<pid>/cmdline): an MCP configuration with its servers' secrets, images. They go
// in a directory of the run's own, readable by the CLI's user alone (with AGENT_BRIDGE_AGENT_USER:
// under its tenant's HOME, through the tenant's group, so no other tenant's agent can read them),
// and are removed with it once the run is over.

export interface RunFiles {
  /** Writes a file into the run's directory; returns its path. */
  write(name: string, content: string | Buffer): Promise<string>;
  /** Removes the directory and everything in it. */
  remove(): Promise<void>;
}

/** A fresh directory for the run's files, made on the first write. */
export function runFiles(identity?: AgentIdentity): RunFiles {
  // The tenant's TMPDIR is its group's (setgid 2770): what is made in it keeps that group.
  const parent = identity?.env.TMPDIR ?? tmpdir();
  const shared = identity !== undefined;
  let dir: Promise<string> | undefined;
  const made = () => {
    dir ??= (async () => {
      const made = await mkdtemp(path.join(parent, "agent-bridge-run-"));
      if (shared) await chmod(made, 0o750);
      return made;
    })();
    return dir;
  };
  return {
    async write(name, content) {
      const file = path.join(await made(), name);
      await writeFile(file, content, { mode: shared ? 0o640 : 0o600 });
      return file;
    },
    async remove() {
      const made = await dir?.catch(() => undefined);
      if (made) await rm(made, { recursive: true, force: true });
    },
  };
}

/**
 * The batches of `run`, given the run's files, which are removed once it is done: before the
 * batch holding the completion goes out, since whoever reads the completion may look for them
 * at once (a generator's `finally` runs only when its consumer asks for the next batch).
 */
export async function* withRunFiles(
  identity: AgentIdentity | undefined,
  run: (files: RunFiles) => AsyncGenerator<BridgeEvent[]>,
): AsyncGenerator<BridgeEvent[]> {
  const files = runFiles(identity);
  try {
    for await (const batch of run(files)) {
      if (batch.some((event) => event.type === "completion")) await files.remove();
      yield batch;
    }
  } finally {
    await files.remove();
  }
}
