import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../src/log.js";
import { sessionById } from "../../src/store/expiry.js";
import { insertHook } from "../../src/store/hooks.js";
import { createSession } from "../../src/store/sessions.js";
import { CheckoutCache } from "../../src/worktrees/checkout-cache.js";
import { GitRunner } from "../../src/worktrees/git.js";
import { SessionSweeper } from "../../src/worktrees/sweep.js";
import { BACKENDS, openTestDatabase } from "../support/db.js";
import { hookInput } from "../support/hook-input.js";
import { ManualClock } from "../support/manual-clock.js";

// The session sweep on a manual clock: it sweeps at each interval, and a session is idle past the
// TTL by the sweep's clock, not a moment before.

describe.each(BACKENDS)("the session sweep on %s", (backend) => {
  it("expires a session at the first sweep after it has been idle past the TTL, and not before", async () => {
    const database = await openTestDatabase(backend);
    const { db } = database;
    try {
      const session = await createSession(db, {
        ownerKeyId: null,
        workDir: null,
        title: null,
        agent: "claude",
        permissionMode: "acceptEdits",
        model: null,
        effort: "high",
        systemPrompt: null,
        worktree: false,
        metadata: {},
      });
      const idleSince = session.lastActivityAt.getTime();
      const clock = new ManualClock(idleSince);
      const sweeper = new SessionSweeper({
        db,
        runs: { whenIdle: (_id, task) => task() },
        logger: silentLogger,
        ttlMs: 60_000,
        intervalMs: 10_000,
        workDir: "/nonexistent",
        git: new GitRunner({ env: {} }),
        clock,
      });
      sweeper.start();
      const expiredAt = async () => (await sessionById(db, session.id))?.expiredAt ?? null;
      // Sweeps at 10 s, 20 s, ... 60 s: at 60 s it is idle for the TTL exactly, not past it.
      await clock.advance(60_000);
      expect(await expiredAt()).toBeNull();
      await clock.advance(10_000);
      expect(await expiredAt()).toEqual(new Date(idleSince + 70_000));
      await sweeper.stop();
      expect(clock.pending).toBe(0);
    } finally {
      await database.destroy();
    }
  });

  it("removes the checkout caches of hooks that are gone, and keeps a live hook's", async () => {
    const database = await openTestDatabase(backend);
    const dir = await mkdtemp(join(tmpdir(), "checkouts-"));
    try {
      const hook = await insertHook(database.db, hookInput());
      const gone = randomUUID();
      for (const id of [hook.id, gone])
        await mkdir(join(dir, `${id}.git`, "objects"), { recursive: true });
      await mkdir(join(dir, "home"));
      const sweeper = new SessionSweeper({
        db: database.db,
        runs: { whenIdle: (_id, task) => task() },
        logger: silentLogger,
        ttlMs: 60_000,
        intervalMs: 10_000,
        workDir: "/nonexistent",
        git: new GitRunner({ env: {} }),
        checkouts: new CheckoutCache({ dir, searchPath: "", localRoots: [] }),
      });
      expect((await sweeper.sweep()).prunedCaches).toEqual([gone]);
      expect((await readdir(dir)).sort()).toEqual([`${hook.id}.git`, "home"].sort());
    } finally {
      await rm(dir, { recursive: true, force: true });
      await database.destroy();
    }
  });
});
