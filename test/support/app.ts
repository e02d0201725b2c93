import { createApp } from "../../src/app.js";
import { createClaudeProbe } from "../../src/claude/version.js";
import { loadConfig } from "../../src/config.js";
import { silentLogger } from "../../src/log.js";
import { type Backend, openTestDatabase, type TestDatabase } from "./db.js";

export interface TestApp {
  app: ReturnType<typeof createApp>;
  database: TestDatabase;
  config: ReturnType<typeof loadConfig>;
  close(): Promise<void>;
}

/** The real app on a fresh database of the given back-end, configured from `env` alone. */
export async function createTestApp(
  backend: Backend,
  env: NodeJS.ProcessEnv = {},
): Promise<TestApp> {
  const config = loadConfig({ PATH: process.env.PATH, HOME: process.env.HOME, ...env });
  const database = await openTestDatabase(backend);
  const app = createApp({
    config,
    database,
    logger: silentLogger,
    claudeProbe: createClaudeProbe(config.claude.bin, config.claude.childEnv),
  });
  return { app, database, config, close: () => database.destroy() };
}
