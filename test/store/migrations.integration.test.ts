import { createHash, randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { claudeTranscripts } from "../../src/agents/claude/transcripts.js";
import { silentLogger } from "../../src/log.js";
import { agentFiles } from "../../src/process/agent-files.js";
import { restoreTranscript, saveTranscript, storedTranscript } from "../../src/runs/transcripts.js";
import { agentTranscriptPieces, runs, sessions } from "../../src/store/schema.js";
import { transcriptHead } from "../../src/store/transcripts.js";
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

  it("0033 makes a transcript stored whole its first piece, its length from the gzip trailer: restored byte for byte, then stored whole once and appended to after", async () => {
    const raw = await rawDatabase(backend);
    const dir = await mkdtemp(join(tmpdir(), "migrated-transcript-"));
    try {
      await migrate(raw, (f) => f < "0033");
      const session = randomUUID();
      const relative = join("projects", "-work", `${session}.jsonl`);
      // Long enough that three of its length's bytes count (0x012345).
      const before = Buffer.from(`{"turn":1,"text":"déjà vu ${"x".repeat(74_534)}"}\n`);
      expect(before.length).toBe(0x012345);
      await raw.exec(
        `insert into sessions (id, agent, permission_mode, effort, worktree, created_at, updated_at, last_activity_at)
           values ('${session}', 'claude', 'acceptEdits', 'high', false, now(), now(), now());
         insert into agent_transcripts (session_id, path, sha256, gzipped, updated_at)
           values ('${session}', '${relative}', '${createHash("sha256").update(before).digest("hex")}',
                   '\\x${gzipSync(before).toString("hex")}', now())`,
      );
      await migrate(raw, (f) => f >= "0033");
      expect(await transcriptHead(raw.db, session)).toMatchObject({
        length: before.length,
        seam: null,
      });

      const path = process.env.PATH ?? "/usr/bin:/bin";
      const location = claudeTranscripts(
        { CLAUDE_CONFIG_DIR: dir, PATH: path },
        agentFiles({ PATH: path }),
      );
      const file = join(dir, relative);
      await restoreTranscript(raw.db, session, location, silentLogger);
      expect(await readFile(file)).toEqual(before);

      const after = Buffer.concat([before, Buffer.from('{"turn":2}\n')]);
      await writeFile(file, after);
      await saveTranscript(raw.db, session, session, location);
      expect(await transcriptHead(raw.db, session)).toMatchObject({ length: after.length });
      expect((await transcriptHead(raw.db, session))?.seam).toEqual(expect.any(String));
      await writeFile(file, '{"turn":3}\n', { flag: "a" });
      await saveTranscript(raw.db, session, session, location);
      expect(await storedTranscript(raw.db, session)).toEqual(await readFile(file));
      const pieces = await raw.db
        .select({ seq: agentTranscriptPieces.seq })
        .from(agentTranscriptPieces)
        .where(eq(agentTranscriptPieces.sessionId, session));
      expect(pieces).toHaveLength(2);
    } finally {
      await raw.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
