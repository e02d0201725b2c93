import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getTableName } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentBridgeClient, createClient } from "../../src/client/index.js";
import {
  DEPTH_MESSAGE,
  inputIssues,
  LONE_SURROGATE_MESSAGE,
  MAX_JSON_DEPTH,
  NUL_MESSAGE,
} from "../../src/http/input.js";
import {
  apiKeys,
  hookDeliveries,
  hooks,
  permissionRequests,
  runs,
  sessions,
} from "../../src/store/schema.js";
import { createHook, deliver } from "../hooks/support.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { SseReader } from "../support/sse.js";
import { controlRequest, result, systemInit } from "../support/stream-json-lines.js";

// Input the service cannot handle as sent. Postgres and PGlite refuse U+0000 in text and jsonb
// and a lone UTF-16 surrogate in jsonb (a text column stores it as U+FFFD); JSON nested thousands
// deep overflows JSON.stringify; a cursor's time may be one JS holds and Postgres does not. Each
// is a 400 naming the field (or the JSON path), over real HTTP, writing nothing.

const BEARER_SECRET = "bearer-secret-0123456789";

/** Strings no field may hold: the database cannot store them as sent. */
const UNSTORABLE = [
  { what: "U+0000", text: "a\u0000b", message: NUL_MESSAGE },
  { what: "a lone surrogate", text: "a\udc00", message: LONE_SURROGATE_MESSAGE },
] as const;

/** `{"a":{"a":…1…}}`, `levels` objects deep, as JSON text. */
const nestedObjects = (levels: number) => `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`;

describe("the walk of a request's JSON", () => {
  it(`takes JSON nested ${MAX_JSON_DEPTH} levels deep and refuses the next level, at its path`, () => {
    expect(inputIssues(JSON.parse(nestedObjects(MAX_JSON_DEPTH)))).toEqual([]);
    expect(inputIssues(JSON.parse(nestedObjects(MAX_JSON_DEPTH + 1)))).toEqual([
      { path: Array(MAX_JSON_DEPTH).fill("a").join("."), message: DEPTH_MESSAGE },
    ]);
  });

  it("takes surrogate pairs and refuses either half alone, in keys and values", () => {
    expect(inputIssues({ "key 😀": "value 😀" })).toEqual([]);
    expect(inputIssues({ a: "\ud83d", b: "\ude00x", c: "😀\ud83d" })).toEqual(
      ["a", "b", "c"].map((path) => ({ path, message: LONE_SURROGATE_MESSAGE })),
    );
  });
});

