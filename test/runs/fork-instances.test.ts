import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { type ClaudeEnv, makeClaudeEnv, transcriptHolds } from "../support/claude-env.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import { clusterDatabase, instance } from "../support/instances.js";
import { type MessagesBody, startMockAnthropic } from "../support/mock-anthropic.js";
import type { ServerProcess } from "../support/server.js";

// A fork made and run on another instance than the one its session ran on, two server processes
// on one Postgres, each with a HOME of its own, with the real `claude` binary against the mock
// Messages API: the fork's transcript is a copy the database holds, so the instance that never
// ran the session resumes it all the same.

const cleanups: Cleanups = [];
afterAll(async () => {
  await undo(cleanups);
});

/** What the model was sent, as one string. */
const sent = (body: MessagesBody | undefined) => JSON.stringify(body?.messages ?? []);

async function post(server: ServerProcess, path: string, body: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body),
  });
  expect(res.status).toBeLessThan(300);
  return res.json();
}

/** The CLI's transcript of `sessionId` in `env`'s HOME, byte for byte. */
async function transcriptOf(env: ClaudeEnv, sessionId: string) {
  const projects = join(env.home, ".claude", "projects");
  for (const dir of await readdir(projects)) {
    const bytes = await readFile(join(projects, dir, `${sessionId}.jsonl`)).catch(() => undefined);
    if (bytes) return bytes;
  }
  throw new Error(`no transcript of ${sessionId} in ${projects}`);
}

interface Finished {
  run: { id: string; status: string; usage: { duration_api_ms: number } };
  completion: { agent_session_id: string; usage: { duration_api_ms: number } };
  text: string;
}

describe.skipIf(!process.env.TEST_DATABASE_URL)("a fork across instances on Postgres", () => {
  it("a session that ran on A, forked on B: the fork's first run on B resumes the copy up to the run it branched after, and reports its own API time", async () => {
    const mock = await startMockAnthropic({ quiet: true });
    const [onA, onB] = [await makeClaudeEnv(mock.url), await makeClaudeEnv(mock.url)];
    cleanups.push(
      () => mock.close(),
      () => onA.cleanup(),
      () => onB.cleanup(),
    );
    const database = await clusterDatabase(cleanups);
    // One work dir for both, as instances behind one proxy are configured alike.
    const settings = {
      DATABASE_URL: database,
      AGENT_BRIDGE_WORK_DIR: onA.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    };
    const a = await instance(cleanups, { ...onA.env, ...settings });
    const b = await instance(cleanups, { ...onB.env, ...settings });

    const session = (await post(a, "/v1/sessions", {})) as { id: string };
    const say = async (server: ServerProcess, id: string, text: string) =>
      (await post(server, `/v1/sessions/${id}/messages`, { text })) as Finished;
    mock.script({ blocks: [{ type: "text", text: "Noted: apricot." }] });
    const apricot = await say(a, session.id, "remember apricot");
    // The second answer slow (each SSE event 100 ms apart): over a second of API time.
    mock.script({ blocks: [{ type: "text", text: "Noted: banana." }], delayMs: 100 });
    const banana = await say(a, session.id, "now remember banana");
    expect([apricot.run.status, banana.run.status]).toEqual(["succeeded", "succeeded"]);
    const slow = banana.run.usage.duration_api_ms;
    expect(slow).toBeGreaterThanOrEqual(1000);
    expect(await transcriptHolds(onB, session.id, "remember apricot")).toBe(false);

    const fork = (await post(b, `/v1/sessions/${session.id}/fork`, {
      at_run: apricot.run.id,
    })) as { id: string; forked_from: unknown };
    expect(fork.forked_from).toEqual({ session_id: session.id, run_id: apricot.run.id });
    mock.script({ blocks: [{ type: "text", text: "Apricot." }] });
    const first = await say(b, fork.id, "which fruit, again?");
    expect(first).toMatchObject({
      text: "Apricot.",
      run: { status: "succeeded" },
      completion: { agent_session_id: fork.id },
    });
    const seen = sent(mock.mainRequests().at(-1));
    expect(seen).toContain("remember apricot");
    expect(seen).toContain("Noted: apricot.");
    expect(seen).not.toContain("banana");
    // B's CLI wrote the fork's transcript in B's HOME; the session's own came from the database,
    // the pieces A's runs stored joined, byte for byte. What A's CLI appended after its outcome
    // (its last prompt) is stored once it has exited, after the completion: a fork made
    // meanwhile goes without it, as CI once saw.
    expect(await transcriptHolds(onB, fork.id, "which fruit, again?")).toBe(true);
    const [original, copy] = [
      await transcriptOf(onA, session.id),
      await transcriptOf(onB, session.id),
    ];
    expect(original.subarray(0, copy.length)).toEqual(copy);
    expect(copy.toString()).toContain("Noted: banana.");
    expect(original.subarray(copy.length).toString()).not.toContain('"type":"assistant"');
    const sql = postgres(database, { max: 1, onnotice: () => {} });
    cleanups.push(() => sql.end());
    // The original's copy, which the fork's was made from (the fork has stored its own since).
    const [stored] =
      await sql`select count(*)::int as pieces from agent_transcript_pieces where session_id = ${session.id}`;
    expect(stored?.pieces).toBeGreaterThan(1);

    // The CLI's running total in the fork goes on from the session's (both its runs'): the fork's
    // first run reports its own time, less than the slow run's however slow the machine is.
    expect(first.completion.usage.duration_api_ms).toBeGreaterThan(0);
    expect(first.completion.usage.duration_api_ms).toBeLessThan(slow);
    expect(first.run.usage.duration_api_ms).toBe(first.completion.usage.duration_api_ms);

    // The fork's next run, back on A, goes on with the fork's own conversation.
    mock.script({ blocks: [{ type: "text", text: "Nothing." }] });
    const next = await say(a, fork.id, "and before that?");
    const later = sent(mock.mainRequests().at(-1));
    expect(later).toContain("which fruit, again?");
    expect(later).toContain("Noted: apricot.");
    expect(later).not.toContain("banana");
    expect(next.completion.usage.duration_api_ms).toBeLessThan(slow);
  }, 240_000);
});
