import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type FakeCli, type FakeScenario, fakeCli } from "./fake-cli.js";
import { seedDataDir } from "./pglite-template.js";
import { type Entry, startServer } from "./server.js";

// The server the README's examples run against, as a user has it: API keys on, as they are by
// default, and the admin key it printed at its first start, with a scripted stand-in for the CLI.
// The curl walk-through, a user's first steps, starts it with `npm start`'s own command (the build
// in dist/); the other examples start the same code bundled into one file (./build.ts), which
// loads its modules faster.

/** A server as a user has it: started on a fresh data dir, and the key it printed. */
export interface UserServer {
  url: string;
  key: string;
  fake: FakeCli;
  close(): Promise<void>;
}

/** `env`: what the user set on the `npm start` line, as the README's examples do. */
export async function userServer(
  scenario: FakeScenario,
  env: Record<string, string> = {},
  entry: Entry = "build",
): Promise<UserServer> {
  const fake = await fakeCli(scenario);
  const dataDir = await mkdtemp(join(tmpdir(), "agent-bridge-readme-data-"));
  await seedDataDir(dataDir);
  const server = await startServer(
    {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_DATA_DIR: dataDir,
      AGENT_BRIDGE_AUTH: undefined,
      ...env,
    },
    { entry },
  );
  const [, key = ""] = await server.waitForOutput(/\n {2}(ab_[A-Za-z0-9_-]{43})\n/);
  return {
    url: server.url,
    key,
    fake,
    close: async () => {
      await server.stop();
      await fake.cleanup();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
