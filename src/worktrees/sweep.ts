import { type Clock, systemClock, type Timer } from "../clock.js";
import { errorText, type Logger } from "../log.js";
import type { Database } from "../store/db.js";
import { expireSession, idleSessions, sessionById } from "../store/expiry.js";
import { pruneFeed } from "../store/feed.js";
import { hookIds } from "../store/hooks.js";
import type { CheckoutCache } from "./checkout-cache.js";
import type { GitRunner } from "./git.js";
import { discardSessionWorktree } from "./sessions.js";

// The periodic sweep: a session idle for longer than the TTL is expired (it keeps its history
// but takes no more messages) and its worktree and branch are removed. A dirty worktree is kept
// and recorded `kept_dirty`. One sweep at a time; never on a session with an active run. Each
// sweep also removes this instance's checkout caches of hooks that are gone, and prunes the live
// feed's events older than its retention.

/** What the sweep needs of the runs (the run manager is one). */
export interface SessionRuns {
  /**
   * Calls `task` in the session's admission order when the session has no active run, else
   * resolves undefined without calling it.
   */
  whenIdle<T>(sessionId: string, task: () => Promise<T>): Promise<T | undefined>;
}

export interface SweeperOptions {
  db: Database;
  runs: SessionRuns;
  logger: Logger;
  ttlMs: number;
  intervalMs: number;
  /** The server's work dir, for sessions that have none of their own. */
  workDir: string;
  /** Runs git in a session's repository as its tenant. */
  git: GitRunner;
  /** This instance's checkout caches, pruned of deleted hooks' at each sweep. */
  checkouts?: CheckoutCache;
  /** Sessions looked at per sweep; the rest wait for the next one. */
  batchSize?: number;
  /** Times the sweeps and says what is idle for longer than the TTL. */
  clock?: Clock;
  /** How long the live feed keeps its events: each sweep prunes older ones. Unset: kept. */
  feedRetentionMs?: number;
}

export interface SweepReport {
  expired: string[];
  /** Expired sessions whose worktree was kept for its uncommitted changes. */
  keptDirty: string[];
  /** Skipped for now: a run of the session is active. */
  busy: string[];
  /** Left for the next sweep after an error (logged). */
  failed: string[];
  /** Hooks whose checkout cache was removed: they are gone. */
  prunedCaches: string[];
  /** Live feed events pruned for being older than its retention. */
  prunedFeedEvents: number;
}

export class SessionSweeper {
  private timer: Timer | undefined;
  private current: Promise<SweepReport> | undefined;
  private stopped = false;
  private readonly clock: Clock;

  constructor(private readonly opts: SweeperOptions) {
    this.clock = opts.clock ?? systemClock;
  }

  /** Sweeps now, then every interval, until `stop`. */
  start(): void {
    if (this.timer || this.stopped) return;
    const tick = () =>
      this.sweep().catch((err) =>
        this.opts.logger.error("session sweep failed", { error: errorText(err) }),
      );
    this.timer = this.clock.setInterval(tick, this.opts.intervalMs);
    this.timer.unref();
    void tick();
  }

  /** No more sweeps; resolves once the one in progress, if any, has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.clock.clear(this.timer);
    this.timer = undefined;
    await this.current?.catch(() => {});
  }

  /** One sweep; while one is in progress, a call gets that one instead of starting another. */
  sweep(now: Date = new Date(this.clock.now())): Promise<SweepReport> {
    this.current ??= this.sweepOnce(now).finally(() => {
      this.current = undefined;
    });
    return this.current;
  }

  private async sweepOnce(now: Date): Promise<SweepReport> {
    const { db, runs, logger } = this.opts;
    const cutoff = new Date(now.getTime() - this.opts.ttlMs);
    const report: SweepReport = {
      expired: [],
      keptDirty: [],
      busy: [],
      failed: [],
      prunedCaches: await this.pruneCaches(),
      prunedFeedEvents: await this.pruneFeed(now),
    };
    for (const candidate of await idleSessions(db, cutoff, this.opts.batchSize ?? 200)) {
      if (this.stopped) break;
      const id = candidate.id;
      try {
        // In the session's admission order: a message arriving meanwhile waits, then finds the
        // session expired; and a session with a run queued or running is left alone.
        const outcome = await runs.whenIdle(id, () => this.expire(id, cutoff, now));
        if (outcome === undefined) report.busy.push(id);
        else if (outcome !== "skipped") report.expired.push(id);
        if (outcome === "kept_dirty") report.keptDirty.push(id);
      } catch (err) {
        report.failed.push(id);
        logger.error("could not expire a session; the next sweep tries again", {
          session_id: id,
          error: errorText(err),
        });
      }
    }
    if (report.expired.length > 0 || report.failed.length > 0) {
      logger.info("session sweep", {
        expired: report.expired.length,
        kept_dirty: report.keptDirty.length,
        busy: report.busy.length,
        failed: report.failed.length,
      });
    }
    return report;
  }

  /** Prunes the live feed's old events; a failure is logged and left for the next sweep. */
  private async pruneFeed(now: Date): Promise<number> {
    const { db, logger, feedRetentionMs } = this.opts;
    if (feedRetentionMs === undefined) return 0;
    try {
      return await pruneFeed(db, new Date(now.getTime() - feedRetentionMs));
    } catch (err) {
      logger.error("could not prune the live feed", { error: errorText(err) });
      return 0;
    }
  }

  /** Removes the checkout caches of deleted hooks; a failure is logged and left for the next sweep. */
  private async pruneCaches(): Promise<string[]> {
    const { checkouts, db, logger } = this.opts;
    if (!checkouts) return [];
    try {
      const pruned = await checkouts.prune(await hookIds(db));
      if (pruned.length > 0)
        logger.info("removed the checkout caches of deleted hooks", { hooks: pruned });
      return pruned;
    } catch (err) {
      logger.error("could not prune the checkout caches", { error: errorText(err) });
      return [];
    }
  }

  private async expire(
    id: string,
    cutoff: Date,
    now: Date,
  ): Promise<"expired" | "kept_dirty" | "skipped"> {
    const { db, logger } = this.opts;
    // Read again: a message may have come in since the candidates were listed.
    const session = await sessionById(db, id);
    if (!session || session.expiredAt || session.lastActivityAt >= cutoff) return "skipped";
    let outcome: "expired" | "kept_dirty" = "expired";
    if (session.worktree) {
      const git = this.opts.git.forSession(
        session.ownerKeyId,
        session.workDir ?? this.opts.workDir,
      );
      const removed = await discardSessionWorktree(db, git, id, { force: false });
      if (removed.outcome === "kept_dirty") {
        outcome = "kept_dirty";
        logger.warn("kept the worktree of an expired session: it has uncommitted changes", {
          session_id: id,
          path: removed.path,
        });
      } else if (removed.outcome === "removed") {
        logger.info("removed the worktree of an expired session", {
          session_id: id,
          path: removed.path,
        });
      }
    }
    await expireSession(db, id, now);
    return outcome;
  }
}
