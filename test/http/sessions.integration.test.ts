import { randomUUID } from "node:crypto";
import { count } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Problem } from "../../src/client/index.js";
import { sessions } from "../../src/store/schema.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient, untyped } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";

describe.each(BACKENDS)("sessions API on %s", (backend) => {
  let t: TestApp;
  let api: ReturnType<typeof appClient>;
  beforeAll(async () => {
    t = await createTestApp(backend, {
      AGENT_BRIDGE_PERMISSION_MODE: "plan",
      AGENT_BRIDGE_EFFORT: "high",
      AGENT_BRIDGE_BODY_LIMIT_BYTES: "4096",
    });
    api = appClient(t.app);
  });
  afterAll(() => t.close());

  const rowCount = async () => (await t.database.db.select({ n: count() }).from(sessions))[0]?.n;

  function expectProblem(
    { response, error }: { response: Response; error?: Problem },
    status: number,
    code: Problem["code"],
  ): Problem {
    expect(response.status).toBe(status);
    expect(response.headers.get("content-type")).toBe("application/problem+json");
    expect(error).toMatchObject({ status, code, type: `urn:agent-bridge:problem:${code}` });
    expect(error?.title).toEqual(expect.any(String));
    expect(error?.detail).toEqual(expect.any(String));
    expect(error?.request_id).toBe(response.headers.get("x-request-id"));
    return error as Problem;
  }

  it("creates a session with the server's defaults fixed on it", async () => {
    const { data: body, response } = await api.POST("/v1/sessions");
    expect(response.status).toBe(201);
    expect(response.headers.get("location")).toBe(`/v1/sessions/${body?.id}`);
    expect(body).toMatchObject({
      agent: "claude",
      agent_session_id: null,
      permission_mode: "plan",
      effort: "high",
      model: null,
      worktree: false,
      system_prompt: null,
      metadata: {},
      usage: { input_tokens: 0, output_tokens: 0, cost_usd: 0, runs: 0, num_turns: 0 },
    });
    expect(body?.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("gives each agent's session that agent's default model", async () => {
    const two = await createTestApp(backend, {
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_CLAUDE_MODEL: "sonnet",
      AGENT_BRIDGE_CODEX_MODEL: "gpt-5.5",
    });
    try {
      const twoApi = appClient(two.app);
      const claude = await twoApi.createSession({});
      const codex = await twoApi.createSession({ agent: "codex" });
      expect(claude).toMatchObject({ agent: "claude", model: "sonnet" });
      expect(codex).toMatchObject({ agent: "codex", model: "gpt-5.5" });
      // An agent the server does not run is the client's to fix: 400 naming the field.
      const answer = await api.POST("/v1/sessions", { body: { agent: "codex" } });
      const body = expectProblem(answer, 400, "validation_failed");
      expect(body.errors).toEqual([expect.objectContaining({ path: "agent" })]);
      expect(body.detail).toBe(
        "body agent: this server does not run the codex agent (AGENT_BRIDGE_AGENTS)",
      );
    } finally {
      await two.close();
    }
  });

  it("refuses an agent the server does not know, and changes nothing", async () => {
    const before = await rowCount();
    const answer = await untyped(
      t.app.request("/v1/sessions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ agent: "gpt-engineer" }),
      }),
    );
    const body = expectProblem(answer, 400, "validation_failed");
    expect(body.errors).toEqual([expect.objectContaining({ location: "body", path: "agent" })]);
    expect(await rowCount()).toBe(before);
  });

  it("takes no message for a session whose agent this server no longer runs (503), starting nothing", async () => {
    // As after a restart with fewer back-ends in AGENT_BRIDGE_AGENTS.
    const [row] = await t.database.db
      .insert(sessions)
      .values({
        id: randomUUID(),
        agent: "retired-agent",
        permissionMode: "plan",
        effort: "high",
        worktree: false,
        createdAt: new Date(),
        updatedAt: new Date(),
        lastActivityAt: new Date(),
      })
      .returning();
    const id = row?.id ?? "";
    const answer = await api.POST("/v1/sessions/{id}/messages", {
      params: { path: { id } },
      body: { text: "hi" },
    });
    const body = expectProblem(answer, 503, "agent_unavailable");
    expect(body.detail).toContain("AGENT_BRIDGE_AGENTS");
    const runs = await api.GET("/v1/sessions/{id}/runs", { params: { path: { id } } });
    expect(runs.data?.data).toEqual([]);
  });

  it("creates a session with the options a client gives, and returns them on get", async () => {
    const options = {
      title: "refactor",
      permission_mode: "bypassPermissions",
      model: "sonnet",
      effort: "low",
      system_prompt: "Be brief.",
      worktree: false,
      metadata: { ticket: "AB-1" },
    } as const;
    const created = await api.createSession(options);
    expect(created).toMatchObject(options);
    const { data, response } = await api.GET("/v1/sessions/{id}", {
      params: { path: { id: created.id } },
    });
    expect(response.status).toBe(200);
    expect(data).toEqual(created);
  });

  it("pages through sessions newest first, each exactly once", async () => {
    const mine: string[] = [];
    for (let i = 0; i < 5; i++) mine.push((await api.createSession({ title: `page ${i}` })).id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: { limit: number; cursor?: string } = cursor
        ? { limit: 2, cursor }
        : { limit: 2 };
      const { data: page, response } = await api.GET("/v1/sessions", { params: { query } });
      expect(response.status).toBe(200);
      expect(page?.data.length).toBeLessThanOrEqual(2);
      seen.push(...(page?.data ?? []).map((s) => s.id));
      cursor = page?.next_cursor ?? null;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.filter((id) => mine.includes(id))).toEqual([...mine].reverse());
    expect(seen.length).toBe(await rowCount());
  });

  it("deletes a session, after which it is gone", async () => {
    const { id } = await api.createSession();
    const path = { params: { path: { id } } };
    expect((await api.DELETE("/v1/sessions/{id}", path)).response.status).toBe(204);
    expectProblem(await api.GET("/v1/sessions/{id}", path), 404, "session_not_found");
    expectProblem(await api.DELETE("/v1/sessions/{id}", path), 404, "session_not_found");
  });

  describe("bad input is a problem+json that says what is wrong, and writes nothing", () => {
    it("unknown session id: 404", async () => {
      const id = randomUUID();
      const body = expectProblem(
        await api.GET("/v1/sessions/{id}", { params: { path: { id } } }),
        404,
        "session_not_found",
      );
      expect(body.detail).toContain(id);
    });

    it("malformed session id: 400 naming the path parameter", async () => {
      const body = expectProblem(
        await api.GET("/v1/sessions/{id}", { params: { path: { id: "not-a-uuid" } } }),
        400,
        "validation_failed",
      );
      expect(body.errors).toEqual([
        { location: "path", path: "id", message: expect.stringContaining("UUID") },
      ]);
    });

    it("malformed JSON: 400", async () => {
      const before = await rowCount();
      const answer = await untyped(
        t.app.request("/v1/sessions", {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: '{"title": ',
        }),
      );
      expectProblem(answer, 400, "malformed_json");
      expect(await rowCount()).toBe(before);
    });

    it("a body that is not JSON: 415", async () => {
      const before = await rowCount();
      const answer = await untyped(
        t.app.request("/v1/sessions", {
          method: "POST",
          headers: { "Content-Type": "text/plain" },
          body: "title=x",
        }),
      );
      const body = expectProblem(answer, 415, "unsupported_media_type");
      expect(body.detail).toContain("text/plain");
      expect(await rowCount()).toBe(before);
    });

    it("unknown fields and bad enum values: 400 listing every issue", async () => {
      const before = await rowCount();
      const answer = await untyped(
        t.app.request("/v1/sessions", {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({
            permission_mode: "yolo",
            effort: "extreme",
            colour: "blue",
            worktree: "yes",
          }),
        }),
      );
      const body = expectProblem(answer, 400, "validation_failed");
      const byPath = Object.fromEntries((body.errors ?? []).map((e) => [e.path, e.message]));
      expect(byPath.permission_mode).toContain("acceptEdits");
      expect(byPath.permission_mode).toContain("dangerously-skip-permissions");
      expect(byPath.effort).toContain("xhigh");
      expect(byPath.worktree).toBeDefined();
      expect(body.errors?.some((e) => e.message.includes("colour"))).toBe(true);
      expect(await rowCount()).toBe(before);
    });

    it("a body over the documented limit: 413", async () => {
      const before = await rowCount();
      const answer = await api.POST("/v1/sessions", { body: { system_prompt: "x".repeat(5000) } });
      const body = expectProblem(answer, 413, "payload_too_large");
      expect(body.detail).toContain("4096");
      expect(await rowCount()).toBe(before);
    });

    it("a cursor the server never gave: 400", async () => {
      expectProblem(
        await api.GET("/v1/sessions", { params: { query: { cursor: "bm9wZQ" } } }),
        400,
        "invalid_cursor",
      );
    });

    it("a page size out of range: 400", async () => {
      const body = expectProblem(
        await api.GET("/v1/sessions", { params: { query: { limit: 0 } } }),
        400,
        "validation_failed",
      );
      expect(body.errors?.[0]).toMatchObject({ location: "query", path: "limit" });
    });

    it("a method the path does not take: 405 with Allow", async () => {
      const answer = await untyped(
        t.app.request("/v1/sessions", {
          method: "PUT",
          headers: { "Content-Type": "application/json" },
          body: "{}",
        }),
      );
      expectProblem(answer, 405, "method_not_allowed");
      expect(answer.response.headers.get("allow")).toContain("POST");
    });

    it("an unknown route: 404", async () => {
      expectProblem(await untyped(t.app.request("/v1/nothing-here")), 404, "not_found");
    });
  });
});
