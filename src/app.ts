import path from "node:path";
import type { OpenAPIHono } from "@hono/zod-openapi";
import type { Context } from "hono";
import { except } from "hono/combine";
import { cors } from "hono/cors";
import { methodNotAllowed } from "hono/method-not-allowed";
import { requestId } from "hono/request-id";
import { AGENT_PLUGINS, AgentRegistry } from "./agents/registry.js";
import { callAdmission, egressListsOfRun, policyGate } from "./auth/policy.js";
import { type Clock, systemClock } from "./clock.js";
import { CommandInbox } from "./cluster/commands.js";
import { Doorbell } from "./cluster/doorbell.js";
import { InstanceLease } from "./cluster/lease.js";
import { clusterPort } from "./cluster/port.js";
import type { Config } from "./config.js";
import { DomainError } from "./errors.js";
import { ModelGateway } from "./gateway/server.js";
import { callbackBody } from "./hooks/callback-body.js";
import { callbackHook } from "./hooks/callback-hook.js";
import { CallbackOutbox } from "./hooks/outbox.js";
import { replyHook } from "./hooks/reply-hook.js";
import { ReplyOutbox } from "./hooks/reply-outbox.js";
import { Scheduler } from "./hooks/scheduler.js";
import { authenticate, authenticateCounted, requireAdmin } from "./http/auth.js";
import type { AppDeps, AppEnv, SandboxReadiness } from "./http/context.js";
import { docsRouter } from "./http/docs.js";
import { onError, onNotFound, problemResponse } from "./http/errors.js";
import { accessLog, limitBody, requestMetrics, requireJsonBody } from "./http/middleware.js";
import { openApiDocument } from "./http/openapi.js";
import { rateLimit } from "./http/rate-limit.js";
import { createRouter } from "./http/router.js";
import { mountRoutes } from "./http/routes/index.js";
import { ATTACHMENTS_MAX_BYTES } from "./http/routes/runs/runs.schemas.js";
import { StreamLimiter } from "./http/streams.js";
import { errorText, type Logger } from "./log.js";
import { Metrics } from "./metrics.js";
import { resolveAgentUser } from "./process/agent-user.js";
import { DRIVER_DEFAULTS } from "./process/driver/driver-config.js";
import { type RunLimits, startRunLimits } from "./process/run-limits.js";
import type { Sandbox } from "./process/sandbox.js";
import { startSandbox } from "./process/sandbox-start.js";
import { TenantHomes } from "./process/tenant-homes.js";
import { RunManager } from "./runs/manager.js";
import type { DatabaseHandle } from "./store/db.js";
import { getKey } from "./store/keys.js";
import { DebugCapture } from "./telemetry/capture.js";
import { type Tracing, tracingOff } from "./telemetry/tracing.js";
import { CheckoutCache } from "./worktrees/checkout-cache.js";
import { GitRunner } from "./worktrees/git.js";
import { SessionSweeper } from "./worktrees/sweep.js";

