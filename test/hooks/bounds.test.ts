import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_VALUE_CHARS } from "../../src/hooks/template.js";
import { runs } from "../../src/store/schema.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { createHook, deliver } from "./support.js";

// Hook prompts are bounded: a template that could render past AGENT_BRIDGE_HOOK_PROMPT_MAX_BYTES
// is refused when registered, and a delivery that does render past it is refused before anything
// starts (that rendering stops at the bound is shown in templates.test.ts). Deliveries have a
// body limit of their own.

const SECRET = "bearer-secret-0123456789";
const headers = { "Content-Type": "application/json", Authorization: `Bearer ${SECRET}` };

describe.each(BACKENDS)("hook bounds on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Done."]));
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_BODY_LIMIT_BYTES: "300000",
      AGENT_BRIDGE_DELIVERY_LIMIT_BYTES: "600000",
    });
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  const runsStarted = () => t.database.db.$count(runs);

  const register = (name: string, fields: Record<string, unknown>) =>
    fetch(`${server.url}/v1/hooks`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name, verification: "bearer", secret: SECRET, ...fields }),
    });

  it("refuses a template that could render past the limit, and names the field", async () => {
    const cases: [string, Record<string, unknown>][] = [
      ["prompt_template", { prompt_template: "{{payload}}".repeat(9000) }],
      ["prompt_template", { prompt_template: "{{payload.a}}".repeat(17) }],
      [
        "system_prompt_template",
        { prompt_template: "go", system_prompt_template: "€".repeat(90_000) },
      ],
      [
        "session_key_template",
        { prompt_template: "go", session_key_template: "{{event}}".repeat(20) },
      ],
    ];
    for (const [field, fields] of cases) {
      const res = await register(`big-${crypto.randomUUID()}`, fields);
      expect(res.status).toBe(400);
      const problem = await res.json();
      expect(problem.code).toBe("validation_failed");
      expect(problem.errors).toEqual([
        expect.objectContaining({
          path: field,
          message: expect.stringContaining("AGENT_BRIDGE_HOOK_PROMPT_MAX_BYTES (262144)"),
        }),
      ]);
    }
    const fits = await register(`fits-${crypto.randomUUID()}`, {
      prompt_template: "{{payload.a}}".repeat(16),
    });
    expect(fits.status).toBe(201);
  });

  it("refuses a delivery whose prompt renders past the limit with 422 prompt_too_large, and starts nothing", async () => {
    const name = `wide-${crypto.randomUUID()}`;
    await createHook(server.url, {
      name,
      verification: "bearer",
      secret: SECRET,
      prompt_template: "{{payload.a}}".repeat(16),
    });
    const before = await runsStarted();
    // Three bytes a character: 16 values of 16,384 characters are 768 KiB.
    const body = JSON.stringify({ a: "€".repeat(MAX_VALUE_CHARS) });
    const res = await deliver(server.url, name, body, headers);
    expect(res.status).toBe(422);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    expect(await res.json()).toMatchObject({
      code: "prompt_too_large",
      detail: expect.stringContaining("more than 262144 bytes"),
    });
    expect(await runsStarted()).toBe(before);
    const list = await (await fetch(`${server.url}/v1/hooks/${name}/deliveries`)).json();
    expect(list.data).toEqual([
      expect.objectContaining({
        outcome: "failed",
        run_id: null,
        detail: expect.stringContaining("262144"),
      }),
    ]);
  });

  it("takes a delivery larger than the API's body limit, up to its own; 413 beyond", async () => {
    const name = `large-${crypto.randomUUID()}`;
    await createHook(server.url, {
      name,
      verification: "bearer",
      secret: SECRET,
      prompt_template: "Look at {{payload.title}}",
    });
    const sized = (bytes: number) => {
      const pad = "p".repeat(bytes - JSON.stringify({ title: "t", pad: "" }).length);
      return JSON.stringify({ title: "t", pad });
    };
    const within = await deliver(server.url, name, sized(450_000), headers);
    expect(within.status).toBe(202);
    const beyond = await deliver(server.url, name, sized(600_001), headers);
    expect(beyond.status).toBe(413);
    expect((await beyond.json()).code).toBe("payload_too_large");
    // The API's own routes keep theirs.
    const session = await fetch(`${server.url}/v1/sessions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ title: "t", metadata: { pad: "p".repeat(450_000) } }),
    });
    expect(session.status).toBe(413);
  });
});
