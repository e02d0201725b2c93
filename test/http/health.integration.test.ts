import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";

const { version: packageVersion } = JSON.parse(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
) as { version: string };

describe.each(BACKENDS)("health on %s", (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(backend);
  });
  afterAll(() => t.close());

  it("GET / says what this is and where its docs are, without a key", async () => {
    const keyed = await createTestApp(backend, { AGENT_BRIDGE_AUTH: "keys" });
    try {
      const { data, response } = await appClient(keyed.app).GET("/");
      expect(response.status).toBe(200);
      expect(data).toEqual({
        name: "agent-bridge",
        version: packageVersion,
        api_version: "1.0.0",
        docs: "/docs",
        openapi: "/openapi.json",
      });
    } finally {
      await keyed.close();
    }
  });

  it("healthz answers while the process is up", async () => {
    const { data, response } = await appClient(t.app).GET("/healthz");
    expect(response.status).toBe(200);
    expect(data).toEqual({ status: "ok" });
  });

  it("readyz names the database and each agent back-end with its CLI's version", async () => {
    const { data: body, response } = await appClient(t.app).GET("/readyz");
    expect(response.status).toBe(200);
    expect(body).toMatchObject({
      status: "ok",
      database: backend,
      default_agent: "claude",
      agents: { claude: { bin: t.config.claude.bin, credentials: "ANTHROPIC_API_KEY" } },
    });
    expect(body?.agents.claude?.version).toMatch(/\d+\.\d+\.\d+/);
  });
});

describe("readiness failures", () => {
  it("readyz is 503 naming the missing claude binary", async () => {
    const t = await createTestApp("pglite", { AGENT_BRIDGE_CLAUDE_BIN: "/nonexistent/claude" });
    try {
      const { error, response } = await appClient(t.app).GET("/readyz");
      expect(response.status).toBe(503);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      expect(error?.code).toBe("not_ready");
      expect(error?.detail).toContain("/nonexistent/claude");
      expect(error?.detail).toContain("not found");
    } finally {
      await t.close();
    }
  });

  it("readyz is 503 when the database no longer answers", async () => {
    const t = await createTestApp("pglite");
    await t.database.close();
    const { error, response } = await appClient(t.app).GET("/readyz");
    expect(response.status).toBe(503);
    expect(error?.detail).toContain("database unreachable");
  });
});

describe("readiness and the runs' sandbox", () => {
  const sandboxOf = async (env: Record<string, string>) => {
    const t = await createTestApp("pglite", env);
    try {
      const { data, response } = await appClient(t.app).GET("/readyz");
      expect(response.status).toBe(200);
      return data?.sandbox;
    } finally {
      await t.close();
    }
  };

  it("names bubblewrap and its version when each run gets a sandbox, and the runs' limits", async () => {
    expect(await sandboxOf({ AGENT_BRIDGE_SANDBOX: "on" })).toEqual({
      enabled: true,
      mechanism: "bubblewrap",
      version: expect.stringMatching(/^\d+\.\d+/),
      // Where this machine allows them (test/process/run-limits.real.test.ts), else why not.
      limits: expect.objectContaining({ enabled: expect.any(Boolean) }),
    });
    expect(
      await sandboxOf({
        AGENT_BRIDGE_SANDBOX: "on",
        AGENT_BRIDGE_RUN_MEMORY_MB: "0",
        AGENT_BRIDGE_RUN_MAX_PROCESSES: "0",
      }),
    ).toEqual(
      expect.objectContaining({
        limits: {
          enabled: false,
          reason: "AGENT_BRIDGE_RUN_MEMORY_MB and AGENT_BRIDGE_RUN_MAX_PROCESSES are 0",
        },
      }),
    );
  });

  it("says why not, where bubblewrap is missing on a set-up of one user (auto)", async () => {
    expect(await sandboxOf({ PATH: "/nonexistent" })).toEqual({
      enabled: false,
      reason: "bubblewrap (bwrap) is not installed",
    });
  });

  it("says it is off when the operator set it off", async () => {
    expect(await sandboxOf({ AGENT_BRIDGE_SANDBOX: "off" })).toEqual({
      enabled: false,
      reason: "AGENT_BRIDGE_SANDBOX=off",
    });
  });
});

describe("readiness and the CLI's credentials", () => {
  it("is 503 naming the variable to set when the CLI has no credentials; healthz stays up", async () => {
    const home = await mkdtemp(join(tmpdir(), "agent-bridge-home-"));
    const t = await createTestApp("pglite", { HOME: home, ANTHROPIC_API_KEY: "" });
    try {
      const api = appClient(t.app);
      const { error, response } = await api.GET("/readyz");
      expect(response.status).toBe(503);
      expect(error?.code).toBe("not_ready");
      expect(error?.detail).toContain("the claude CLI has no credentials: set ANTHROPIC_API_KEY");
      expect((await api.GET("/healthz")).response.status).toBe(200);
    } finally {
      await t.close();
      await rm(home, { recursive: true, force: true });
    }
  });
});
