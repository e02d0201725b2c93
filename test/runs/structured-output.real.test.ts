import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildHookWorkers } from "../../src/app.js";
import type { CallbackOutbox } from "../../src/hooks/outbox.js";
import {
  createHook,
  deliver,
  githubHeaders,
  newStandardSecret,
  type Receiver,
  startReceiver,
  until,
} from "../hooks/support.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import {
  type MockAnthropic,
  noStructuredOutputTurns,
  structuredOutputTurn,
} from "../support/mock-anthropic.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";
import { SseReader } from "../support/sse.js";

// `output_schema` with the real `claude` binary against the mock Messages API: the CLI offers the
// model its StructuredOutput tool with the schema; the bridge checks the answer itself, since the
// CLI ends `success` without one when the model never gave it a valid one.

const VERDICT = {
  type: "object",
  properties: {
    verdict: { type: "string", enum: ["approve", "request_changes"] },
    comments: { type: "array", items: { type: "string" } },
  },
  required: ["verdict"],
};

const SECRET = "github-secret-0123456789";

interface Finished {
  run: Record<string, unknown> & { id: string };
  completion: Record<string, unknown>;
  text: string;
}

describe.each(REAL_CLI_BACKENDS)("structured output of the real claude CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let server: { url: string; close(): Promise<void> };
  let app: RealClaudeApp;
  let receiver: Receiver;
  let outbox: CallbackOutbox;

  beforeAll(async () => {
    app = await realClaudeApp(backend);
    ({ mock, server } = app);
    receiver = await startReceiver();
    ({ outbox } = buildHookWorkers(app.t.deps));
    outbox.start();
  });
  afterAll(async () => {
    await outbox.stop();
    await receiver.close();
    await app.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const send = async (sessionId: string, body: Record<string, unknown>) =>
    (await (await post(`/v1/sessions/${sessionId}/messages`, body)).json()) as Finished;
  const newSession = async () => (await (await post("/v1/sessions", {})).json()) as { id: string };
  const eventsOf = async (runId: string) =>
    SseReader.of(await fetch(`${server.url}/v1/runs/${runId}/events?events=full`)).events();
  const getRun = async (runId: string) =>
    (await (await fetch(`${server.url}/v1/runs/${runId}`)).json()) as Record<string, unknown>;

  it("a model that answers through StructuredOutput: the completion and GET /v1/runs/{id} carry the answer, and the run echoes its schema", async () => {
    const session = await newSession();
    const answer = { verdict: "approve", comments: ["tidy"] };
    mock.script(structuredOutputTurn(answer, "Looks good."));
    const finished = await send(session.id, { text: "review it", output_schema: VERDICT });
    expect(finished.completion).toMatchObject({ status: "succeeded", structured_output: answer });
    expect(finished.text).toBe("Looks good.");
    // The model was offered the tool with the schema as its input schema.
    const tool = mock
      .mainRequests()
      .at(-1)
      ?.tools?.find((t) => t.name === "StructuredOutput");
    expect(tool).toMatchObject({ input_schema: VERDICT });
    expect(await getRun(finished.run.id)).toMatchObject({
      status: "succeeded",
      output_schema: VERDICT,
      structured_output: answer,
      completion: { structured_output: answer },
    });
  });

  it("a run without a schema has no structured_output at all", async () => {
    const session = await newSession();
    mock.script({ blocks: [{ type: "text", text: "Plain." }] });
    const finished = await send(session.id, { text: "hi" });
    expect(finished.completion.status).toBe("succeeded");
    expect(finished.completion).not.toHaveProperty("structured_output");
    const run = await getRun(finished.run.id);
    expect(run).toMatchObject({ output_schema: null });
    expect(run).not.toHaveProperty("structured_output");
    // No StructuredOutput tool was offered.
    expect(
      mock
        .mainRequests()
        .at(-1)
        ?.tools?.map((t) => t.name),
    ).not.toContain("StructuredOutput");
  });

  it("a model that never calls StructuredOutput: the run fails output_invalid with its text kept, and the CLI's enforce message is nowhere in its events", async () => {
    const session = await newSession();
    mock.script(...noStructuredOutputTurns("I think it is fine."));
    const finished = await send(session.id, { text: "review it", output_schema: VERDICT });
    expect(finished.completion).toMatchObject({
      status: "failed",
      is_error: true,
      error_code: "output_invalid",
      error: "the agent gave no structured output",
      result: "I think it is fine. (again)",
      structured_output: null,
      // The turn is in the conversation all the same: the next message follows it.
      resume_at: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    // The CLI did send its enforce message to the model…
    expect(JSON.stringify(mock.mainRequests().at(-1)?.messages)).toContain(
      "[structured-output-enforce]",
    );
    // …which the bridge shows nowhere, in the full view of the run's log either.
    const frames = await eventsOf(finished.run.id);
    expect(frames.at(-1)?.event).toBe("completion");
    expect(frames.map((f) => f.raw).join("\n")).not.toContain("structured-output-enforce");
    expect(finished.text).toBe("I think it is fine.\n\nI think it is fine. (again)");
    expect(await getRun(finished.run.id)).toMatchObject({
      status: "failed",
      structured_output: null,
      result: "I think it is fine. (again)",
    });
  });

  it("a model that calls StructuredOutput with input the schema refuses, and never again: output_invalid", async () => {
    const session = await newSession();
    mock.script(
      structuredOutputTurn({ verdict: "maybe" }),
      ...noStructuredOutputTurns("I cannot decide."),
    );
    const finished = await send(session.id, { text: "review it", output_schema: VERDICT });
    expect(finished.completion).toMatchObject({
      status: "failed",
      error_code: "output_invalid",
      structured_output: null,
    });
    // The CLI told the model its input did not match, as a tool result.
    expect(JSON.stringify(mock.mainRequests().at(-2)?.messages)).toContain(
      "Output does not match required schema",
    );
  });

  it("a retry keeps the retried run's schema, or takes its own", async () => {
    const session = await newSession();
    mock.script(...noStructuredOutputTurns("No verdict."));
    const failed = await send(session.id, { text: "review it", output_schema: VERDICT });
    expect(failed.completion.error_code).toBe("output_invalid");

    mock.script(structuredOutputTurn({ verdict: "request_changes" }));
    const retried = (await (await post(`/v1/runs/${failed.run.id}/retry`, {})).json()) as Finished;
    expect(retried.run).toMatchObject({ trigger: "retry", output_schema: VERDICT });
    expect(retried.completion).toMatchObject({
      status: "succeeded",
      structured_output: { verdict: "request_changes" },
    });

    const score = {
      type: "object",
      properties: { score: { type: "integer" } },
      required: ["score"],
    };
    mock.script(structuredOutputTurn({ score: 7 }));
    const again = (await (
      await post(`/v1/runs/${retried.run.id}/retry`, { output_schema: score })
    ).json()) as Finished;
    expect(again.run).toMatchObject({ output_schema: score });
    expect(again.completion).toMatchObject({
      status: "succeeded",
      structured_output: { score: 7 },
    });
  });

  it("a hook's schema goes to each delivery's run, and its callback carries the structured output", async () => {
    const name = `verdict-${crypto.randomUUID().slice(0, 8)}`;
    const hook = await createHook(server.url, {
      name,
      verification: "github",
      secret: SECRET,
      prompt_template: "Review pull request {{payload.number}}",
      permission_mode: "bypassPermissions",
      output_schema: VERDICT,
      callback_url: receiver.url,
      callback_secret: newStandardSecret(),
    });
    expect(hook).toMatchObject({ output_schema: VERDICT });
    mock.script(structuredOutputTurn({ verdict: "approve" }));
    const body = JSON.stringify({ number: 7 });
    const receipt = (await (
      await deliver(server.url, name, body, githubHeaders(SECRET, body))
    ).json()) as { run_id: string };
    const callback = await until(
      () =>
        receiver.received
          .map((r) => JSON.parse(r.body) as Finished)
          .find((b) => b.run.id === receipt.run_id),
      30_000,
      "the callback",
    );
    expect(callback.run).toMatchObject({
      output_schema: VERDICT,
      structured_output: { verdict: "approve" },
    });
    expect(callback.completion).toMatchObject({
      status: "succeeded",
      structured_output: { verdict: "approve" },
    });
  });
});
