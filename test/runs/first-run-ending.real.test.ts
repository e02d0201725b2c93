import { afterAll, describe, expect, it } from "vitest";
import { httpApi } from "../support/app.js";
import { makeClaudeEnv, transcriptHolds } from "../support/claude-env.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import { REAL_CLI_BACKENDS, serverDatabases } from "../support/db.js";
import { holdUntilReleased, startMockAnthropic } from "../support/mock-anthropic.js";
import { startServer } from "../support/server.js";

// A session's first run can end before the bridge has heard from the CLI while the CLI already
// keeps the session; here the server is killed mid-run (as an OOM kill does), so the run is
// closed by the next server with nothing recorded of the CLI's session. The next message must
// work, and continue the conversation when the CLI kept it.

const databases = serverDatabases();
// The databases are dropped last, after the servers have stopped (two after hooks, which run in
// reverse, dropped the database under a running server, whose shutdown then hung).
const cleanups: Cleanups = [() => databases.cleanup()];
afterAll(async () => {
  await undo(cleanups);
});

describe.each(databases.targets.filter(([backend]) => REAL_CLI_BACKENDS.includes(backend)))(
  "a first run whose server was killed, on %s",
  (_name, database) => {
    it("is followed by a message that continues the conversation", async () => {
      const mock = await startMockAnthropic({ quiet: true });
      const ce = await makeClaudeEnv(mock.url);
      cleanups.push(
        () => mock.close(),
        () => ce.cleanup(),
      );
      const env = {
        ...(await database()),
        ...ce.env,
        AGENT_BRIDGE_WORK_DIR: ce.cwd,
        AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
        AGENT_BRIDGE_SHUTDOWN_GRACE_SECONDS: "0",
      };
      const held = holdUntilReleased();
      mock.script({ blocks: [{ type: "text", text: "Never sent." }], hold: held.hold });
      const first = await startServer(env);
      const session = await httpApi(first.url).newSession();
      const started = await httpApi(first.url).postMessage(session.id, "remember the word medlar", {
        Prefer: "respond-async",
      });
      expect(started.status).toBe(202);
      await held.arrived;
      await first.stop("SIGKILL");

      const second = await startServer(env);
      cleanups.push(async () => void (await second.stop()));
      held.release();
      mock.script({ blocks: [{ type: "text", text: "The word was medlar." }] });
      const res = await httpApi(second.url).postMessage(session.id, "which word?", {
        Accept: "application/json",
      });
      expect(await res.json()).toMatchObject({
        text: "The word was medlar.",
        run: { status: "succeeded" },
      });
      if (await transcriptHolds(ce, session.id, "remember the word medlar")) {
        expect(JSON.stringify(mock.mainRequests().at(-1)?.messages)).toContain(
          "remember the word medlar",
        );
      }
    }, 180_000);
  },
);
