import { serve } from "@hono/node-server";
import { buildDeps, buildHookWorkers, buildSweeper, createApp } from "./app.js";
import { prepareKeys } from "./auth/bootstrap.js";
import { ConfigError, loadConfig } from "./config.js";
import { createLogger } from "./log.js";
import { openDatabase } from "./store/db.js";
import {
  checkWorktreePrerequisites,
  WorktreePrerequisiteError,
} from "./worktrees/prerequisites.js";

// Starts the service and stops it cleanly; everything else is built in createApp.

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`agent-bridge: ${err.message}\n`);
  process.exit(1);
}

if (config.claude.worktreeEnabled) {
  try {
    await checkWorktreePrerequisites(config.claude.workDir);
  } catch (err) {
    if (!(err instanceof WorktreePrerequisiteError)) throw err;
    process.stderr.write(
      `agent-bridge: worktree mode (AGENT_BRIDGE_CLAUDE_WORKTREE_ENABLED) cannot start: ${err.message}\n`,
    );
    process.exit(1);
  }
}

const logger = createLogger(config.logLevel);
const database = await openDatabase(
  config.databaseUrl
    ? { kind: "postgres", url: config.databaseUrl }
    : { kind: "pglite", dataDir: config.dataDir },
);
logger.info("database ready", {
  kind: database.kind,
  ...(database.kind === "pglite" ? { data_dir: config.dataDir } : {}),
});

const firstKey = await prepareKeys(database.db, config, logger);
const deps = buildDeps(config, database, logger);
const recovered = await deps.runs.recover();
if (recovered > 0)
  logger.warn("closed runs left unfinished by the previous process", { runs: recovered });
const sweeper = buildSweeper(deps);
sweeper.start();
// After recovery, so that callbacks of the runs it closed go out too.
const { outbox, scheduler } = buildHookWorkers(deps);
outbox.start();
scheduler.start();

const app = createApp(deps);
const server = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, (info) => {
  const url = `http://${config.host}:${info.port}`;
  logger.info("listening", { url });
  const lines = [`agent-bridge listening on ${url} (docs at ${url}/docs)`];
  if (config.auth.mode === "none") {
    lines.push(
      "API keys are off (AGENT_BRIDGE_AUTH=none): anyone on this machine can use the API.",
    );
  }
  if (firstKey) {
    // Shown once: only its hash is stored.
    lines.push(
      "",
      "No API key existed, so an admin key was made. It is shown this once; keep it:",
      `  ${firstKey}`,
      `  curl -H 'Authorization: Bearer ${firstKey}' ${url}/v1/sessions`,
      "",
    );
  }
  process.stdout.write(`${lines.join("\n")}\n`);
});

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info("shutting down", { signal, grace_ms: config.runs.shutdownGraceMs });
  await sweeper.stop();
  await scheduler.stop();
  // Runs first: each gets its completion, which also ends the SSE streams following it.
  await deps.runs.shutdown(config.runs.shutdownGraceMs);
  // Callbacks not sent yet stay in the outbox for the next start.
  await outbox.stop();
  // Streams now end by themselves after their completion; give their last bytes a moment.
  await new Promise<void>((resolve) => {
    server.close(() => resolve());
    setTimeout(() => {
      if ("closeAllConnections" in server) server.closeAllConnections();
    }, 5000).unref();
  });
  await database.close();
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