/** The app's dependencies as configured; the entry point and the tests both build them here. */
export function buildDeps(
  config: Config,
  database: DatabaseHandle,
  logger: Logger,
  tracing: Tracing = tracingOff,
  clock: Clock = systemClock,
): AppDeps {
  const capture = config.debugCaptureDir
    ? new DebugCapture(config.debugCaptureDir, logger)
    : undefined;
  const metrics = new Metrics();
  const homes = config.agentUser
    ? new TenantHomes(
        (keyId) => getKey(database.db, keyId).then((key) => key?.tenantNumber),
        resolveAgentUser(config.agentUser.spec),
        config.agentUser,
        config.agents.toolEnv,
        logger,
      )
    : undefined;
  // The model API of each agent whose upstream the operator configured.
  const apis = new Map(
    AGENT_PLUGINS.flatMap((plugin) => {
      const { upstream } = config[plugin.name];
      return upstream
        ? [[plugin.name, { api: plugin.gatewayApi(upstream), upstream }] as const]
        : [];
    }),
  );
  // Serves those APIs; listens once started.
  const gateway = new ModelGateway({
    apis: [...apis.values()].map(({ api }) => api),
    db: database.db,
    logger: logger.child({ component: "gateway" }),
    dbOutageBoundMs: config.runs.dbOutageBoundMs,
    prices: config.prices,
    admit: callAdmission(database.db, config),
    egressOf: (runId) => egressListsOfRun(database.db, runId),
  });
  const { sandbox, limits, status: sandboxStatus } = startSandboxWithLimits(config, logger);
  const driver = {
    timeoutMs: config.agents.timeoutSeconds * 1000,
    idleTimeoutMs: config.agents.idleTimeoutSeconds * 1000,
    maxLineBytes: config.agents.maxLineBytes,
    stderrTailBytes: DRIVER_DEFAULTS.stderrTailBytes,
    killGraceMs: DRIVER_DEFAULTS.killGraceMs,
    ...(sandbox ? { sandbox } : {}),
    ...(limits ? { limits } : {}),
  };
  // In a session's repository the server's git runs as the session's agent would (see git.ts).
  const git = new GitRunner({
    env: config.agents.toolEnv,
    ...(sandbox ? { sandbox } : {}),
    ...(homes ? { homes } : {}),
  });
  const agents = new AgentRegistry(
    AGENT_PLUGINS.filter((plugin) => config.agents.enabled.includes(plugin.name)).map((plugin) => {
      const served = apis.get(plugin.name);
      return plugin.create(config[plugin.name], {
        driver,
        ...(homes ? { runAs: homes.user } : {}),
        mcpServers: config.agents.mcpServers,
        prices: config.prices,
        ...(served
          ? {
              gateway: {
                variable: served.upstream.variable,
                source: served.upstream.source,
                open: (runId, maxBudgetUsd) => gateway.open(served.api.prefix, runId, maxBudgetUsd),
              },
            }
          : {}),
      });
    }),
    config.agents.default,
  );
  const lease: InstanceLease = new InstanceLease({
    db: database.db,
    logger,
    ...config.lease,
    // The embedded database is this process's alone (its data dir is locked).
    exclusive: database.kind === "pglite",
    reap: async (instance) => void (await runs.reap(instance)),
    onLost: () => runs.abandonAll(),
    clock,
    onTick: () => {
      doorbell.ringEveryone();
      runs.closeStranded().catch((err) =>
        logger.warn("could not close the runs pinned to a host that is gone", {
          error: errorText(err),
        }),
      );
    },
  });
  const doorbell = new Doorbell({
    // The embedded database is this process's alone: no other instance to hear from.
    mode: database.kind === "pglite" ? "local" : config.follow.mode,
    pollMs: config.follow.pollMs,
    ...(database.listen ? { listen: database.listen } : {}),
    self: () => lease.id,
    host: config.lease.host,
    clock,
  });
  const checkouts = new CheckoutCache({
    dir: path.join(config.dataDir, "checkouts"),
    searchPath: config.agents.toolEnv.PATH ?? "",
    ...(sandbox ? { sandbox } : {}),
    localRoots: config.hooks.checkoutLocalOrigins,
  });
  const runs = new RunManager({
    db: database.db,
    eventsDb: database.eventsDb,
    logger,
    instanceId: () => lease.id,
    host: config.lease.host,
    cluster: clusterPort({ db: database.db, logger, doorbell, instanceId: () => lease.id }),
    workDir: config.workDir,
    maxConcurrent: config.runs.maxConcurrent,
    maxQueued: config.runs.maxQueued,
    maxPerKey: config.runs.maxPerKey,
    dbOutageBoundMs: config.runs.dbOutageBoundMs,
    metrics,
    ...(homes ? { homes } : {}),
    git,
    checkouts,
    gate: policyGate(database.db, config, sandboxStatus),
    agents,
    killGraceMs: DRIVER_DEFAULTS.killGraceMs,
    approvalTimeoutSeconds: config.agents.approvalTimeoutSeconds,
    clock,
    // A message's callback and replies are written with its run and fall due with its completion.
    transactionHooks: [callbackHook, replyHook],
    tracing,
    ...(capture ? { capture } : {}),
  });
  // Commands other instances post for this one's runs (a cancel) are taken when the bell rings.
  const inbox = new CommandInbox({
    db: database.db,
    logger,
    self: () => lease.id,
    apply: (command) => runs.apply(command),
  });
  doorbell.onCommands(() => void inbox.check());
  // Queued runs no instance owns are pulled when rung for, at each lease tick, and when a slot frees.
  doorbell.onWork(() => runs.pullWork());
  return {
    config,
    database,
    logger,
    runs,
    lease,
    doorbell,
    metrics,
    streams: new StreamLimiter(config.streamsPerKey),
    agents,
    gateway,
    sandbox: sandboxStatus,
    ...(homes ? { homes } : {}),
    git,
    checkouts,
    tracing,
    ...(capture ? { capture } : {}),
    clock,
  };
}

/**
 * The runs' sandbox, and their limits, which come with it: outside one, root's agent could move
 * itself out of its cgroups.
 */
function startSandboxWithLimits(
  config: Config,
  logger: Logger,
): { sandbox?: Sandbox; limits?: RunLimits; status: SandboxReadiness } {
  const { sandbox, status } = startSandbox(config, logger);
  if (!status.enabled) return { status };
  const { limits, status: limitsStatus } = startRunLimits(config.sandbox.limits, logger);
  return {
    ...(sandbox ? { sandbox } : {}),
    ...(limits ? { limits } : {}),
    status: { ...status, limits: limitsStatus },
  };
}

/** The periodic sweep that expires idle sessions and removes their worktrees (not started). */
export function buildSweeper(deps: AppDeps): SessionSweeper {
  return new SessionSweeper({
    db: deps.database.db,
    runs: deps.runs,
    logger: deps.logger,
    ttlMs: deps.config.sessions.ttlMs,
    intervalMs: deps.config.sessions.sweepIntervalMs,
    workDir: deps.config.workDir,
    git: deps.git,
    checkouts: deps.checkouts,
    clock: deps.clock,
    feedRetentionMs: deps.config.feed.retentionMs,
  });
}

