import { randomUUID } from "node:crypto";
import { count } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sessions } from "../../src/store/schema.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";

const json = (body: unknown) => ({
  method: "POST",
  headers: { "Content-Type": "application/json" },
  body: JSON.stringify(body),
});

describe.each(BACKENDS)("sessions API on %s", (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(backend, {
      AGENT_BRIDGE_PERMISSION_MODE: "plan",
      AGENT_BRIDGE_EFFORT: "high",
      AGENT_BRIDGE_BODY_LIMIT_BYTES: "4096",
    });
  });
  afterAll(() => t.close());

  const rowCount = async () => (await t.database.db.select({ n: count() }).from(sessions))[0]?.n;

  async function expectProblem(res: Response, status: number, code: string) {
    expect(res.status).toBe(status);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const body = await res.json();
    expect(body).toMatchObject({ status, code, type: `urn:agent-bridge:problem:${code}` });
    expect(body.title).toEqual(expect.any(String));
    expect(body.detail).toEqual(expect.any(String));
    expect(body.request_id).toBe(res.headers.get("x-request-id"));
    return body;
  }

  it("creates a session with the server's defaults fixed on it", async () => {
    const res = await t.app.request("/v1/sessions", { method: "POST" });
    expect(res.status).toBe(201);
    const body = await res.json();
    expect(res.headers.get("location")).toBe(`/v1/sessions/${body.id}`);
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
    expect(body.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("gives each agent's session that agent's default model", async () => {
    const two = await createTestApp(backend, {
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_CLAUDE_MODEL: "sonnet",
      AGENT_BRIDGE_CODEX_MODEL: "gpt-5.5",
    });
    try {
      const claude = await (await two.app.request("/v1/sessions", json({}))).json();
      const codex = await (await two.app.request("/v1/sessions", json({ agent: "codex" }))).json();
      expect(claude).toMatchObject({ agent: "claude", model: "sonnet" });
      expect(codex).toMatchObject({ agent: "codex", model: "gpt-5.5" });
      // An agent the server does not run is the client's to fix: 400 naming the field.
      const res = await t.app.request("/v1/sessions", json({ agent: "codex" }));
      const body = await expectProblem(res, 400, "validation_failed");
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
    const res = await t.app.request("/v1/sessions", json({ agent: "gpt-engineer" }));
    const body = await expectProblem(res, 400, "validation_failed");
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
    const res = await t.app.request(`/v1/sessions/${row?.id}/messages`, json({ text: "hi" }));
    const body = await expectProblem(res, 503, "agent_unavailable");
    expect(body.detail).toContain("AGENT_BRIDGE_AGENTS");
    const runs = await t.app.request(`/v1/sessions/${row?.id}/runs`);
    expect((await runs.json()).data).toEqual([]);
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
    };
    const created = await (await t.app.request("/v1/sessions", json(options))).json();
    expect(created).toMatchObject(options);
    const res = await t.app.request(`/v1/sessions/${created.id}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(created);
  });

  it("pages through sessions newest first, each exactly once", async () => {
    const mine: string[] = [];
    for (let i = 0; i < 5; i++) {
      mine.push(
        (await (await t.app.request("/v1/sessions", json({ title: `page ${i}` }))).json()).id,
      );
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor ? `?limit=2&cursor=${cursor}` : "?limit=2";
      const res = await t.app.request(`/v1/sessions${query}`);
      expect(res.status).toBe(200);
      const page = await res.json();
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((s: { id: string }) => s.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.filter((id) => mine.includes(id))).toEqual([...mine].reverse());
    expect(seen.length).toBe(await rowCount());
  });

  it("deletes a session, after which it is gone", async () => {
    const { id } = await (await t.app.request("/v1/sessions", { method: "POST" })).json();
    expect((await t.app.request(`/v1/sessions/${id}`, { method: "DELETE" })).status).toBe(204);
    await expectProblem(await t.app.request(`/v1/sessions/${id}`), 404, "session_not_found");
    await expectProblem(
      await t.app.request(`/v1/sessions/${id}`, { method: "DELETE" }),
      404,
      "session_not_found",
    );
  });

  describe("bad input is a problem+json that says what is wrong, and writes nothing", () => {
    it("unknown session id: 404", async () => {
      const id = randomUUID();
      const body = await expectProblem(
        await t.app.request(`/v1/sessions/${id}`),
        404,
        "session_not_found",
      );
      expect(body.detail).toContain(id);
    });

    it("malformed session id: 400 naming the path parameter", async () => {
      const body = await expectProblem(
        await t.app.request("/v1/sessions/not-a-uuid"),
        400,
        "validation_failed",
      );
      expect(body.errors).toEqual([
        { location: "path", path: "id", message: expect.stringContaining("UUID") },
      ]);
    });

    it("malformed JSON: 400", async () => {
      const before = await rowCount();
      const res = await t.app.request("/v1/sessions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: '{"title": ',
      });
      await expectProblem(res, 400, "malformed_json");
      expect(await rowCount()).toBe(before);
    });

    it("a body that is not JSON: 415", async () => {
      const before = await rowCount();
      const res = await t.app.request("/v1/sessions", {
        method: "POST",
        headers: { "Content-Type": "text/plain" },
        body: "title=x",
      });
      const body = await expectProblem(res, 415, "unsupported_media_type");
      expect(body.detail).toContain("text/plain");
      expect(await rowCount()).toBe(before);
    });

    it("unknown fields and bad enum values: 400 listing every issue", async () => {
      const before = await rowCount();
      const res = await t.app.request(
        "/v1/sessions",
        json({ permission_mode: "yolo", effort: "extreme", colour: "blue", worktree: "yes" }),
      );
      const body = await expectProblem(res, 400, "validation_failed");
      const byPath = Object.fromEntries(
        body.errors.map((e: { path: string; message: string }) => [e.path, e.message]),
      );
      expect(byPath.permission_mode).toContain("acceptEdits");
      expect(byPath.permission_mode).toContain("dangerously-skip-permissions");
      expect(byPath.effort).toContain("xhigh");
      expect(byPath.worktree).toBeDefined();
      expect(body.errors.some((e: { message: string }) => e.message.includes("colour"))).toBe(true);
      expect(await rowCount()).toBe(before);
    });

    it("a body over the documented limit: 413", async () => {
      const before = await rowCount();
      const res = await t.app.request("/v1/sessions", json({ system_prompt: "x".repeat(5000) }));
      const body = await expectProblem(res, 413, "payload_too_large");
      expect(body.detail).toContain("4096");
      expect(await rowCount()).toBe(before);
    });

    it("a cursor the server never gave: 400", async () => {
      await expectProblem(await t.app.request("/v1/sessions?cursor=bm9wZQ"), 400, "invalid_cursor");
    });

    it("a page size out of range: 400", async () => {
      const body = await expectProblem(
        await t.app.request("/v1/sessions?limit=0"),
        400,
        "validation_failed",
      );
      expect(body.errors[0]).toMatchObject({ location: "query", path: "limit" });
    });

    it("a method the path does not take: 405 with Allow", async () => {
      const res = await t.app.request("/v1/sessions", { ...json({}), method: "PUT" });
      await expectProblem(res, 405, "method_not_allowed");
      expect(res.headers.get("allow")).toContain("POST");
    });

    it("an unknown route: 404", async () => {
      await expectProblem(await t.app.request("/v1/nothing-here"), 404, "not_found");
    });
  });
});
