import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { createTestApp, requestAs, type TestApp } from "../support/app.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { heldReply } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";

// A message's session is read once on its way to a run: the route reads what the admission needs
// (the session's row, its key's row, its active and waiting runs), and a run that starts within
// its admission runs on that and on its key's allowance. On the embedded database each statement
// holds the server's thread, and a short run's first text waited for each read. A run that queued
// reads the session and its key again when its turn comes (a PATCH or the key's spend since count:
// budget.test.ts).

/**
 * The statements the embedded database is asked, outside transactions, by text, until `stop`
 * (the database goes back to the tests' pool).
 */
function recordStatements(db: TestApp["database"]["db"]): { texts: string[]; stop(): void } {
  const client = (db as unknown as { $client: PGlite }).$client;
  const texts: string[] = [];
  const query = client.query.bind(client) as (text: string, ...rest: unknown[]) => unknown;
  client.query = ((text: string, ...rest: unknown[]) => {
    texts.push(text);
    return query(text, ...rest);
  }) as PGlite["query"];
  return { texts, stop: () => Reflect.deleteProperty(client, "query") };
}

/** The gate's own read of a key, by its id (with the count of keys not revoked, or alone). */
const isGateRead = (text: string) =>
  /from \(select count\(\*\) as "n" from "api_keys"|^select "id", "name", .* from "api_keys" where "api_keys"\."id" = \$1$/s.test(
    text,
  );
/** The read of what admitting a message to a session depends on (admissionState). */
const isAdmissionRead = (text: string) =>
  /^select "sessions"\."id", .* left join "api_keys" on "api_keys"\."id" = "sessions"\."owner_key_id"/s.test(
    text,
  );
/** A read of one session's row by its id (a run's as it starts after a queue). */
const isSessionRead = (text: string) =>
  /^select "id", "owner_key_id", .* from "sessions" where \(?"sessions"\."id" = \$1/s.test(text);

describe("the reads a run starts on, on pglite", () => {
  let t: TestApp;
  let fake: FakeCli;
  let dir: string;
  let statements: string[];
  let stopRecording: () => void;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "agent-bridge-start-reads-"));
    fake = await fakeCli(heldReply(join(dir, "go"), ["done"]), "claude");
    t = await createTestApp("pglite", {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_MAX_CONCURRENT_RUNS: "1",
    });
    ({ texts: statements, stop: stopRecording } = recordStatements(t.database.db));
  });
  afterAll(async () => {
    stopRecording();
    await t.close();
    await fake.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads its session and its key once when it starts at once, and again when its turn comes after a queue", async () => {
    const { key } = await issueKey(t.database.db, { name: "reader", admin: false });
    const as = (path: string, init: RequestInit = {}) => requestAs(t.app, key, path, init);
    const post = async (sessionId: string) => {
      const res = await as(`/v1/sessions/${sessionId}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Prefer: "respond-async" },
        body: JSON.stringify({ text: "read" }),
      });
      expect(res.status).toBe(202);
      return (await res.json()).id as string;
    };
    const [first, second] = await Promise.all(
      [1, 2].map(async () => (await (await as("/v1/sessions", { method: "POST" })).json()).id),
    );
    const count = (from: number) => ({
      admission: statements.slice(from).filter(isAdmissionRead).length,
      gate: statements.slice(from).filter(isGateRead).length,
      session: statements.slice(from).filter(isSessionRead).length,
    });

    const atOnce = statements.length;
    const running = await post(first);
    await fake.waitForMark("working");
    // The route's read, which the admission and its gate take as it is.
    expect(count(atOnce)).toEqual({ admission: 1, gate: 0, session: 0 });

    const queuedAt = statements.length;
    const queued = await post(second);
    expect((await (await as(`/v1/runs/${queued}`)).json()).status).toBe("queued");
    const ending = SseReader.of(await as(`/v1/runs/${queued}/events`)).until("completion");
    // As above.
    expect(count(queuedAt)).toEqual({ admission: 1, gate: 0, session: 0 });
    const turnAt = statements.length;
    writeFileSync(join(dir, "go"), "");
    await ending;
    // The queued run read both again as its turn came.
    expect(count(turnAt)).toEqual({ admission: 0, gate: 1, session: 1 });
    expect((await (await as(`/v1/runs/${running}`)).json()).status).toBe("succeeded");
    expect((await (await as(`/v1/runs/${queued}`)).json()).status).toBe("succeeded");
  });
});
