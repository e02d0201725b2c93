import { createAdaptorServer, type ServerType } from "@hono/node-server";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { buildDeps, buildHookWorkers, buildSweeper, createApp } from "./app.js";
import { prepareKeys } from "./auth/bootstrap.js";
import { type Config, ConfigError, databaseTarget, loadConfig } from "./config.js";
import type { AppEnv } from "./http/context.js";
import { createLogger, errorFields, errorText, type Logger } from "./log.js";
import { AgentUserError } from "./process/agent-user.js";
import { SandboxError, tenantsUnsandboxed } from "./process/sandbox-start.js";
import { installProcessGuards } from "./process-guards.js";
import { DataDirLockedError } from "./store/data-dir-lock.js";
import { type DatabaseHandle, DatabaseOpenError, openDatabase } from "./store/db.js";
import { countActiveKeys } from "./store/keys.js";
import { startTracing } from "./telemetry/start-tracing.js";
import { activeTraceFields } from "./telemetry/tracing.js";
import {
  checkWorktreePrerequisites,
  WorktreePrerequisiteError,
} from "./worktrees/prerequisites.js";

// Starts the service and stops it cleanly; everything else is built in createApp. A start-up
// failure is one line on stderr, `agent-bridge: <what is wrong and what to do>`, and exit code 1,
// with whatever was opened closed again; never a stack trace.

/** How long shutdown waits for the collector to take the last spans. */
const TRACES_FLUSH_MS = 5000;
/** How long shutdown lets open connections take their last bytes, and the database close. */
const CLOSE_MS = 5000;
/** How long a step of shutdown may take before the log says that shutdown waits on it. */
const SLOW_STEP_MS = 3000;

/** A start-up failure found here, its message written for the operator. */
class StartupError extends Error {}

let config: Config;
try {
  config = loadConfig();
} catch (err) {
  failStartup(err);
}
// With tracing on, every line written inside a request's or a run's span carries its trace id.
const logger = createLogger(
  config.logLevel,
  {},
  undefined,
  config.tracing ? activeTraceFields : undefined,
);
installProcessGuards(logger);
const service = await start(config, logger).catch((err) =>
  failStartup(err, logger, config.databaseUrl),
);

async function start(config: Config, logger: Logger) {
  // Listening comes first, so that a port in use is told before anything is opened; a request
  // that arrives meanwhile waits for the app, which exists once the last process's runs are closed.
  let appReady!: (app: OpenAPIHono<AppEnv>) => void;
  const app = new Promise<OpenAPIHono<AppEnv>>((resolve) => (appReady = resolve));
  const server = await listen(config, (req, env) => app.then((a) => a.fetch(req, env)));
  let database: DatabaseHandle | undefined;
  try {
    database = await openDatabase(databaseTarget(config));
    logger.info("database ready", {
      kind: database.kind,
      ...(database.kind === "pglite" ? { data_dir: config.dataDir } : {}),
    });
    for (const line of config.deprecated) logger.warn(line);
    const firstKey = await prepareKeys(database.db, config, logger);
    const deps = buildDeps(config, database, logger, await startTracing(config, logger));
    // With auth off there is one user, whatever keys the database holds.
    const keys = config.auth.mode === "none" ? 0 : await countActiveKeys(database.db);
    const unsandboxed = tenantsUnsandboxed(deps.sandbox, config.sandbox.mode, keys);
    if (unsandboxed) throw unsandboxed;
    await deps.homes?.prepare();
    // The runs' CLIs call their model APIs here (src/gateway/): a loopback port of its own.
    logger.info("model gateway listening", { url: (await deps.gateway.listen()).url });
    if (config.agents.worktreeEnabled) {
      await checkWorktreePrerequisites(deps.git.asServer(config.workDir));
    }
    // Registers this instance, and closes what instances that are gone left (touching nothing of
    // a live one's), before any run of its own is admitted.
    await deps.lease.start();
    // Then followers and commands from other instances are heard (see src/cluster/doorbell.ts).
    await deps.doorbell.start();
    // Queued runs that no instance owns may wait already.
    void deps.runs.pullWork();
    appReady(createApp(deps));
    const sweeper = buildSweeper(deps);
    sweeper.start();
    // After recovery, so that callbacks of the runs it closed go out too.
    const { outbox, replies, scheduler } = buildHookWorkers(deps);
    outbox.start();
    replies.start();
    scheduler.start();
    return { server, database, deps, sweeper, outbox, replies, scheduler, firstKey };
  } catch (err) {
    server.close();
    await database?.close().catch(() => {});
    throw err;
  }
}

