import { serve } from "@hono/node-server";
import { buildDeps, createApp } from "./app.js";
import { ConfigError, loadConfig } from "./config.js";
import { createLogger } from "./log.js";
import { openDatabase } from "./store/db.js";

// Starts the service and stops it cleanly; everything else is built in createApp.

let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  process.stderr.write(`agent-bridge: ${err.message}\n`);
  process.exit(1);
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

const deps = buildDeps(config, database, logger);
const recovered = await deps.runs.recover();
if (recovered > 0)
  logger.warn("closed runs left unfinished by the previous process", { runs: recovered });

const app = createApp(deps);
const server = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, (info) => {
  logger.info("listening", { url: `http://${info.address}:${info.port}` });
  process.stdout.write(
    `agent-bridge listening on http://${config.host}:${info.port} (docs at /docs)\n`,
  );
});

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  logger.info("shutting down", { signal, grace_ms: config.runs.shutdownGraceMs });
  // Runs first: each gets its completion, which also ends the SSE streams following it.
  await deps.runs.shutdown(config.runs.shutdownGraceMs);
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
