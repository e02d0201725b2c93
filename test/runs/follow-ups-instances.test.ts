import { afterAll, describe, expect, it } from "vitest";
import { makeClaudeEnv } from "../support/claude-env.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import { clusterDatabase, completions, instance } from "../support/instances.js";
import {
  holdUntilReleased,
  type MessagesBody,
  type MockAnthropic,
  startMockAnthropic,
} from "../support/mock-anthropic.js";
import type { ServerProcess } from "../support/server.js";

// Follow-ups queued behind a live run on two instances sharing one Postgres, with the real
// `claude` binary against the mock Messages API: each instance keeps its own line of the runs
// waiting there, yet the session's messages run in the order they were stored, whichever
// instance took each; a waiting run whose instance dies is closed, and the line goes on.

const cleanups: Cleanups = [];
afterAll(async () => {
  await undo(cleanups);
});

/** The text of a request's last user message: the prompt of the run that made it. */
function lastUserText(body: MessagesBody): string {
  const content = body.messages.filter((m) => m.role === "user").at(-1)?.content ?? "";
  if (typeof content === "string") return content;
  return content.map((block) => (typeof block.text === "string" ? block.text : "")).join("\n");
}

function promptsSeen(mock: MockAnthropic, prompts: string[]): (string | undefined)[] {
  return mock.mainRequests().map((body) => prompts.find((p) => lastUserText(body).includes(p)));
}

async function post(server: ServerProcess, path: string, body: unknown, headers = {}) {
  return fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

/** Queues `text` on the session at `server`: 202 with the waiting run's id. */
async function queue(server: ServerProcess, sessionId: string, text: string): Promise<string> {
  const res = await post(
    server,
    `/v1/sessions/${sessionId}/messages`,
    { text },
    { Prefer: "respond-async, when-busy=queue" },
  );
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

/** Two instances on a new database with the real CLI against a new mock. */
async function cluster(extra: Record<string, string> = {}) {
  const mock = await startMockAnthropic({ quiet: true });
  const ce = await makeClaudeEnv(mock.url);
  cleanups.push(
    () => mock.close(),
    () => ce.cleanup(),
  );
  const env = {
    DATABASE_URL: await clusterDatabase(cleanups),
    ...ce.env,
    AGENT_BRIDGE_WORK_DIR: ce.cwd,
    AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    ...extra,
  };
  const a = await instance(cleanups, env);
  const b = await instance(cleanups, env);
  return { mock, a, b };
}

/** A session made at `server` whose first run is live there (its model request held). */
async function liveSession(mock: MockAnthropic, server: ServerProcess) {
  const held = holdUntilReleased();
  mock.script({ blocks: [{ type: "text", text: "First answer." }], hold: held.hold });
  const session = (await (await post(server, "/v1/sessions", {})).json()) as { id: string };
  const res = await post(
    server,
    `/v1/sessions/${session.id}/messages`,
    { text: "the first message" },
    { Prefer: "respond-async" },
  );
  expect(res.status).toBe(202);
  const live = (await res.json()) as { id: string };
  await held.arrived;
  return { session, live, release: held.release };
}

describe.skipIf(!process.env.TEST_DATABASE_URL)("follow-ups on two instances", () => {
  it("messages queued alternately at two instances run in the order they were stored, whichever instance's run ends first", async () => {
    const { mock, a, b } = await cluster();
    const { session, live, release } = await liveSession(mock, a);
    // The live run is A's: when it ends A looks at its own line first; B's older run goes first.
    const prompts = ["first queued", "second queued", "third queued", "fourth queued"];
    const ids = [
      await queue(b, session.id, "first queued"),
      await queue(a, session.id, "second queued"),
      await queue(b, session.id, "third queued"),
      await queue(a, session.id, "fourth queued"),
    ];
    // Not asking to wait, at either instance: refused.
    for (const server of [a, b]) {
      const busy = await post(server, `/v1/sessions/${session.id}/messages`, { text: "no" });
      expect(busy.status).toBe(409);
    }
    mock.script(...prompts.map((p) => ({ blocks: [{ type: "text" as const, text: `Re: ${p}` }] })));
    release();

    const ends = await completions(b.url, ids.at(-1) as string);
    expect(ends.map((f) => f.data)).toEqual([
      expect.objectContaining({ status: "succeeded", result: "Re: fourth queued" }),
    ]);
    const runs = await Promise.all(
      [live.id, ...ids].map(
        async (id) =>
          (await (await fetch(`${a.url}/v1/runs/${id}`)).json()) as {
            status: string;
            completion: { result: string };
            started_at: string;
            finished_at: string;
          },
      ),
    );
    expect(runs.map((r) => [r.status, r.completion.result])).toEqual([
      ["succeeded", "First answer."],
      ...prompts.map((p) => ["succeeded", `Re: ${p}`]),
    ]);
    for (let i = 1; i < runs.length; i++) {
      const [before, after] = [runs[i - 1], runs[i]] as [(typeof runs)[0], (typeof runs)[0]];
      expect(Date.parse(after.started_at)).toBeGreaterThanOrEqual(Date.parse(before.finished_at));
    }
    expect(promptsSeen(mock, ["the first message", ...prompts])).toEqual([
      "the first message",
      ...prompts,
    ]);
  }, 240_000);

  it("a waiting run whose instance dies is closed interrupted by the other instance, and the run queued behind it there still runs", async () => {
    const { mock, a, b } = await cluster({
      AGENT_BRIDGE_LEASE_SECONDS: "2",
      AGENT_BRIDGE_LEASE_RENEW_SECONDS: "1",
    });
    const { session, live, release } = await liveSession(mock, b);
    const lost = await queue(a, session.id, "queued on the dying instance");
    const kept = await queue(b, session.id, "queued on the living one");

    await a.stop("SIGKILL");
    await b.waitForOutput(/closed the runs of an instance that is gone/, 30_000);
    const closed = await completions(b.url, lost);
    expect(closed.map((f) => f.data)).toEqual([expect.objectContaining({ status: "interrupted" })]);

    mock.script({ blocks: [{ type: "text", text: "Kept." }] });
    release();
    const ends = await completions(b.url, kept);
    expect(ends.map((f) => f.data)).toEqual([
      expect.objectContaining({ status: "succeeded", result: "Kept." }),
    ]);
    expect(await (await fetch(`${b.url}/v1/runs/${live.id}`)).json()).toMatchObject({
      status: "succeeded",
    });
    expect(
      promptsSeen(mock, [
        "the first message",
        "queued on the dying instance",
        "queued on the living one",
      ]),
    ).toEqual(["the first message", "queued on the living one"]);
  }, 240_000);

  it("deleting the session at one instance cancels the runs waiting at both, and none reaches the model", async () => {
    const { mock, a, b } = await cluster();
    const { session, live, release } = await liveSession(mock, a);
    const waiting = [
      await queue(b, session.id, "never at b"),
      await queue(a, session.id, "never at a"),
    ];
    const res = await fetch(`${b.url}/v1/sessions/${session.id}`, { method: "DELETE" });
    expect(res.status).toBe(204);
    release();
    for (const id of [live.id, ...waiting]) {
      expect((await fetch(`${a.url}/v1/runs/${id}`)).status).toBe(404);
    }
    expect(promptsSeen(mock, ["the first message", "never at b", "never at a"])).toEqual([
      "the first message",
    ]);
  }, 240_000);
});
