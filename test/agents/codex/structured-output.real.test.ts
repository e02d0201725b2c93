import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, listen, type TestApp } from "../../support/app.js";
import { type CodexEnv, makeCodexEnv } from "../../support/codex-env.js";
import { REAL_CLI_BACKENDS } from "../../support/db.js";
import { type MockOpenAI, startMockOpenAI } from "../../support/mock-openai.js";

// `output_schema` with the real `codex` binary (0.171.0) against the mock Responses API: codex
// reads the schema from a file (`--output-schema`) and sends it as the request's `text.format`, a
// `json_schema` in strict mode; its final message is the answer as JSON text, which the bridge
// parses and checks against the schema itself (codex does not).

/** A schema the Responses API's strict mode takes: every property required, no others. */
const VERDICT = {
  type: "object",
  properties: {
    verdict: { type: "string", enum: ["approve", "request_changes"] },
    comments: { type: "array", items: { type: "string" } },
  },
  required: ["verdict", "comments"],
  additionalProperties: false,
};

describe.each(REAL_CLI_BACKENDS)("structured output of the real codex CLI on %s", (backend) => {
  let mock: MockOpenAI;
  let ce: CodexEnv;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    mock = await startMockOpenAI({ quiet: true });
    ce = await makeCodexEnv(mock.url);
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
    });
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server?.close();
    await t?.close();
    await mock?.close();
    await ce?.cleanup();
  });

  const post = async (path: string, body: unknown) =>
    (
      await fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body),
      })
    ).json();
  /** A new codex session's run of one message with VERDICT, to its end. */
  const review = async (answer: string) => {
    mock.script({ output: [{ type: "message", text: answer }] });
    const session = (await post("/v1/sessions", { agent: "codex" })) as { id: string };
    return (await post(`/v1/sessions/${session.id}/messages`, {
      text: "review it",
      output_schema: VERDICT,
    })) as { run: Record<string, unknown>; completion: Record<string, unknown> };
  };

  it("sends the schema as a strict json_schema text format, and the final message, parsed, is the structured output", async () => {
    const answer = { verdict: "approve", comments: [] };
    const finished = await review(JSON.stringify(answer));
    expect(finished.completion).toMatchObject({
      status: "succeeded",
      result: JSON.stringify(answer),
      structured_output: answer,
    });
    expect(finished.run).toMatchObject({ output_schema: VERDICT, structured_output: answer });
    expect(mock.responsesRequests().at(-1)?.text).toMatchObject({
      format: { type: "json_schema", strict: true, schema: VERDICT },
    });
  });

  it("a final message of the wrong shape fails the run output_invalid, naming what does not match", async () => {
    const finished = await review(JSON.stringify({ verdict: "maybe", comments: [] }));
    expect(finished.completion).toMatchObject({
      status: "failed",
      error_code: "output_invalid",
      result: '{"verdict":"maybe","comments":[]}',
      structured_output: null,
    });
    expect(finished.completion.error).toBe(
      "the agent's structured output does not match output_schema: /verdict must be equal to one of the allowed values",
    );
  });

  it("a final message that is not JSON fails the run output_invalid, its text kept", async () => {
    const finished = await review("I approve.");
    expect(finished.completion).toMatchObject({
      status: "failed",
      error_code: "output_invalid",
      error: "the agent gave no structured output",
      result: "I approve.",
      structured_output: null,
    });
  });
});