/** Binds the port, or fails with what to do about it. */
function listen(config: Config, fetch: Parameters<typeof createAdaptorServer>[0]["fetch"]) {
  const { host, port } = config;
  // The host of a request that names none: HTTP/1.0 needs no Host header, and a load balancer's
  // health check (HAProxy's `option httpchk GET /healthz`) sends none; without a default the
  // adapter answers it a bare 400 before the app sees it. Nothing in the app reads the host.
  // (HTTP/1.1 without Host stays Node's 400, as RFC 9112 requires.)
  const server = createAdaptorServer({ fetch, hostname: "localhost" });
  return new Promise<ServerType>((resolve, reject) => {
    const failed = (err: NodeJS.ErrnoException) => {
      const where = `${host}:${port}`;
      const what: Record<string, string> = {
        EADDRINUSE: `port ${port} on ${host} is in use by another process; stop it, or set PORT to a free port`,
        EACCES: `not allowed to listen on ${where}; set PORT to a port above 1023`,
        EADDRNOTAVAIL: `${host} is not an address of this machine; set HOST to one of its addresses`,
        ENOTFOUND: `HOST ${host} is not a known host name; set HOST to an address of this machine`,
      };
      reject(
        new StartupError(what[err.code ?? ""] ?? `cannot listen on ${where} (${err.message})`),
      );
    };
    server.once("error", failed);
    server.listen(port, host, () => {
      server.off("error", failed);
      resolve(server);
    });
  });
}

function failStartup(err: unknown, logger?: Logger, databaseUrl?: string): never {
  const line = `agent-bridge: ${startupProblem(err, logger)}`;
  process.stderr.write(`${databaseUrl ? withoutPassword(line, databaseUrl) : line}\n`);
  process.exit(1);
}

/** What went wrong, for the operator: the message of an error made for them, else a summary. */
function startupProblem(err: unknown, logger?: Logger): string {
  if (
    err instanceof ConfigError ||
    err instanceof StartupError ||
    err instanceof DatabaseOpenError ||
    err instanceof DataDirLockedError ||
    err instanceof AgentUserError ||
    err instanceof SandboxError
  )
    return err.message;
  if (err instanceof WorktreePrerequisiteError)
    return `worktree mode (AGENT_BRIDGE_WORKTREE_ENABLED) cannot start: ${err.message}`;
  // Not foreseen: its stack is for a developer, at LOG_LEVEL=debug, not on the console.
  logger?.debug("start-up failed", errorFields(err));
  const message = (err instanceof Error ? err.message : String(err)).replace(/\s+/g, " ");
  return `start-up failed: ${message} (LOG_LEVEL=debug logs where)`;
}

