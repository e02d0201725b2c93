import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { holdUntilReleased, type MessagesBody } from "../support/mock-anthropic.js";
import { waitUntil } from "../support/process.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";
import { SseReader } from "../support/sse.js";

// Follow-ups while busy: a message sent while its session has a live run waits its turn when it
// asks to (`when_busy: queue`, or `Prefer: when-busy=queue`), and runs after the live run and the
// messages queued before it, in order; without asking it is refused (409 session_busy) as ever.
// The real `claude` binary against the mock Messages API: each run's prompt must reach the model
// in its turn.

/** The text of a request's last user message: the prompt of the run that made it. */
function lastUserText(body: MessagesBody): string {
  const last = body.messages.filter((m) => m.role === "user").at(-1);
  const content = last?.content ?? "";
  if (typeof content === "string") return content;
  return content.map((block) => (typeof block.text === "string" ? block.text : "")).join("\n");
}

/** Which of `prompts` each main request since `from` carried as its last user message. */
function promptsSeen(app: RealClaudeApp, prompts: string[], from: number): (string | undefined)[] {
  return app.mock
    .mainRequests()
    .slice(from)
    .map((body) => prompts.find((p) => lastUserText(body).includes(p)));
}

describe.each(REAL_CLI_BACKENDS)("follow-ups while a run is live, on %s", (backend) => {
  let app: RealClaudeApp;

  beforeAll(async () => {
    app = await realClaudeApp(backend);
  });
  afterAll(async () => {
    await app.close();
  });

  const post = (sessionId: string, body: Record<string, unknown>, headers = {}) =>
    fetch(`${app.server.url}/v1/sessions/${sessionId}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const sessionRuns = async (id: string) =>
    (
      (await (await fetch(`${app.server.url}/v1/sessions/${id}/runs`)).json()) as {
        data: unknown[];
      }
    ).data;
  const getRun = async (id: string) =>
    (await fetch(`${app.server.url}/v1/runs/${id}`)).json() as Promise<Record<string, unknown>>;

  /** A session whose first run is live: its model request is held until `release`. */
  async function liveSession() {
    const held = holdUntilReleased();
    app.mock.script({ blocks: [{ type: "text", text: "First answer." }], hold: held.hold });
    const session = await app.api.newSession();
    const res = await post(session.id, { text: "the first message" }, { Prefer: "respond-async" });
    expect(res.status).toBe(202);
    const live = (await res.json()) as { id: string };
    await held.arrived;
    return { session, live, release: held.release };
  }

  it("queued messages run after the live run in the order they were sent, each prompt reaching the model in its turn, in the response mode each asked for", async () => {
    const from = app.mock.mainRequests().length;
    const { session, live, release } = await liveSession();

    // Not asking to wait: refused, as before.
    const busy = await post(session.id, { text: "not queued" });
    expect(busy.status).toBe(409);
    expect(await busy.json()).toMatchObject({ code: "session_busy" });
    // The body wins over Prefer.
    const bodyWins = await post(
      session.id,
      { text: "not queued either", when_busy: "reject" },
      { Prefer: "when-busy=queue" },
    );
    expect(bodyWins.status).toBe(409);
    expect(bodyWins.headers.get("preference-applied")).toBeNull();
    const unknown = await post(session.id, { text: "later?", when_busy: "later" });
    expect(unknown.status).toBe(400);
    expect(JSON.stringify(await unknown.json())).toContain("when_busy");

    const one = await post(
      session.id,
      { text: "follow-up alpha", when_busy: "queue" },
      { Prefer: "respond-async" },
    );
    expect(one.status).toBe(202);
    expect(one.headers.get("preference-applied")).toBe("respond-async");
    const alpha = (await one.json()) as { id: string; status: string };
    // Waiting for its session, it shows as queued.
    expect(alpha.status).toBe("queued");
    expect(one.headers.get("location")).toBe(`/v1/runs/${alpha.id}`);

    const two = await post(
      session.id,
      { text: "follow-up bravo" },
      { Prefer: "respond-async, when-busy=queue" },
    );
    expect(two.status).toBe(202);
    expect(two.headers.get("preference-applied")).toBe("respond-async, when-busy=queue");
    const bravo = (await two.json()) as { id: string };

    // A stream: answered at once, its first event the run's start once its turn comes.
    const three = await post(
      session.id,
      { text: "follow-up charlie" },
      { Prefer: "when-busy=queue", Accept: "text/event-stream" },
    );
    expect(three.status).toBe(200);
    expect(three.headers.get("preference-applied")).toBe("when-busy=queue");
    const charlie = three.headers.get("x-run-id") as string;
    const stream = SseReader.of(three);

    // Idempotency holds for queued messages too: the same request again is the same run.
    const keyed = { text: "follow-up echo", when_busy: "queue" };
    const firstTry = await post(session.id, keyed, {
      Prefer: "respond-async",
      "Idempotency-Key": "echo-1",
    });
    const secondTry = await post(session.id, keyed, {
      Prefer: "respond-async",
      "Idempotency-Key": "echo-1",
    });
    expect(firstTry.status).toBe(202);
    expect(secondTry.status).toBe(202);
    const echo = (await firstTry.json()) as { id: string };
    expect(((await secondTry.json()) as { id: string }).id).toBe(echo.id);

    // Waits for its run to finish: its answer comes when it has run, last.
    const four = post(
      session.id,
      { text: "follow-up delta", when_busy: "queue" },
      { Accept: "application/json" },
    );
    // Stored (waiting) before the live run is let go.
    await waitUntil(
      async () => (await sessionRuns(session.id)).length === 6,
      "the sixth run stored",
      30_000,
    );

    app.mock.script(
      { blocks: [{ type: "text", text: "Reply alpha." }] },
      { blocks: [{ type: "text", text: "Reply bravo." }] },
      { blocks: [{ type: "text", text: "Reply charlie." }] },
      { blocks: [{ type: "text", text: "Reply echo." }] },
      { blocks: [{ type: "text", text: "Reply delta." }] },
    );
    release();

    const finished = (await (await four).json()) as { text: string; run: { id: string } };
    expect(finished.text).toBe("Reply delta.");
    const frames = await stream.events();
    expect(frames[0]?.event).toBe("run_started");
    expect(frames.at(-1)).toMatchObject({
      event: "completion",
      data: { status: "succeeded", result: "Reply charlie." },
    });

    const order = [live.id, alpha.id, bravo.id, charlie, echo.id, finished.run.id];
    const runs = await Promise.all(order.map(getRun));
    expect(runs.map((r) => r.status)).toEqual(order.map(() => "succeeded"));
    expect(runs.map((r) => (r.completion as { result: string }).result)).toEqual([
      "First answer.",
      "Reply alpha.",
      "Reply bravo.",
      "Reply charlie.",
      "Reply echo.",
      "Reply delta.",
    ]);
    // One after the other: each started once the one before it had finished.
    for (let i = 1; i < runs.length; i++) {
      const before = runs[i - 1] as { finished_at: string };
      const after = runs[i] as { started_at: string };
      expect(Date.parse(after.started_at)).toBeGreaterThanOrEqual(Date.parse(before.finished_at));
    }
    const prompts = [
      "the first message",
      "follow-up alpha",
      "follow-up bravo",
      "follow-up charlie",
      "follow-up echo",
      "follow-up delta",
    ];
    expect(promptsSeen(app, prompts, from)).toEqual(prompts);
  }, 240_000);

  it("a cancelled waiting run never runs, and those behind it keep their order", async () => {
    const from = app.mock.mainRequests().length;
    const { session, live, release } = await liveSession();
    const queue = async (text: string) => {
      const res = await post(session.id, { text, when_busy: "queue" }, { Prefer: "respond-async" });
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    };
    // The first as the docs show it.
    const example = codeBlocks(
      await docSection("docs/conversations.md", "Follow-ups while a run is live"),
      "http",
    )[0] as string;
    const [head = "", bodyText = ""] = example.split("\n\n");
    const [requestLine = "", ...headerLines] = head.split("\n");
    const path = requestLine.replace("POST ", "").replace("{id}", session.id);
    const headers = Object.fromEntries(
      headerLines.map((line) => line.split(": ", 2) as [string, string]),
    );
    const documented = await fetch(`${app.server.url}${path}`, {
      method: "POST",
      headers,
      body: bodyText,
    });
    expect(documented.status).toBe(202);
    expect(documented.headers.get("preference-applied")).toBe("respond-async, when-busy=queue");
    const first = ((await documented.json()) as { id: string }).id;
    const dropped = await queue("queued two");
    const third = await queue("queued three");

    const cancel = await fetch(`${app.server.url}/v1/runs/${dropped}/cancel`, { method: "POST" });
    expect(cancel.status).toBe(200);
    expect(await cancel.json()).toMatchObject({ status: "cancelled" });

    app.mock.script(
      { blocks: [{ type: "text", text: "One." }] },
      { blocks: [{ type: "text", text: "Three." }] },
    );
    release();
    const ends = await SseReader.of(
      await fetch(`${app.server.url}/v1/runs/${third}/events`),
    ).events();
    expect(ends.at(-1)?.data).toMatchObject({ status: "succeeded", result: "Three." });
    expect(await getRun(first)).toMatchObject({ status: "succeeded" });
    expect(await getRun(dropped)).toMatchObject({
      status: "cancelled",
      completion: { status: "cancelled" },
      started_at: null,
    });
    expect(await getRun(live.id)).toMatchObject({ status: "succeeded" });
    const prompts = ["the first message", JSON.parse(bodyText).text, "queued two", "queued three"];
    expect(promptsSeen(app, prompts, from)).toEqual([
      "the first message",
      JSON.parse(bodyText).text,
      "queued three",
    ]);
  }, 180_000);

  it("deleting a session with waiting runs cancels them with the live one, and none of them reaches the model", async () => {
    const from = app.mock.mainRequests().length;
    const { session, live, release } = await liveSession();
    const waiting: string[] = [];
    for (const text of ["never one", "never two"]) {
      const res = await post(session.id, { text, when_busy: "queue" }, { Prefer: "respond-async" });
      expect(res.status).toBe(202);
      waiting.push(((await res.json()) as { id: string }).id);
    }
    const followers = waiting.map(async (id) =>
      SseReader.of(await fetch(`${app.server.url}/v1/runs/${id}/events`)).events(),
    );

    const deleted = await fetch(`${app.server.url}/v1/sessions/${session.id}`, {
      method: "DELETE",
    });
    expect(deleted.status).toBe(204);
    release();
    for (const frames of await Promise.all(followers)) {
      expect(frames.at(-1)).toMatchObject({ event: "completion", data: { status: "cancelled" } });
    }
    for (const id of [live.id, ...waiting]) {
      expect((await fetch(`${app.server.url}/v1/runs/${id}`)).status).toBe(404);
    }
    expect(promptsSeen(app, ["the first message", "never one", "never two"], from)).toEqual([
      "the first message",
    ]);
  }, 180_000);
});
