import { tmpdir } from "node:os";
import path from "node:path";
import type { BridgeEvent } from "../events.js";
import { agentFiles } from "./agent-files.js";
import type { AgentIdentity } from "./tenant-homes.js";

// Files one run hands its CLI by path rather than in argv (which any process on the machine can
// read in /proc/<pid>/cmdline): an MCP configuration with its servers' secrets, images. They go
// in a directory of the run's own, readable by the CLI's user alone (with AGENT_BRIDGE_AGENT_USER:
// under its tenant's HOME, which no other tenant's agent can enter), and are removed with it once
// the run is over. The directory is made, written and removed as the CLI's user: in the tenant's
// TMPDIR the agent can change every path (agent-files.ts says why).

export interface RunFiles {
  /** Writes a file into the run's directory; returns its path. */
  write(name: string, content: string | Buffer): Promise<string>;
  /** Removes the directory and everything in it. */
  remove(): Promise<void>;
}

/**
 * A fresh directory for the files of a CLI run with `env` (as `identity`, when there is one), made
 * on the first write.
 */
export function runFiles(env: Record<string, string>, identity?: AgentIdentity): RunFiles {
  const files = agentFiles(env, identity?.runAs);
  const parent = identity?.env.TMPDIR ?? tmpdir();
  let dir: Promise<string> | undefined;
  const made = () => {
    dir ??= files.makeTempDir(parent, "agent-bridge-run-");
    return dir;
  };
  return {
    async write(name, content) {
      const file = path.join(await made(), name);
      await files.write(file, content);
      return file;
    },
    async remove() {
      const made = await dir?.catch(() => undefined);
      if (made) await files.remove(made);
    },
  };
}

/**
 * The batches of `run`, given the run's files, which are removed once it is done: before the
 * batch holding the completion goes out, since whoever reads the completion may look for them
 * at once (a generator's `finally` runs only when its consumer asks for the next batch).
 */
export async function* withRunFiles(
  env: Record<string, string>,
  identity: AgentIdentity | undefined,
  run: (files: RunFiles) => AsyncGenerator<BridgeEvent[]>,
): AsyncGenerator<BridgeEvent[]> {
  const files = runFiles(env, identity);
  try {
    for await (const batch of run(files)) {
      if (batch.some((event) => event.type === "completion")) await files.remove();
      yield batch;
    }
  } finally {
    await files.remove();
  }
}