/** A line without DATABASE_URL's password, should any message have quoted it. */
function withoutPassword(line: string, databaseUrl: string): string {
  let password = "";
  try {
    password = new URL(databaseUrl).password;
  } catch {
    // Not a URL that parses: postgres.js would not have got a password out of it either.
  }
  // As written in the URL, and decoded.
  for (const p of new Set([password, safeDecode(password)])) {
    if (p) line = line.replaceAll(p, "***");
  }
  return line;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

const url = `http://${config.host}:${(service.server.address() as { port: number }).port}`;
const { workDir } = config;
logger.info("listening", { url, work_dir: workDir });
// Where a first Write of the agent lands, said before anyone sends a message.
const lines = [
  `agent-bridge listening on ${url} (docs at ${url}/docs)`,
  `The agent works in ${workDir} (AGENT_BRIDGE_WORK_DIR).`,
];
if (config.auth.mode === "none") {
  lines.push("API keys are off (AGENT_BRIDGE_AUTH=none): anyone on this machine can use the API.");
}
if (service.firstKey) {
  // Shown once: only its hash is stored.
  lines.push(
    "",
    "No API key existed, so an admin key was made. It is shown this once; keep it:",
    `  ${service.firstKey}`,
    `  curl -H 'Authorization: Bearer ${service.firstKey}' ${url}/v1/sessions`,
    "",
  );
}
process.stdout.write(`${lines.join("\n")}\n`);

let stopping = false;
/** Aborted by a second signal: the runs' grace ends at once. */
const hurry = new AbortController();
async function shutdown(signal: string) {
  if (stopping) {
    if (hurry.signal.aborted) return;
    logger.info("stopping the runs now", { signal });
    process.stdout.write("Stopping the runs now; they end interrupted.\n");
    hurry.abort();
    return;
  }
  stopping = true;
  const { server, database, deps, sweeper, outbox, replies, scheduler } = service;
  logger.info("shutting down", { signal, grace_ms: config.runs.shutdownGraceMs });
  // Beside the JSON log, for a person at a terminal: a stop that waits on runs looks like a hang.
  const running = deps.runs.running;
  if (running > 0) {
    const seconds = Math.round(config.runs.shutdownGraceMs / 1000);
    const runs = running === 1 ? "1 run is" : `${running} runs are`;
    process.stdout.write(
      `Stopping: ${runs} still going and may take up to ${seconds} s to finish (AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS). Press Ctrl-C again to stop ${running === 1 ? "it" : "them"} now.\n`,
    );
  }
  deps.runs.stopTaking();
  // A database that stops answering (a partition, a frozen server) fails no statement: shutdown
  // would wait on it for good. Past what each step below may take, the process goes anyway, and
  // what it could not record the next instance's recovery closes, as after a crash. The runs'
  // step may wait out the database three times: a claim in progress for its run's rows, then to
  // give that run back, then for the claims that failed.
  const boundMs =
    config.runs.shutdownGraceMs +
    3 * config.runs.dbOutageBoundMs +
    config.hooks.callback.timeoutMs +
    (config.tracing ? TRACES_FLUSH_MS : 0) +
    2 * CLOSE_MS;
  // What the stop leaves undone, said in one line as it exits (1): the steps it could not finish,
  // and the runs whose completion is not stored, which the next instance's recovery closes.
  const abandoned: string[] = [];
  let current: string | undefined;
  const leave = (msg: string, fields: Record<string, unknown> = {}) =>
    logger.error(msg, { ...fields, abandoned, runs_left_to_recovery: deps.runs.unsettled() });
  setTimeout(() => {
    if (current) abandoned.push(`${current} and every step after it`);
    leave("shutdown did not finish in time; exiting without it", { bound_ms: boundMs });
    process.exit(1);
  }, boundMs).unref();
  // A step still going after a few seconds is named, so that a slow stop says what it waits on.
  // One that fails is logged, and the steps after it still run.
  const step = async (name: string, work: () => Promise<unknown>): Promise<boolean> => {
    current = name;
    const slow = setTimeout(() => logger.warn("shutdown is waiting", { on: name }), SLOW_STEP_MS);
    try {
      await work();
      return true;
    } catch (err) {
      abandoned.push(name);
      logger.error("a step of shutdown failed; going on with the next", {
        on: name,
        ...errorFields(err),
      });
      return false;
    } finally {
      clearTimeout(slow);
      current = undefined;
    }
  };
  await step("the session sweep", () => sweeper.stop());
  await step("the scheduler", () => scheduler.stop());
  // Runs first: each gets its completion, which also ends the SSE streams following it.
  const runsClosed = await step("the runs", () =>
    deps.runs.shutdown(config.runs.shutdownGraceMs, hurry.signal),
  );
  // Its runs are closed: the instance's end, so that no other waits out its lease. Not when they
  // may not be: an ended instance is never reaped, and its lease expiring is what lets another
  // instance (or the next start) close what it left.
  if (runsClosed) {
    await step("the instance's lease", () =>
      deps.lease
        .stop()
        .catch((err) =>
          logger.warn("could not record this instance's end", { error: errorText(err) }),
        ),
    );
  } else {
    abandoned.push("the instance's end (its lease is left to expire)");
  }
  // After the runs, whose CLIs called through it; the last calls' records are written.
  await step("the model gateway", () => deps.gateway.close());
  // Callbacks not sent yet stay in the outbox for the next start.
  await step("the callback outbox", () => outbox.stop());
  await step("the reply outbox", () => replies.stop());
  // The runs' last capture lines and spans: all written, the spans sent for a few seconds at most.
  await step("the debug capture", async () => deps.capture?.flushed());
  await step("the trace exporter", () => deps.tracing.shutdown(TRACES_FLUSH_MS));
  // Streams now end by themselves after their completion; give their last bytes a moment.
  await step(
    "open connections",
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        setTimeout(() => {
          if ("closeAllConnections" in server) server.closeAllConnections();
        }, CLOSE_MS).unref();
      }),
  );
  // Followers of other instances' runs were woken until here.
  deps.doorbell.stop();
  await step("the database", () => database.close());
  if (abandoned.length > 0) leave("shutdown left work undone; exiting 1");
  process.exit(abandoned.length > 0 ? 1 : 0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