/** The callback and reply outbox workers and the hooks' scheduler (none started). */
export function buildHookWorkers(deps: AppDeps): {
  outbox: CallbackOutbox;
  replies: ReplyOutbox;
  scheduler: Scheduler;
} {
  const { config, logger, runs } = deps;
  const db = deps.database.db;
  const outbox = new CallbackOutbox({
    db,
    logger,
    ...config.hooks.callback,
    buildBody: (runId) => callbackBody(db, runId),
    clock: deps.clock,
  });
  const replies = new ReplyOutbox({
    db,
    logger,
    ...config.hooks.callback,
    progressMs: config.hooks.replyProgressMs,
    clock: deps.clock,
  });
  // A completed run's callback and replies go out at once rather than at the next poll.
  runs.onCompletion((_runId, joined) => {
    void outbox.completed(joined);
    void replies.completed(joined);
  });
  // A run's start and the tools it uses make its replies due (its comment, throttled).
  runs.onEvents((batch, joined) => void replies.progressed(batch, joined));
  const scheduler = new Scheduler({
    db,
    runs,
    config,
    logger,
    tickMs: config.hooks.scheduleTickMs,
    clock: deps.clock,
  });
  return { outbox, replies, scheduler };
}

/** A webhook delivery: signed by its sender instead of carrying an API key (see the route). */
const isHookDelivery = (c: Context) =>
  c.req.method === "POST" && /^\/v1\/hooks\/[^/]+\/deliveries\/?$/.test(c.req.path);

/** A message, which may carry images besides its text. */
const isMessage = (c: Context) =>
  c.req.method === "POST" &&
  /^\/v1\/(sessions\/[^/]+\/messages|runs\/[^/]+\/input)\/?$/.test(c.req.path);

/** Builds the HTTP app from its dependencies; `src/index.ts` serves it, tests call it directly. */
export function createApp(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = createRouter();
  // Outermost, so that the request's span covers all the rest and is active in it.
  if (deps.tracing.http) app.use(deps.tracing.http);
  // Browsers may call the API only from the origins an operator lists; none by default.
  if (deps.config.corsOrigins.length > 0) {
    app.use(
      cors({
        origin: deps.config.corsOrigins,
        allowHeaders: [
          "Authorization",
          "Content-Type",
          "Idempotency-Key",
          "Last-Event-ID",
          "Prefer",
        ],
        exposeHeaders: ["Location", "X-Request-Id", "X-Run-Id", "Retry-After"],
      }),
    );
  }
  app.use(requestId());
  // Wraps everything below: turns a 404 on a path that exists for other methods into a 405.
  app.use(
    methodNotAllowed({
      app,
      onMethodNotAllowed: (c, methods) =>
        problemResponse(
          c,
          new DomainError(
            "method_not_allowed",
            `${c.req.method} is not allowed here; use ${methods.join(", ")}`,
          ),
          { Allow: methods.join(", ") },
        ),
    }),
  );
  app.use(async (c, next) => {
    c.set("config", deps.config);
    c.set("database", deps.database);
    c.set("db", deps.database.db);
    c.set("logger", deps.logger);
    c.set("agents", deps.agents);
    c.set("runs", deps.runs);
    c.set("metrics", deps.metrics);
    c.set("streams", deps.streams);
    c.set("sandbox", deps.sandbox);
    c.set("git", deps.git);
    c.set("doorbell", deps.doorbell);
    c.set("clock", deps.clock);
    await next();
  });
  app.use(accessLog);
  app.use(requestMetrics);
  // Webhook deliveries have a limit of their own: GitHub sends payloads up to 25 MB. A message has
  // room for its largest images on top of the API's limit.
  const apiBodyLimit = limitBody(deps.config.bodyLimitBytes);
  const deliveryBodyLimit = limitBody(deps.config.hooks.deliveryLimitBytes);
  const messageBodyLimit = limitBody(deps.config.bodyLimitBytes + ATTACHMENTS_MAX_BYTES);
  app.use((c, next) =>
    (isHookDelivery(c) ? deliveryBodyLimit : isMessage(c) ? messageBodyLimit : apiBodyLimit)(
      c,
      next,
    ),
  );
  app.use(
    "/v1/*",
    except(
      isHookDelivery,
      authenticateCounted(deps.config.auth.requestsPerMinute),
      rateLimit(deps.database.db, deps.config.auth.requestsPerMinute, deps.logger),
      requireJsonBody,
    ),
  );

  if (!deps.config.auth.publicMetrics) app.use("/metrics", authenticate, requireAdmin);
  mountRoutes(app);

  if (!deps.config.auth.publicOpenApi) app.use("/openapi.json", authenticate);
  app.get("/openapi.json", (c) => c.json(openApiDocument()));
  app.route("/", docsRouter());

  app.notFound(onNotFound);
  app.onError(onError);
  return app;
}
