import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createClient, type FeedItem } from "../../src/client/index.js";
import { cliWithEnv } from "../cli/run-cli.js";
import { createTestApp, fetchAs, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { byPosition } from "../support/feed.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";
import { type Frame, SseReader } from "../support/sse.js";

// The live feed of real runs: the real `claude` binary against the mock Messages API, a run that
// asks for a permission (`approvals: api`) and is answered, another tenant's run beside it. What
// each key's feed shows, in what order, what a resume gets, and the client's iterator and the
// CLI's `watch` reading it.

const data = (frame: Frame | undefined) => frame?.data as Record<string, unknown>;

describe.each(REAL_CLI_BACKENDS)("the live feed of real runs on %s", (backend) => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let alice: string;
  let aliceId: string;
  let bob: string;
  let admin: string;

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    t = await createTestApp(backend, {
      ...ce.env,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "default",
    });
    await t.deps.doorbell.start();
    server = await listen(t.app);
    const issued = await issueKey(t.database.db, { name: "alice", admin: false });
    alice = issued.key;
    aliceId = issued.row.id;
    bob = (await issueKey(t.database.db, { name: "bob", admin: false })).key;
    admin = (await issueKey(t.database.db, { name: "admin", admin: true })).key;
  });
  afterAll(async () => {
    await server.close();
    t.deps.doorbell.stop();
    await t.close();
    await mock.close();
    await ce.cleanup();
  });

  const post = (key: string, path: string, body: unknown) =>
    fetchAs(server.url, key, path, { method: "POST", body: JSON.stringify(body) });
  const feed = async (key: string, query = "", headers: Record<string, string> = {}) => {
    const res = await fetchAs(server.url, key, `/v1/events${query}`, { headers });
    expect(res.status).toBe(200);
    return SseReader.of(res);
  };

  it("shows a key its own runs as they go (queued, started, a permission asked and answered, finished with cost), an admin every key's; a resume gets exactly what came after; the client and `watch` read it", async () => {
    const mine = await feed(alice);
    // The `id:` line alone: where the stream starts.
    const start = (await mine.next())?.id ?? "";
    // An iterator connects at its first `next`: from where Alice's stream started.
    const everyone = createClient({ baseUrl: server.url, key: admin }).watch({ after: start });

    // Alice's run asks to write a file, and is allowed.
    mock.script(
      {
        blocks: [
          {
            type: "tool_use",
            name: "Write",
            input: { file_path: join(ce.cwd, "feed.txt"), content: "x" },
          },
        ],
      },
      { blocks: [{ type: "text", text: "Written." }] },
    );
    const session = (await (await post(alice, "/v1/sessions", { approvals: "api" })).json()) as {
      id: string;
    };
    const sent = await post(alice, `/v1/sessions/${session.id}/messages`, { text: "write it" });
    const runId = sent.headers.get("x-run-id") ?? "";
    const run = SseReader.of(sent);
    const asked = data((await run.until("permission_request")).at(-1));
    const requestId = String(asked.request_id);
    expect(
      (await post(alice, `/v1/runs/${runId}/permissions/${requestId}`, { decision: "allow" }))
        .status,
    ).toBe(200);
    await run.until("completion");

    // Bob's run, after Alice's (the mock answers in order).
    mock.script({ blocks: [{ type: "text", text: "Hi." }] });
    const bobs = (await (await post(bob, "/v1/sessions", {})).json()) as { id: string };
    const bobRun = await post(bob, `/v1/sessions/${bobs.id}/messages`, { text: "hi" });
    await SseReader.of(bobRun).until("completion");
    await fetchAs(server.url, alice, `/v1/sessions/${session.id}`, { method: "DELETE" });

    const frames = await mine.events(7);
    expect(frames.map((f) => f.event)).toEqual([
      "session_created",
      "run_queued",
      "run_started",
      "permission_requested",
      "permission_resolved",
      "run_finished",
      "session_deleted",
    ]);
    const ids = frames.map((f) => f.id ?? "");
    expect([...ids].sort(byPosition)).toEqual(ids);
    for (const frame of frames) {
      expect(data(frame)).toMatchObject({ session_id: session.id, key_id: aliceId });
    }
    expect(data(frames[1])).toMatchObject({
      run_id: runId,
      status: "queued",
      trigger: "message",
      agent: "claude",
    });
    expect(data(frames[3])).toMatchObject({
      run_id: runId,
      request_id: requestId,
      tool_name: "Write",
      expires_at: expect.any(String),
    });
    expect(data(frames[4])).toMatchObject({
      request_id: requestId,
      state: "allowed",
      by: "client",
    });
    expect(data(frames[5])).toMatchObject({
      run_id: runId,
      status: "succeeded",
      cost_usd: expect.any(Number),
      duration_ms: expect.any(Number),
    });
    expect(data(frames[5])).not.toHaveProperty("error_code");
    await mine.cancel();

    // The admin's iterator saw Bob's run too, between Alice's finish and her session's deletion.
    const seen: FeedItem[] = [];
    for await (const item of everyone) {
      seen.push(item);
      if (item.type === "session_deleted") break;
    }
    const sessionOf = (i: FeedItem) => ("session_id" in i ? i.session_id : undefined);
    expect(seen.map((i) => `${i.type} ${sessionOf(i) === session.id ? "alice" : "bob"}`)).toEqual([
      "session_created alice",
      "run_queued alice",
      "run_started alice",
      "permission_requested alice",
      "permission_resolved alice",
      "run_finished alice",
      "session_created bob",
      "run_queued bob",
      "run_started bob",
      "run_finished bob",
      "session_deleted alice",
    ]);
    const adminIds = seen.map((i) => i.id);
    expect([...adminIds].sort(byPosition)).toEqual(adminIds);
    // The same events, under the same ids, as Alice's stream.
    expect(seen.filter((i) => sessionOf(i) === session.id).map((i) => i.id)).toEqual(ids);

    // Resumed after `run_started`: exactly the four after it, once.
    const resumed = await feed(alice, "?follow=false", { "Last-Event-ID": ids[2] ?? "" });
    expect((await resumed.events()).map((f) => f.id)).toEqual(frames.slice(3).map((f) => f.id));

    // The client's iterator resumes the same way, and `watch` prints a line per event.
    const after = createClient({ baseUrl: server.url, key: alice }).watch({
      after: ids[4] ?? "",
      types: ["run_finished", "session_deleted"],
    });
    const next = await after.next();
    expect(next.value).toMatchObject({ id: ids[5], type: "run_finished", run_id: runId });
    await after.return(undefined);
    const watched = await cliWithEnv(["watch", "--after", ids[3] ?? "", "--count", "2"], {
      AGENT_BRIDGE_URL: server.url,
      AGENT_BRIDGE_KEY: alice,
    });
    expect(watched.code).toBe(0);
    const lines = watched.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      new RegExp(
        `^\\S+Z  permission_resolved  session=${session.id}  run=${runId}  request=${requestId}  state=allowed  by=client$`,
      ),
    );
    expect(lines[1]).toMatch(
      new RegExp(
        `^\\S+Z  run_finished  session=${session.id}  run=${runId}  status=succeeded  cost=\\$\\d+\\.\\d{4}  duration=\\d+\\.\\ds$`,
      ),
    );
  });
});
