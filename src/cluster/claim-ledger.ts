import { randomUUID } from "node:crypto";
import type { Logger } from "../log.js";
import type { QueueClaims } from "../runs/cluster-port.js";
import { ShuttingDownError } from "../runs/errors.js";
import type { Database } from "../store/db.js";
import { type Claim, releaseClaims, ringForWork } from "../store/run-claims.js";

// Every claim this instance makes of a run queued in the database (to run it, to cancel it, to
// close it when its host is gone) goes through the ledger. Each claim writes a new token on the
// runs it takes. A claim that fails may still have made runs this instance's: its answer lost
// after the database committed it, or its run neither started nor given back with the database
// away past the outage bound. Such runs, still queued here, would stay this instance's for good:
// the ledger keeps the failed claim's token and gives them back by it. A token is kept only once
// its claim has failed, so that no claim in progress is given back under it.

/**
 * How long a failed claim's token is kept while its give-back finds no run: a statement whose
 * connection was lost may still be running in its backend (Postgres notices a client that is
 * gone only when it next writes to it) and commit later.
 */
const KEEP_UNFOUND_MS = 10 * 60_000;

export class ClaimLedger implements QueueClaims {
  /** The failed claims' tokens, and when each failed. */
  private readonly failed = new Map<string, number>();
  /** The claims in progress, settled (never rejecting): `close` waits for them. */
  private readonly inProgress = new Set<Promise<void>>();
  private closing = false;

  constructor(
    private readonly opts: {
      db: Database;
      logger: Logger;
      instanceId: () => string;
      /** Whether a given-back run is rung for, for the other instances to claim at once. */
      rings: boolean;
    },
  ) {}

  /** Runs `task` with a new claim; if it fails, its token is kept to give back. */
  claim<T>(task: (claim: Claim) => Promise<T>): Promise<T> {
    if (this.closing) return Promise.reject(new ShuttingDownError());
    const claim = { instanceId: this.opts.instanceId(), token: randomUUID() };
    const work = task(claim).catch((err) => {
      this.failed.set(claim.token, Date.now());
      throw err;
    });
    const settled = work.then(
      () => {},
      () => {},
    );
    this.inProgress.add(settled);
    void settled.then(() => this.inProgress.delete(settled));
    return work;
  }

  /** Whether `token` is a failed claim's, whose runs this instance does not hold. */
  hasFailed(token: string | null): token is string {
    return token !== null && this.failed.has(token);
  }

  /** Resolves once the claims in progress now are over. */
  async settled(): Promise<void> {
    await Promise.all(this.inProgress);
  }

  /** No claim starts from now on; resolves once those in progress are over. */
  close(): Promise<void> {
    this.closing = true;
    return this.settled();
  }

  get closed(): boolean {
    return this.closing;
  }

  /** Gives back the runs of the failed claims still queued here. */
  async giveBackFailed(): Promise<void> {
    if (this.failed.size === 0) return;
    const tokens = [...this.failed.keys()];
    const found = await this.giveBack(tokens);
    const now = Date.now();
    for (const token of tokens) {
      const failedAt = this.failed.get(token) ?? now;
      if (found.has(token) || now - failedAt > KEEP_UNFOUND_MS) this.failed.delete(token);
    }
  }

  /**
   * Gives back the runs of these claims still queued here, and rings for other instances; the
   * tokens of the claims that had runs to give back.
   */
  async giveBack(tokens: string[]): Promise<Set<string | null>> {
    const { db, instanceId, logger } = this.opts;
    const released = await releaseClaims(db, instanceId(), tokens);
    for (const { id } of released) logger.info("gave a claimed run back", { run_id: id });
    if (this.opts.rings) {
      for (const host of new Set(released.map((r) => r.pinnedHost))) await ringForWork(db, host);
    }
    return new Set(released.map((r) => r.claimToken));
  }
}
