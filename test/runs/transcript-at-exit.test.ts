import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { storedTranscript } from "../../src/runs/transcripts.js";
import { createTestApp, requestAs, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { SESSION_ID } from "../support/stream-json-lines.js";

// The CLI writes a session's transcript as it goes, and flushes what is left once stdin closes
// after its result, as it exits. A run's first store looks while the CLI may still be running; a
// session's first run whose CLI had written nothing yet is stored by the run's later store, once
// the CLI is gone. What the real CLI cannot be made to do on demand: write its transcript only
// after the run's completion has gone out (the test says when, by a file).

describe.each(BACKENDS)(
  "a first run whose CLI writes its transcript only as it exits, on %s",
  (backend) => {
    let t: TestApp;
    let fake: FakeCli;
    let dir: string;
    /** The transcript's place in the CLI's HOME, and each run's line of it. */
    let transcript: string;
    const line = (n: number) => `${JSON.stringify({ type: "user", turn: n })}\n`;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "agent-bridge-transcript-at-exit-"));
      const home = join(dir, "home");
      transcript = join(home, ".claude", "projects", "-tmp-work", `${SESSION_ID}.jsonl`);
      fake = await fakeCli({ steps: [] });
      t = await createTestApp(backend, { ...fake.bridgeEnv, HOME: home });
    });
    afterAll(async () => {
      await t.close();
      await fake.cleanup();
      rmSync(dir, { recursive: true, force: true });
    });

    /** Runs message `n`: its CLI answers, then, once the test has read the answer, writes its line. */
    async function send(sessionId: string, n: number) {
      const go = join(dir, `go-${n}`);
      await fake.setScenario({
        steps: [
          { init: true },
          { reply: { parts: [`answer ${n}`] } },
          { succeed: {} },
          { waitFile: go },
          { appendFile: { path: transcript, text: line(n) } },
        ],
      });
      const res = await requestAs(t.app, undefined, `/v1/sessions/${sessionId}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify({ text: `message ${n}` }),
      });
      const answer = (await res.json()) as { run: { id: string; status: string } };
      expect(answer.run.status).toBe("succeeded");
      // The completion is out, the run's first store done: only now does the CLI write its line.
      expect(existsSync(transcript) ? readFileSync(transcript, "utf8") : "").not.toContain(line(n));
      writeFileSync(go, "");
      // Refused once all of the run is over, its later store included.
      const cancel = await requestAs(t.app, undefined, `/v1/runs/${answer.run.id}/cancel`, {
        method: "POST",
      });
      expect(cancel.status).toBe(409);
    }

    it("is stored whole once the CLI is gone, and a later run's lines are appended to it", async () => {
      const res = await requestAs(t.app, undefined, "/v1/sessions", { method: "POST" });
      const session = (await res.json()) as { id: string };

      await send(session.id, 1);
      expect((await storedTranscript(t.database.db, session.id))?.toString()).toBe(line(1));

      // The next run resumes it where this instance's copy is gone, as on another instance.
      rmSync(transcript);
      await send(session.id, 2);
      expect(readFileSync(transcript, "utf8")).toBe(line(1) + line(2));
      expect((await storedTranscript(t.database.db, session.id))?.toString()).toBe(
        line(1) + line(2),
      );
    });
  },
);
