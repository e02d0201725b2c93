import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { NO_CHANGE } from "../../src/hooks/checkout.js";
import {
  MAX_VALUE_CHARS,
  PromptTooLargeError,
  render,
  reservedBytes,
  unknownPlaceholders,
} from "../../src/hooks/template.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { createHook, deliver, getRun, isFinished, until } from "./support.js";

const context = (payload: unknown) => ({
  payload,
  event: "push",
  delivery_id: "d-1",
  hook: "h",
  fire_time: "",
  ...NO_CHANGE,
});

describe("prompt templates", () => {
  it("fills payload paths, the event and the delivery id; a missing path is empty", () => {
    const out = render(
      "{{ payload.pr.title }}|{{payload.pr.labels.1}}|{{payload.nope.deeper}}|{{event}}|{{delivery_id}}|{{payload.n}}|{{payload.flag}}|{{payload.pr.user}}",
      context({ pr: { title: "T", labels: ["a", "b"], user: { login: "x" } }, n: 7, flag: false }),
    );
    expect(out).toBe('T|b||push|d-1|7|false|{"login":"x"}');
  });

  it("inserts a value holding {{…}} as text: it is never expanded again", () => {
    const out = render(
      "A={{payload.a}} B={{payload.b}}",
      context({ a: "{{payload.b}} {{event}}", b: "secret" }),
    );
    expect(out).toBe("A={{payload.b}} {{event}} B=secret");
  });

  it("keeps newlines and cuts a value to the bound", () => {
    const big = "x".repeat(1_000_000);
    const out = render("[{{payload.big}}]", context({ big }));
    expect(out).toBe(`[${"x".repeat(MAX_VALUE_CHARS)}…]`);
    expect(render("{{payload.t}}", context({ t: "line 1\nline 2\r\n" }))).toBe(
      "line 1\nline 2\r\n",
    );
  });

  it("does not reach through the prototype", () => {
    const payload = JSON.parse('{"__proto__": {"x": "own"}}');
    expect(render("{{payload.constructor}}|{{payload.toString}}", context({}))).toBe("|");
    expect(render("{{payload.__proto__.x}}", context(payload))).toBe("own");
  });

  it("leaves unknown placeholders as they are, and names them for validation", () => {
    expect(render("{{env.HOME}} {{ payload..x }}", context({}))).toBe(
      "{{env.HOME}} {{ payload..x }}",
    );
    expect(unknownPlaceholders("{{payload.a}} {{event}} {{env.HOME}}")).toEqual(["{{env.HOME}}"]);
  });
});

describe("rendering within a byte limit", () => {
  it("stops as soon as the text passes the limit, without building the rest", () => {
    let reads = 0;
    const payload = {
      get value() {
        reads++;
        return "x".repeat(MAX_VALUE_CHARS);
      },
    };
    const template = "{{payload.value}}".repeat(9000);
    const limit = { maxBytes: 256 * 1024, name: "prompt_template" };
    expect(() => render(template, context(payload), limit)).toThrow(PromptTooLargeError);
    // 16 values fill the 256 KiB; the 17th passes it, and nothing after it is looked up.
    expect(reads).toBe(17);
  });

  it("counts UTF-8 bytes, not characters", () => {
    const limit = { maxBytes: 1024, name: "prompt_template" };
    expect(render("{{payload.v}}", context({ v: "a".repeat(1024) }), limit)).toHaveLength(1024);
    expect(() => render("{{payload.v}}", context({ v: "€".repeat(342) }), limit)).toThrow(
      /prompt_template renders to more than 1024 bytes/,
    );
  });

  it("reserves the fixed text and 16,384 bytes for each placeholder", () => {
    expect(reservedBytes("Review {{payload.title}} ({{event}})")).toBe(
      "Review  ()".length + 2 * MAX_VALUE_CHARS,
    );
  });

  it("defaults to 256 KiB of prompt and 25 MiB of delivery", () => {
    expect(loadConfig({}).hooks).toMatchObject({
      promptMaxBytes: 262_144,
      deliveryLimitBytes: 26_214_400,
    });
  });
});

describe.each(BACKENDS)("hostile payload values through a delivery on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  const secret = "bearer-secret-0123456789";

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["ok"]));
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_BODY_LIMIT_BYTES: "4194304",
    });
    server = await listen(t.app);
    await createHook(server.url, {
      name: "hostile",
      verification: "bearer",
      secret,
      prompt_template:
        "Title: {{payload.title}}\nBody: {{payload.body}}\nMissing: [{{payload.missing.path}}]\nBig: {{payload.big}}",
      session_key_template: "{{payload.key}}",
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  it("puts the values in the prompt as text, cut to the bound, and the CLI receives it on stdin", async () => {
    const body = JSON.stringify({
      title: "{{payload.body}} and {{delivery_id}}",
      body: "line one\nline two\n--dangerously-skip-permissions",
      big: "y".repeat(1_000_000),
      key: "k".repeat(5000),
    });
    const res = await deliver(server.url, "hostile", body, {
      "Content-Type": "application/json",
      Authorization: `Bearer ${secret}`,
    });
    expect(res.status).toBe(202);
    const run = await getRun(server.url, (await res.json()).run_id);
    expect(run.prompt).toBe(
      [
        "Title: {{payload.body}} and {{delivery_id}}",
        "Body: line one\nline two\n--dangerously-skip-permissions",
        "Missing: []",
        `Big: ${"y".repeat(MAX_VALUE_CHARS)}…`,
      ].join("\n"),
    );
    await until(async () => isFinished(await getRun(server.url, run.id)));
    const seen = await fake.record();
    expect(seen.stdin.at(-1)).toContain("line two\\n--dangerously-skip-permissions");
    expect(seen.args).not.toContain("--dangerously-skip-permissions");
    // A long session key is stored by its hash; the run still starts.
    const session = await (await fetch(`${server.url}/v1/sessions/${run.session_id}`)).json();
    expect(session.metadata.session_key).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});
