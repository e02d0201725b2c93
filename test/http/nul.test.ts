import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getTableName } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { apiKeys, hookDeliveries, hooks, runs, sessions } from "../../src/store/schema.js";
import { createHook, deliver } from "../hooks/support.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";

// U+0000 in anything a client sends: Postgres and PGlite refuse it in text and jsonb, so every
// string is checked, and a NUL is a 400 naming the field (or the JSON path) that holds it, over
// real HTTP, writing nothing.

const NUL = "a\u0000b";
const BEARER_SECRET = "bearer-secret-0123456789";

describe.each(BACKENDS)("U+0000 in input on %s", (backend) => {
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let root: string;
  let sessionId: string;
  const hook = `nul-${randomBytes(3).toString("hex")}`;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "agent-bridge-nul-"));
    t = await createTestApp(backend, {
      AGENT_BRIDGE_ALLOWED_ROOTS: root,
      AGENT_BRIDGE_WORK_DIR: root,
    });
    server = await listen(t.app);
    sessionId = (await (await fetch(`${server.url}/v1/sessions`, { method: "POST" })).json()).id;
    await createHook(server.url, {
      name: hook,
      verification: "bearer",
      secret: BEARER_SECRET,
      prompt_template: "Review {{payload.title}}",
      session_key_template: "{{payload.repo}}",
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await rm(root, { recursive: true, force: true });
  });

  /** Rows of every table a request could write to. */
  const counts = async () => {
    const db = t.database.db;
    const tables = [sessions, runs, hooks, hookDeliveries, apiKeys];
    return Object.fromEntries(
      await Promise.all(tables.map(async (table) => [getTableName(table), await db.$count(table)])),
    );
  };

  const send = (method: string, path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });

  const hookDefinition = (fields: Record<string, unknown>) => ({
    verification: "bearer",
    secret: BEARER_SECRET,
    prompt_template: "Review it",
    ...fields,
  });
  const hookBody = (fields: Record<string, unknown>) => ({
    name: `h-${randomBytes(3).toString("hex")}`,
    ...hookDefinition(fields),
  });

  const cases: { what: string; request: () => Promise<Response>; path: string }[] = [
    {
      what: "a session's title",
      path: "title",
      request: () => send("POST", "/v1/sessions", { title: NUL }),
    },
    {
      what: "a session's system_prompt",
      path: "system_prompt",
      request: () => send("POST", "/v1/sessions", { system_prompt: NUL }),
    },
    {
      what: "a metadata value",
      path: "metadata.ticket",
      request: () => send("POST", "/v1/sessions", { metadata: { ticket: NUL } }),
    },
    {
      what: "a metadata key",
      path: "metadata",
      request: () => send("POST", "/v1/sessions", { metadata: { [NUL]: "x" } }),
    },
    {
      what: "a session's work_dir",
      path: "work_dir",
      request: () => send("POST", "/v1/sessions", { work_dir: NUL }),
    },
    {
      what: "a message's text",
      path: "text",
      request: () => send("POST", `/v1/sessions/${sessionId}/messages`, { text: NUL }),
    },
    {
      what: "a message's system_prompt",
      path: "system_prompt",
      request: () =>
        send("POST", `/v1/sessions/${sessionId}/messages`, { text: "hi", system_prompt: NUL }),
    },
    { what: "a key's name", path: "name", request: () => send("POST", "/v1/keys", { name: NUL }) },
    ...(
      [
        ["secret", `${BEARER_SECRET}${NUL}`],
        ["prompt_template", NUL],
        ["system_prompt_template", NUL],
        ["session_key_template", NUL],
        ["work_dir", NUL],
        ["schedule", `0 6 * * ${NUL}`],
        ["callback_url", `http://127.0.0.1/${NUL}`],
      ] as const
    ).map(([field, value]) => ({
      what: `a hook's ${field}`,
      path: field,
      request: () => send("POST", "/v1/hooks", hookBody({ [field]: value })),
    })),
    {
      what: "a hook's event filter",
      path: "events.1",
      request: () => send("POST", "/v1/hooks", hookBody({ events: ["push", NUL] })),
    },
    {
      what: "a hook's timezone",
      path: "timezone",
      request: () => send("POST", "/v1/hooks", hookBody({ schedule: "0 6 * * *", timezone: NUL })),
    },
    {
      what: "a hook's prompt_template on update",
      path: "prompt_template",
      request: () => send("PUT", `/v1/hooks/${hook}`, hookDefinition({ prompt_template: NUL })),
    },
  ];

  for (const { what, path, request } of cases) {
    it(`${what}: 400 validation_failed naming ${path}, nothing written`, async () => {
      const before = await counts();
      const res = await request();
      expect(res.status).toBe(400);
      expect(res.headers.get("content-type")).toBe("application/problem+json");
      const problem = await res.json();
      expect(problem).toMatchObject({
        code: "validation_failed",
        errors: [{ location: "body", path, message: "must not contain U+0000 (NUL)" }],
      });
      expect(await counts()).toEqual(before);
    });
  }

  const delivery = (payload: unknown, id = crypto.randomUUID()) =>
    deliver(server.url, hook, JSON.stringify(payload), {
      "Content-Type": "application/json",
      Authorization: `Bearer ${BEARER_SECRET}`,
      "X-Delivery-Id": id,
      "X-Event": "push",
    });

  for (const [what, payload, path] of [
    ["a webhook payload's value", { title: NUL, repo: "r" }, "title"],
    ["the value a hook's session key renders", { title: "t", repo: NUL }, "repo"],
    [
      "a value deep in an array",
      { title: "t", repo: "r", commits: [{}, { message: NUL }] },
      "commits.1.message",
    ],
    ["a webhook payload's key", { title: "t", repo: "r", labels: { [NUL]: 1 } }, "labels"],
  ] as const) {
    it(`${what}: 400 validation_failed naming ${path}, no delivery recorded`, async () => {
      const before = await counts();
      const res = await delivery(payload);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        code: "validation_failed",
        errors: [{ location: "body", path, message: "must not contain U+0000 (NUL)" }],
      });
      expect(await counts()).toEqual(before);
    });
  }

  it("a NUL at the bottom of a payload nested 20 000 deep: 400 naming its path, not a stack overflow", async () => {
    const depth = 20_000;
    const deep = `${"[".repeat(depth)}"a\\u0000b"${"]".repeat(depth)}`;
    const res = await deliver(server.url, hook, `{"title":"t","repo":"r","deep":${deep}}`, {
      "Content-Type": "application/json",
      Authorization: `Bearer ${BEARER_SECRET}`,
      "X-Delivery-Id": crypto.randomUUID(),
    });
    expect(res.status).toBe(400);
    expect((await res.json()).errors).toEqual([
      {
        location: "body",
        path: `deep${".0".repeat(depth)}`,
        message: "must not contain U+0000 (NUL)",
      },
    ]);
  });
});
