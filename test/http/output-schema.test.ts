import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_OUTPUT_SCHEMA_BYTES, MAX_OUTPUT_SCHEMA_DEPTH } from "../../src/output-schema.js";
import { hooks, runs } from "../../src/store/schema.js";
import { createHook, deliver, getRun, isFinished, until } from "../hooks/support.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { result, systemInit } from "../support/stream-json-lines.js";

// `output_schema` through HTTP with the scripted fake CLI, on every database: which schemas are
// refused (a 400 naming the field, nothing written), and that a run keeps its schema and its
// answer where every reader finds them. What the real CLIs do with it is in
// test/runs/structured-output.real.test.ts and test/agents/codex/structured-output.real.test.ts.

const VERDICT = {
  type: "object",
  properties: { verdict: { type: "string" } },
  required: ["verdict"],
};

/** Nested `levels` objects deep: `{"properties":{"a":{"properties":{"a":…}}}}`. */
function nested(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "object" };
  for (let i = 1; i < levels; i += 2) schema = { type: "object", properties: { a: schema } };
  return schema;
}

const BAD_SCHEMAS: { what: string; schema: unknown; message: RegExp }[] = [
  { what: "not an object", schema: "object", message: /expected record|expected object/i },
  { what: "an array", schema: [VERDICT], message: /expected record|expected object/i },
  {
    what: "not an object schema",
    schema: { type: "array", items: { type: "string" } },
    message: /must be an object schema/,
  },
  {
    what: "too large",
    schema: {
      type: "object",
      properties: { a: { type: "string", description: "x".repeat(MAX_OUTPUT_SCHEMA_BYTES) } },
    },
    message: new RegExp(`at most ${MAX_OUTPUT_SCHEMA_BYTES} bytes`),
  },
  {
    what: "too deep",
    schema: nested(MAX_OUTPUT_SCHEMA_DEPTH + 2),
    message: new RegExp(`more than ${MAX_OUTPUT_SCHEMA_DEPTH} levels deep`),
  },
  {
    what: "an invalid keyword value",
    schema: { type: "object", minProperties: -1 },
    message: /not a valid JSON Schema.*minProperties must be >= 0/,
  },
  {
    what: "an unknown keyword (Claude Code refuses it)",
    schema: { type: "object", "x-review": true },
    message: /unknown keyword: "x-review"/,
  },
  {
    what: "a draft Claude Code does not know",
    schema: { $schema: "https://json-schema.org/draft/2020-12/schema", type: "object" },
    message: /not a valid JSON Schema/,
  },
  {
    what: "a reference to elsewhere",
    schema: { type: "object", properties: { a: { $ref: "https://example.com/a.json" } } },
    message: /can't resolve reference/,
  },
  { what: "async", schema: { $async: true, type: "object" }, message: /async/ },
];

