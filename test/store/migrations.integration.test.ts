import { randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { runs, sessions } from "../../src/store/schema.js";
import { BACKENDS } from "../support/db.js";
import { migrate, rawDatabase } from "../support/raw-db.js";

// What a migration does to the rows it finds (the schema itself is checked by every other test).

describe.each(BACKENDS)("migrations on %s", (backend) => {
  it("0015 gives each run its session's agent, which runs of codex sessions were written without", async () => {
    const raw = await rawDatabase(backend);
    try {
      await migrate(raw, (f) => f < "0015");
      const [codex, claude] = [randomUUID(), randomUUID()];
      const [codexRun, claudeRun] = [randomUUID(), randomUUID()];
      await raw.exec(
        `insert into sessions (id, agent, permission_mode, effort, worktree, created_at, updated_at, last_activity_at)
           values ('${codex}', 'codex', 'acceptEdits', 'high', false, now(), now(), now()),
                  ('${claude}', 'claude', 'acceptEdits', 'high', false, now(), now(), now());
         insert into runs (id, session_id, status, trigger, prompt, created_at)
           values ('${codexRun}', '${codex}', 'succeeded', 'message', 'hi', now()),
                  ('${claudeRun}', '${claude}', 'succeeded', 'message', 'hi', now())`,
      );
      await migrate(raw, (f) => f >= "0015");
      const agentOf = async (id: string) =>
        (await raw.db.select({ agent: runs.agent }).from(runs).where(eq(runs.id, id)))[0]?.agent;
      expect(await agentOf(codexRun)).toBe("codex");
      expect(await agentOf(claudeRun)).toBe("claude");
    } finally {
      await raw.close();
    }
  });

  it("0025 keeps costs as exact decimals: a total that doubles added up with noise loses it", async () => {
    const raw = await rawDatabase(backend);
    try {
      await migrate(raw, (f) => f < "0025");
      const session = randomUUID();
      await raw.exec(
        `insert into sessions (id, agent, permission_mode, effort, worktree, created_at, updated_at, last_activity_at, cost_usd)
           values ('${session}', 'claude', 'acceptEdits', 'high', false, now(), now(), now(), 0.03959239999999999)`,
      );
      await migrate(raw, (f) => f >= "0025");
      const [row] = await raw.db
        .select({ cost: sessions.costUsd })
        .from(sessions)
        .where(eq(sessions.id, session));
      expect(row?.cost).toBe(0.0395924);
    } finally {
      await raw.close();
    }
  });
});
