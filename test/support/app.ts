import { buildDeps, createApp } from "../../src/app.js";
import { type Clock, systemClock } from "../../src/clock.js";
import { loadConfig } from "../../src/config.js";
import type { AppDeps } from "../../src/http/context.js";
import { type Logger, silentLogger } from "../../src/log.js";
import { type Tracing, tracingOff } from "../../src/telemetry/tracing.js";
import { TEST_CLI_KEY } from "./claude-env.js";
import { type Backend, openTestDatabase, type TestDatabase } from "./db.js";
import { LOOPBACK_CALLBACKS } from "./server.js";

export interface TestApp {
  app: ReturnType<typeof createApp>;
  database: TestDatabase;
  config: ReturnType<typeof loadConfig>;
  deps: AppDeps;
  /** Stops the runs (each gets its completion) and drops the database. */
  close(): Promise<void>;
}

/**
 * The real app on a fresh database of the given back-end, configured from `env` alone. API keys
 * are off unless `env` turns them on (`AGENT_BRIDGE_AUTH: "keys"`), as the tests of auth do; the
 * CLI has an API key unless `env` takes it away. Its timers and timestamps read `clock` (a test's
 * ManualClock, test/support/manual-clock.ts), the real one by default.
 */
export async function createTestApp(
  backend: Backend,
  env: NodeJS.ProcessEnv = {},
  clock: Clock = systemClock,
): Promise<TestApp> {
  return createTestAppOn(await openTestDatabase(backend), env, silentLogger, tracingOff, clock);
}

/**
 * The real app on a database the test opened itself (e.g. on a Postgres server it owns), logging
 * to `logger` (nowhere by default), on `clock` (the real one by default).
 */
export function createTestAppOn(
  database: TestDatabase,
  env: NodeJS.ProcessEnv = {},
  logger: Logger = silentLogger,
  tracing: Tracing = tracingOff,
  clock: Clock = systemClock,
): TestApp {
  const config = loadConfig({
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    AGENT_BRIDGE_AUTH: "none",
    // The tests' callback receivers listen on loopback, which callbacks may not reach otherwise.
    AGENT_BRIDGE_CALLBACK_ALLOW: LOOPBACK_CALLBACKS,
    // A credential for the CLI, so that the app is ready (the fake CLI never uses it).
    ANTHROPIC_API_KEY: TEST_CLI_KEY,
    ...env,
  });
  const deps = buildDeps(config, database, logger, tracing, clock);
  return {
    app: createApp(deps),
    database,
    config,
    deps,
    close: async () => {
      await deps.runs.shutdown(0);
      await deps.gateway.close();
      // Unregisters the SDK, should the test have left it on: later files share this process.
      await deps.tracing.shutdown(1000);
      await database.destroy();
    },
  };
}

/**
 * A raw request to the app with `key` as its API key (none when undefined). Route tests call
 * through the typed `appClient` (app-client.ts) instead, and keep raw requests for what its types
 * forbid.
 */
export function requestAs(
  app: TestApp["app"],
  key: string | undefined,
  path: string,
  init: RequestInit = {},
) {
  return app.request(path, {
    ...init,
    headers: {
      ...(key ? { Authorization: `Bearer ${key}` } : {}),
      ...(init.headers as Record<string, string>),
    },
  });
}

/** A JSON request to a served app with `key` as its API key. */
export function fetchAs(baseUrl: string, key: string, path: string, init: RequestInit = {}) {
  return fetch(`${baseUrl}${path}`, {
    ...init,
    headers: {
      Authorization: `Bearer ${key}`,
      "Content-Type": "application/json",
      ...(init.headers as Record<string, string>),
    },
  });
}

/** Serves the app on a loopback port: real HTTP, for what `app.request` cannot show. */
export async function listen(
  app: TestApp["app"],
): Promise<{ url: string; close(): Promise<void> }> {
  const { serve } = await import("@hono/node-server");
  return new Promise((resolve) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => {
      resolve({
        url: `http://127.0.0.1:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            if ("closeAllConnections" in server) server.closeAllConnections();
          }),
      });
    });
  });
}

/** Plain-fetch calls for the routes most tests go through, against a served app. */
export function httpApi(url: string) {
  return {
    newSession: async (): Promise<{ id: string } & Record<string, unknown>> =>
      (await fetch(`${url}/v1/sessions`, { method: "POST" })).json(),
    /** GET `path`, as JSON. */
    json: async (path: string): Promise<unknown> => (await fetch(`${url}${path}`)).json(),
    postMessage: (sessionId: string, text: string, headers: Record<string, string> = {}) =>
      fetch(`${url}/v1/sessions/${sessionId}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", ...headers },
        body: JSON.stringify({ text }),
      }),
  };
}