describe.each(BACKENDS)("input that cannot be handled as sent, on %s", (backend) => {
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let api: AgentBridgeClient;
  let root: string;
  let fake: FakeCli;
  let sessionId: string;
  const hook = `unfit-${randomBytes(3).toString("hex")}`;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "agent-bridge-unfit-"));
    // The one run of these tests asks for a permission and goes on once it is answered.
    fake = await fakeCli({
      steps: [
        { emit: systemInit() },
        { emit: controlRequest("req_1", "Bash", { command: "make deploy" }, "toolu_1") },
        { waitStdin: "control_response" },
        { emit: result({ result: "Deployed." }) },
      ],
    });
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_ALLOWED_ROOTS: root,
      AGENT_BRIDGE_WORK_DIR: root,
    });
    server = await listen(t.app);
    api = createClient({ baseUrl: server.url });
    sessionId = (await api.createSession()).id;
    await createHook(server.url, {
      name: hook,
      verification: "bearer",
      secret: BEARER_SECRET,
      prompt_template: "Review {{payload.title}} {{payload.deep}}",
      session_key_template: "{{payload.repo}}",
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
    await rm(root, { recursive: true, force: true });
  });

  /** Rows of every table a request could write to. */
  const counts = async () => {
    const db = t.database.db;
    const tables = [sessions, runs, hooks, hookDeliveries, apiKeys, permissionRequests];
    return Object.fromEntries(
      await Promise.all(tables.map(async (table) => [getTableName(table), await db.$count(table)])),
    );
  };

  // Raw: the values these tests send are ones no client should (U+0000, lone surrogates, JSON
  // nested thousands deep, hand-written JSON text); where a test's set-up or check is ordinary,
  // it goes through the typed client.
  const send = (method: string, path: string, body: unknown) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { "Content-Type": "application/json" },
      // JSON.stringify writes a lone surrogate as its escape (`"\udc00"`), as a client would.
      body: typeof body === "string" ? body : JSON.stringify(body),
    });

  /** A 400 problem+json listing exactly `errors`. */
  const expectRefused = async (res: Response, errors: Record<string, string>[]) => {
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const problem = await res.json();
    expect(problem).toMatchObject({ code: "validation_failed" });
    expect(problem.errors).toEqual(errors);
  };

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

  const cases = (
    bad: string,
  ): { what: string; request: () => Promise<Response>; path: string }[] => [
    {
      what: "a session's title",
      path: "title",
      request: () => send("POST", "/v1/sessions", { title: bad }),
    },
    {
      what: "a session's system_prompt",
      path: "system_prompt",
      request: () => send("POST", "/v1/sessions", { system_prompt: bad }),
    },
    {
      what: "a metadata value",
      path: "metadata.ticket",
      request: () => send("POST", "/v1/sessions", { metadata: { ticket: bad } }),
    },
    {
      what: "a metadata key",
      path: "metadata",
      request: () => send("POST", "/v1/sessions", { metadata: { [bad]: "x" } }),
    },
    {
      what: "a session's work_dir",
      path: "work_dir",
      request: () => send("POST", "/v1/sessions", { work_dir: bad }),
    },
    {
      what: "a message's text",
      path: "text",
      request: () => send("POST", `/v1/sessions/${sessionId}/messages`, { text: bad }),
    },
    {
      what: "a message's system_prompt",
      path: "system_prompt",
      request: () =>
        send("POST", `/v1/sessions/${sessionId}/messages`, { text: "hi", system_prompt: bad }),
    },
    { what: "a key's name", path: "name", request: () => send("POST", "/v1/keys", { name: bad }) },
    ...(
      [
        ["secret", `${BEARER_SECRET}${bad}`],
        ["prompt_template", bad],
        ["system_prompt_template", bad],
        ["session_key_template", bad],
        ["work_dir", bad],
        ["schedule", `0 6 * * ${bad}`],
        ["callback_url", `http://127.0.0.1/${bad}`],
      ] as const
    ).map(([field, value]) => ({
      what: `a hook's ${field}`,
      path: field,
      request: () => send("POST", "/v1/hooks", hookBody({ [field]: value })),
    })),
    {
      what: "a hook's event filter",
      path: "events.1",
      request: () => send("POST", "/v1/hooks", hookBody({ events: ["push", bad] })),
    },
    {
      what: "a hook's timezone",
      path: "timezone",
      request: () => send("POST", "/v1/hooks", hookBody({ schedule: "0 6 * * *", timezone: bad })),
    },
    {
      what: "a hook's prompt_template on update",
      path: "prompt_template",
      request: () => send("PUT", `/v1/hooks/${hook}`, hookDefinition({ prompt_template: bad })),
    },
  ];

  for (const { what: badWhat, text, message } of UNSTORABLE) {
    for (const { what, path, request } of cases(text)) {
      it(`${badWhat} in ${what}: 400 validation_failed naming ${path}, nothing written`, async () => {
        const before = await counts();
        await expectRefused(await request(), [{ location: "body", path, message }]);
        expect(await counts()).toEqual(before);
      });
    }
  }

  it("lone surrogates as a metadata key and in its value: one 400 naming metadata, no session", async () => {
    const before = await counts();
    const res = await send("POST", "/v1/sessions", '{"metadata":{"\\ud800":"\\udc00x"}}');
    await expectRefused(res, [
      { location: "body", path: "metadata", message: LONE_SURROGATE_MESSAGE },
    ]);
    expect(await counts()).toEqual(before);
  });

  it("a surrogate pair is text: a title with an emoji is stored as sent", async () => {
    const { data, response } = await api.POST("/v1/sessions", { body: { title: "ship it 🚀" } });
    expect(response.status).toBe(201);
    expect((await api.getSession(data?.id ?? "")).title).toBe("ship it 🚀");
  });

  const delivery = (body: string) =>
    deliver(server.url, hook, body, {
      "Content-Type": "application/json",
      Authorization: `Bearer ${BEARER_SECRET}`,
      "X-Delivery-Id": crypto.randomUUID(),
      "X-Event": "push",
    });

  for (const { what: badWhat, text, message } of UNSTORABLE) {
    for (const [what, payload, path] of [
      ["a webhook payload's value", { title: text, repo: "r" }, "title"],
      ["the value a hook's session key renders", { title: "t", repo: text }, "repo"],
      [
        "a value deep in an array",
        { title: "t", repo: "r", commits: [{}, { message: text }] },
        "commits.1.message",
      ],
      ["a webhook payload's key", { title: "t", repo: "r", labels: { [text]: 1 } }, "labels"],
    ] as const) {
      it(`${badWhat} in ${what}: 400 validation_failed naming ${path}, no delivery recorded`, async () => {
        const before = await counts();
        await expectRefused(await delivery(JSON.stringify(payload)), [
          { location: "body", path, message },
        ]);
        expect(await counts()).toEqual(before);
      });
    }
  }

  for (const [shape, deep, path] of [
    ["arrays", `${"[".repeat(5_000)}1${"]".repeat(5_000)}`, `deep${".0".repeat(127)}`],
    ["objects", nestedObjects(5_000), `deep${".a".repeat(127)}`],
    // Past the bound nothing is walked: the NUL at the bottom is never reached.
    [
      "arrays around a NUL",
      `${"[".repeat(20_000)}"a\\u0000b"${"]".repeat(20_000)}`,
      `deep${".0".repeat(127)}`,
    ],
  ] as const) {
    it(`a templated field of ${shape} nested far past the bound: 400 naming where it passes it, no delivery recorded`, async () => {
      const before = await counts();
      const res = await delivery(`{"title":"t","repo":"r","deep":${deep}}`);
      await expectRefused(res, [{ location: "body", path, message: DEPTH_MESSAGE }]);
      expect(await counts()).toEqual(before);
    });
  }

  it("an answer whose updated_input cannot be handled is a 400 naming it; the request stays pending, and answerable", async () => {
    const session = await api.createSession({ approvals: "api" });
    const { response: res } = await api.POST("/v1/sessions/{id}/messages", {
      params: { path: { id: session.id } },
      body: { text: "deploy" },
      parseAs: "stream",
    });
    const runId = res.headers.get("x-run-id") ?? "";
    const sse = SseReader.of(res);
    await sse.until("permission_request");
    const answer = (body: string) => send("POST", `/v1/runs/${runId}/permissions/req_1`, body);
    const pending = () => api.listPermissions(runId);
    const before = await pending();
    expect(before).toEqual([expect.objectContaining({ request_id: "req_1", state: "pending" })]);
    const refusals = [
      ['{"command":"echo \\ud800"}', "updated_input.command", LONE_SURROGATE_MESSAGE],
      ['{"command":"echo \\u0000"}', "updated_input.command", NUL_MESSAGE],
      [
        `{"command":${nestedObjects(5_000)}}`,
        `updated_input.command${".a".repeat(126)}`,
        DEPTH_MESSAGE,
      ],
    ] as const;
    for (const [input, path, message] of refusals) {
      await expectRefused(await answer(`{"decision":"allow","updated_input":${input}}`), [
        { location: "body", path, message },
      ]);
      expect(await pending()).toEqual(before);
    }
    const allowed = await answer('{"decision":"allow","updated_input":{"command":"echo ok"}}');
    expect(allowed.status).toBe(200);
    expect(await allowed.json()).toMatchObject({ request_id: "req_1", state: "allowed" });
    const frames = await sse.until("completion");
    expect(frames.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Deployed." });
    const responses = (await fake.record()).stdin
      .map((line) => JSON.parse(line))
      .filter((line) => line.type === "control_response");
    expect(responses).toEqual([
      expect.objectContaining({
        response: expect.objectContaining({
          request_id: "req_1",
          response: expect.objectContaining({
            behavior: "allow",
            updatedInput: { command: "echo ok" },
          }),
        }),
      }),
    ]);
  });

  const cursorOf = (t: string) =>
    Buffer.from(JSON.stringify({ t, id: crypto.randomUUID() })).toString("base64url");

  type Page = { data?: unknown; error?: unknown; response: Response };
  for (const [route, page] of [
    [
      "/v1/sessions",
      (cursor: string): Promise<Page> => api.GET("/v1/sessions", { params: { query: { cursor } } }),
    ],
    [
      "/v1/runs",
      (cursor: string): Promise<Page> => api.GET("/v1/runs", { params: { query: { cursor } } }),
    ],
    [
      "/v1/sessions/{id}/runs",
      (cursor: string): Promise<Page> =>
        api.GET("/v1/sessions/{id}/runs", {
          params: { path: { id: sessionId }, query: { cursor } },
        }),
    ],
    [
      "/v1/hooks/{name}/deliveries",
      (cursor: string): Promise<Page> =>
        api.GET("/v1/hooks/{name}/deliveries", {
          params: { path: { name: hook }, query: { cursor } },
        }),
    ],
  ] as const) {
    it(`a cursor of year 0 (JS holds it, Postgres does not) on ${route}: 400 invalid_cursor; year 1 pages`, async () => {
      const { error, response } = await page(cursorOf("0000-01-01T00:00:00Z"));
      expect(response.status).toBe(400);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      expect(error).toMatchObject({
        code: "invalid_cursor",
        detail: expect.stringMatching(/^cursor /),
      });
      const earliest = await page(cursorOf("0001-01-01T00:00:00Z"));
      expect(earliest.response.status).toBe(200);
      expect(earliest.data).toEqual({ data: [], next_cursor: null });
    });
  }
});