describe.each(BACKENDS)("output_schema through HTTP on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    fake = await fakeCli({
      steps: [
        { emit: systemInit() },
        {
          emit: result({
            result: '{"verdict":"approve"}',
            structured_output: { verdict: "approve" },
          }),
        },
      ],
    });
    t = await createTestApp(backend, fake.bridgeEnv);
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  const send = (path: string, body: unknown, method = "POST") =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
  const newSession = async () => (await (await send("/v1/sessions", {})).json()) as { id: string };
  const count = async (table: typeof runs | typeof hooks) =>
    (await t.database.db.select().from(table)).length;
  const hookBody = (name: string, extra: Record<string, unknown> = {}) => ({
    name,
    verification: "bearer",
    secret: "bearer-secret-0123456789",
    prompt_template: "review",
    ...extra,
  });
  /** A 400 naming `output_schema` in the body, with a message matching `message`. */
  const refused = async (res: Response, message: RegExp) => {
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toContain("application/problem+json");
    const problem = (await res.json()) as { errors: { path: string; message: string }[] };
    const issue = problem.errors.find((e) => e.path.startsWith("output_schema"));
    expect(issue?.message).toMatch(message);
  };

  it.each(BAD_SCHEMAS)(
    "a message with an output_schema $what is a 400 naming it; no run is made",
    async ({ schema, message }) => {
      const session = await newSession();
      const before = await count(runs);
      await refused(
        await send(`/v1/sessions/${session.id}/messages`, { text: "hi", output_schema: schema }),
        message,
      );
      expect(await count(runs)).toBe(before);
    },
  );

  it.each(BAD_SCHEMAS)(
    "a hook with an output_schema $what is a 400 naming it, made or replaced; nothing changes",
    async ({ schema, message }) => {
      const name = `bad-${crypto.randomUUID().slice(0, 8)}`;
      const before = await count(hooks);
      await refused(await send("/v1/hooks", hookBody(name, { output_schema: schema })), message);
      expect(await count(hooks)).toBe(before);
      await createHook(server.url, hookBody(name));
      await refused(
        await send(
          `/v1/hooks/${name}`,
          { ...hookBody(name), name: undefined, output_schema: schema },
          "PUT",
        ),
        message,
      );
      expect(await (await fetch(`${server.url}/v1/hooks/${name}`)).json()).toMatchObject({
        output_schema: null,
      });
    },
  );

  it("a retry with an output_schema that is not an object schema is a 400; no run is made", async () => {
    const session = await newSession();
    const first = (await (
      await send(`/v1/sessions/${session.id}/messages`, { text: "hi" })
    ).json()) as { run: { id: string } };
    const before = await count(runs);
    await refused(
      await send(`/v1/runs/${first.run.id}/retry`, { output_schema: { type: "string" } }),
      /must be an object schema/,
    );
    expect(await count(runs)).toBe(before);
  });

  it("U+0000 in a schema's key is a 400 naming where it is; no run is made", async () => {
    const session = await newSession();
    const before = await count(runs);
    const res = await send(`/v1/sessions/${session.id}/messages`, {
      text: "hi",
      output_schema: { type: "object", properties: { "a\u0000b": { type: "string" } } },
    });
    expect(res.status).toBe(400);
    const problem = (await res.json()) as { errors: { path: string }[] };
    expect(problem.errors.map((e) => e.path)).toEqual(["output_schema.properties"]);
    expect(await count(runs)).toBe(before);
  });

  it("a run keeps its schema in the database as sent: GET /v1/runs/{id} echoes it with the checked answer, and the CLI got it as --json-schema, keys in their order", async () => {
    const session = await newSession();
    const finished = (await (
      await send(`/v1/sessions/${session.id}/messages`, { text: "hi", output_schema: VERDICT })
    ).json()) as { run: { id: string }; completion: Record<string, unknown> };
    expect(finished.completion).toMatchObject({
      status: "succeeded",
      structured_output: { verdict: "approve" },
    });
    const run = await (await fetch(`${server.url}/v1/runs/${finished.run.id}`)).json();
    expect(run).toMatchObject({
      output_schema: VERDICT,
      structured_output: { verdict: "approve" },
    });
    const started = (await fake.invocations()).find((start) => start.args.includes(session.id));
    // As the client wrote it, keys in their order (the order of `properties` is the answer's).
    expect(started?.args).toContain(`--json-schema=${JSON.stringify(VERDICT)}`);
  });

  it("a hook's schema is kept as sent, and each delivery's run carries it and its checked answer", async () => {
    const name = `verdict-${crypto.randomUUID().slice(0, 8)}`;
    const hook = await createHook(server.url, hookBody(name, { output_schema: VERDICT }));
    expect(JSON.stringify(hook.output_schema)).toBe(JSON.stringify(VERDICT));
    const res = await deliver(server.url, name, "{}", {
      "Content-Type": "application/json",
      Authorization: "Bearer bearer-secret-0123456789",
    });
    expect(res.status).toBe(202);
    const { run_id } = (await res.json()) as { run_id: string };
    const run = await until(async () => {
      const shown = await getRun(server.url, run_id);
      return isFinished(shown) && shown;
    });
    expect(run).toMatchObject({
      status: "succeeded",
      output_schema: VERDICT,
      structured_output: { verdict: "approve" },
    });
  });

  it("an idempotency key used again with another output_schema is a 422", async () => {
    const session = await newSession();
    const key = { "Idempotency-Key": crypto.randomUUID() };
    const post = (schema: unknown) =>
      fetch(`${server.url}/v1/sessions/${session.id}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json", ...key },
        body: JSON.stringify({ text: "hi", output_schema: schema }),
      });
    expect((await post(VERDICT)).status).toBe(200);
    expect((await post({ ...VERDICT, required: [] })).status).toBe(422);
  });
});
