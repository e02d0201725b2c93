import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { httpApi } from "../support/app.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { chunk, type MessagesBody, type MockAnthropic } from "../support/mock-anthropic.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";
import { SseReader } from "../support/sse.js";

// The real `claude` binary against the mock Messages API: a retry drops the failed turn from
// what the model sees, and a run's usage is its own, whether or not the CLI got to its result.

/** How often `text` appears in what the model was sent. */
const timesSent = (body: MessagesBody | undefined, text: string) =>
  JSON.stringify(body?.messages ?? []).split(text).length - 1;

describe.each(REAL_CLI_BACKENDS)("retries and usage with the real claude CLI on %s", (backend) => {
  let mock: MockAnthropic;
  let server: { url: string; close(): Promise<void> };
  let api: ReturnType<typeof httpApi>;

  let app: RealClaudeApp;
  beforeAll(async () => {
    app = await realClaudeApp(backend);
    ({ mock, server, api } = app);
  });
  afterAll(() => app.close());

  const asJson = async (res: Response) => res.json();
  const send = async (sessionId: string, text: string) =>
    asJson(await api.postMessage(sessionId, text, { Accept: "application/json" }));

  it("retries a turn that failed on an API error from the last good message: the model never sees the failed turn", async () => {
    const session = await api.newSession();
    mock.script({ blocks: [{ type: "text", text: "Noted: apricot." }] });
    const good = await send(session.id, "remember the word apricot");
    expect(good.completion.resume_at).toMatch(/^[0-9a-f-]{36}$/);
    // The run says where its turn left the conversation, under the generic name and the old one.
    expect(good.run).toMatchObject({
      resume_at: good.completion.resume_at,
      last_message_uuid: good.completion.resume_at,
    });

    mock.script({ error: { status: 400, type: "invalid_request_error", message: "no luck" } });
    const failed = await send(session.id, "which word was it?");
    expect(failed.completion).toMatchObject({ status: "failed", resume_at: null });

    mock.script({ blocks: [{ type: "text", text: "It was apricot." }] });
    const retried = await asJson(
      await fetch(`${server.url}/v1/runs/${failed.run.id}/retry`, {
        method: "POST",
        headers: { Accept: "application/json" },
      }),
    );
    expect(retried).toMatchObject({
      run: { status: "succeeded", trigger: "retry" },
      text: "It was apricot.",
    });
    // Resumed after the good answer, with the prompt once: the failed turn is gone (a plain
    // --resume would have merged the failed prompt into the next one).
    const seen = mock.mainRequests().at(-1);
    expect(timesSent(seen, "Noted: apricot.")).toBe(1);
    expect(timesSent(seen, "which word was it?")).toBe(1);

    // The conversation goes on from the retried turn.
    mock.script({ blocks: [{ type: "text", text: "You are welcome." }] });
    await send(session.id, "thanks");
    const next = mock.mainRequests().at(-1);
    expect(timesSent(next, "It was apricot.")).toBe(1);
    expect(timesSent(next, "which word was it?")).toBe(1);
  });

  it("counts the usage a cancelled run's messages reported, in the run and its session", async () => {
    mock.script({
      blocks: [{ type: "text", text: chunk("slow ".repeat(200), 200).join("") }],
      usage: { input_tokens: 321, cache_read_input_tokens: 45, cache_creation_input_tokens: 6 },
      delayMs: 50,
    });
    const session = await api.newSession();
    const run = await asJson(
      await api.postMessage(session.id, "go slowly", { Prefer: "respond-async" }),
    );
    const reader = SseReader.of(await fetch(`${server.url}/v1/runs/${run.id}/events`));
    await reader.events(2); // run_started, the first text_delta: the message has started
    await fetch(`${server.url}/v1/runs/${run.id}/cancel`, { method: "POST" });
    const completion = (await reader.events()).at(-1)?.data as {
      cost_usd: number | null;
      usage: { num_turns: number };
    };
    // The cancel interrupted the turn and the CLI priced it. Its result counts the message's
    // tokens, or none (as it may when the interrupt comes mid-stream): then the messages' count.
    // Its turns are its own count (the interrupt may be one) or the messages'.
    expect(completion.cost_usd).toBeGreaterThan(0);
    expect(completion).toMatchObject({
      status: "cancelled",
      usage: { input_tokens: 321, cache_read_tokens: 45, cache_creation_tokens: 6 },
    });
    expect(completion.usage.num_turns).toBeGreaterThanOrEqual(1);
    expect(await api.json(`/v1/sessions/${session.id}`)).toMatchObject({
      usage: { input_tokens: 321, cache_read_tokens: 45, cache_creation_tokens: 6, runs: 1 },
    });
  });

  it("gives a resumed run its own duration_api_ms, not the session's running total", async () => {
    const session = await api.newSession();
    // Each SSE event of the first answer 100 ms apart: over a second of API time.
    mock.script({ blocks: [{ type: "text", text: "Slowly." }], delayMs: 100 });
    const slow = await send(session.id, "first");
    expect(slow.completion.usage.duration_api_ms).toBeGreaterThanOrEqual(1000);
    mock.script({ blocks: [{ type: "text", text: "Quickly." }] });
    const quick = await send(session.id, "second");
    expect(quick.completion.usage.duration_api_ms).toBeGreaterThan(0);
    // The running total would be the first run's time and more; the second run's own time is
    // less than the first's however slow the machine is (its answer has no delays).
    expect(quick.completion.usage.duration_api_ms).toBeLessThan(
      slow.completion.usage.duration_api_ms,
    );
    expect(quick.run.usage.duration_api_ms).toBe(quick.completion.usage.duration_api_ms);
  });
});
