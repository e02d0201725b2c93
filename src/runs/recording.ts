import { bareCompletion, type CompletionEvent, type SessionUsage } from "../events.js";
import type { Logger } from "../log.js";
import { exactCost } from "../money.js";
import { type Database, executePrepared, inTwoRoundTrips, type Statement } from "../store/db.js";
import { describeDbError, foreignKeyViolation, transientDbError } from "../store/errors.js";
import { eventsAppended, type SequencedEvent, sequenced } from "../store/events.js";
import { feedEntriesAppended, runFinished } from "../store/feed.js";
import { DatabaseOutageError, withDbRetries } from "../store/retry.js";
import {
  type AdmissionBounds,
  type Admitted,
  admitRun,
  admitRunLocked,
  lockAdmission,
  type NewRun,
  waitingRunsRung,
} from "../store/run-admission.js";
import {
  closedRun,
  finishRun,
  RunAlreadyClosedError,
  type RunOutcome,
  runClosed,
} from "../store/run-lifecycle.js";
import type { RunRow } from "../store/schema.js";
import { KeyRunLimitError, QueueFullError } from "./errors.js";
import type { Message } from "./message.js";
import type { CompletionPosition } from "./run-log.js";

// Recording a run's end: its outcome on the run row, its usage added to its session, and its
// completion as the log's last event, in one transaction. Every run gets a completion whatever
// the database does: the recorder retries through an outage (up to the bound), records a failure
// in place of an outcome the database refuses, and when even that cannot be stored, keeps trying
// in the background until it is stored (the run's subscribers wait for the stored one).
// What else must happen with a run's rows, or not at all, joins their transactions as a hook.

/**
 * Work done in a run's own transactions, so that it happens with them or not at all: when the
 * run's row is written, and when its end is recorded. The callback outbox is one (src/hooks/).
 */
export interface RunTransactionHook {
  /** Whether the hook has a part in the run of this message (decided before it is written). */
  joins(message: Message): boolean;
  /** In the transaction that writes the row of a run the hook joins. */
  inserted(tx: Database, run: RunRow, message: Message): Promise<void>;
  /** In the transaction that records the end of a run the hook joined (or may have: recovery). */
  completed(tx: Database, run: RunRow): Promise<void>;
}

/** The most runs one API key may have open at once, on all instances together. */
export interface KeyRunLimit {
  keyId: string;
  max: number;
  /**
   * Whether other transactions may count the key's runs at once (on Postgres): its count is then
   * made under a lock. The embedded database runs one statement at a time, and the count is made
   * in the statement that writes the run.
   */
  concurrent: boolean;
  /** What a refused client is told to wait. */
  retryAfterSeconds: () => number;
}

/** The bound on queued runs that no instance owns yet, over all instances. */
export interface UnownedRunLimit {
  /** Per live instance (AGENT_BRIDGE_MAX_QUEUED_RUNS): the bound is this times their number. */
  perInstance: number;
  /** Whether instances hear of the run by NOTIFY (else they look at their lease tick or poll). */
  ring: boolean;
  retryAfterSeconds: () => number;
}

/**
 * Writes a run's row and its feed entry, with the part of each hook that joins it in the same
 * transaction; refuses it with KeyRunLimitError when its key has `limit.max` runs open. With
 * `unowned`, the row is a queued run for any instance to claim, refused with QueueFullError when
 * the database holds as many as its bound already.
 */
export async function recordRun(
  db: Database,
  run: NewRun,
  message: Message,
  hooks: readonly RunTransactionHook[],
  limit: KeyRunLimit | null,
  unowned: UnownedRunLimit | null = null,
): Promise<RunRow> {
  const bounds: AdmissionBounds = {
    ...(limit ? { key: { id: limit.keyId, max: limit.max } } : {}),
    ...(unowned ? { unowned: { perInstance: unowned.perInstance, ring: unowned.ring } } : {}),
  };
  const locked = Boolean(limit?.concurrent) || unowned !== null;
  const accepted = (admitted: Admitted): RunRow => {
    if ("run" in admitted) return admitted.run;
    const { refused, max } = admitted;
    if (refused === "key" && limit) throw new KeyRunLimitError(max, limit.retryAfterSeconds());
    if (refused === "unowned" && unowned) {
      throw new QueueFullError(max, unowned.retryAfterSeconds());
    }
    throw new Error(`a run refused by a bound it was not given: ${refused}`);
  };
  if (hooks.length === 0) {
    // Alone, the statement is a transaction of its own.
    return accepted(await (locked ? admitRunLocked : admitRun)(db, run, bounds));
  }
  return db.transaction(async (tx) => {
    if (locked) await lockAdmission(tx, bounds);
    const row = accepted(await admitRun(tx, run, bounds));
    for (const hook of hooks) await hook.inserted(tx, row, message);
    return row;
  });
}

export interface RecorderOptions {
  db: Database;
  logger: Logger;
  outageBoundMs: number;
  /** The completion rings the doorbell of followers on other instances (src/cluster/). */
  ring?: boolean;
  /**
   * Called when a completion that could not be stored at the run's end is settled: stored since,
   * or given up on (refused for good; recovery at the next start closes the run).
   */
  onSettled: (runId: string, stored: boolean) => void;
}

export interface Recorded {
  /** The completion event: stored (the one the run's subscribers get), or held to store later. */
  entry: SequencedEvent;
  /**
   * `stored`; `pending` while the recorder keeps trying to store it; `lost` when there is nothing
   * left to store it in (the run's row was deleted with its session).
   */
  state: "stored" | "pending" | "lost";
}

interface Unrecorded {
  row: RunRow;
  entry: SequencedEvent;
  completion: CompletionEvent;
  hooks: readonly RunTransactionHook[];
}

const FIRST_RETRY_MS = 1000;
const MAX_RETRY_MS = 10_000;

export class CompletionRecorder {
  private readonly unrecorded = new Map<string, Unrecorded>();
  /** The attempt in progress to store a run's waiting completion: one at a time per run. */
  private readonly storing = new Map<string, Promise<void>>();
  /** Runs whose completion the database refused for good: left to recovery. */
  private readonly givenUp = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private retryMs = FIRST_RETRY_MS;

  constructor(private readonly opts: RecorderOptions) {}

  /** The runs whose completion the database has not taken: still tried again, or given up on. */
  unstored(): string[] {
    return [...this.unrecorded.keys(), ...this.givenUp];
  }

  /**
   * Records the run's end, with the part of each of `hooks` (those the run joined); resolves with
   * its completion and whether it is stored. Never rejects.
   */
  async record(
    row: RunRow,
    at: CompletionPosition,
    completion: CompletionEvent,
    hooks: readonly RunTransactionHook[],
  ): Promise<Recorded> {
    const { logger, outageBoundMs } = this.opts;
    // The cost as the run's row keeps it, so that the completion and the row say the same.
    completion = { ...completion, cost_usd: exactCost(completion.cost_usd) };
    const store = (outcome: CompletionEvent) =>
      withDbRetries(
        () => this.persist(row, outcome, hooks, (totals) => numbered(outcome, at, totals)),
        outageBoundMs,
      );
    let outcome = completion;
    let error: unknown;
    try {
      return { entry: await store(outcome), state: "stored" };
    } catch (err) {
      error = err;
    }
    if (error instanceof RunAlreadyClosedError) {
      // Another instance closed it (this one had lost its lease), or it was deleted with its
      // session: the completion it has, if any, stands.
      logger.warn("a run ended after it was closed elsewhere or deleted", { run_id: row.id });
      return { entry: numbered(outcome, at), state: "lost" };
    }
    if (foreignKeyViolation(error)) {
      // The run's row is gone (its session was deleted): there is nothing left to record it in.
      logger.warn("a run ended after its session was deleted", { run_id: row.id });
      return { entry: numbered(outcome, at), state: "lost" };
    }
    if (!(error instanceof DatabaseOutageError)) {
      // The database refused the outcome itself: record that the run failed, without its data.
      logger.error("the database refused a run's outcome; recording it as failed", {
        run_id: row.id,
        error: describeDbError(error),
      });
      // Then without its spend and usage too, should those be what it refuses.
      for (const fallback of [refusedOutcome(completion, error), bareFailure(error)]) {
        outcome = fallback;
        try {
          return { entry: await store(outcome), state: "stored" };
        } catch (err) {
          error = err;
        }
        if (error instanceof DatabaseOutageError) break;
      }
    }
    logger.error("could not record a run's end; trying again in the background", {
      run_id: row.id,
      error: describeDbError(error),
    });
    const entry = numbered(outcome, at);
    this.unrecorded.set(row.id, { row, entry, completion: outcome, hooks });
    this.scheduleRetry();
    return { entry, state: "pending" };
  }

  /** Tries once more to store what is waiting (at shutdown); what still fails is left to recovery. */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.retryUnrecorded();
  }

  private scheduleRetry() {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.retryUnrecorded().then(() => {
        if (this.unrecorded.size === 0) this.retryMs = FIRST_RETRY_MS;
        else {
          this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
          this.scheduleRetry();
        }
      });
    }, this.retryMs).unref();
  }

  /** Stores each waiting completion exactly as it was published. Never rejects. */
  private async retryUnrecorded() {
    for (const runId of [...this.unrecorded.keys()]) await this.storeNow(runId);
  }

  /**
   * Tries at once to store the run's completion, if it waits here: a client asking about the run
   * (its view, a second cancel) after the database came back need not wait for the next retry to
   * read it finished. Resolves with whether one waited. Never rejects; what still fails stays
   * waiting.
   */
  async storeNow(runId: string): Promise<boolean> {
    const waiting = this.unrecorded.get(runId);
    if (!waiting) return false;
    let attempt = this.storing.get(runId);
    if (!attempt) {
      attempt = this.storeWaiting(runId, waiting).finally(() => this.storing.delete(runId));
      this.storing.set(runId, attempt);
    }
    await attempt;
    return true;
  }

  private async storeWaiting(runId: string, { row, entry, completion, hooks }: Unrecorded) {
    try {
      await this.persist(row, completion, hooks, () => entry);
      this.unrecorded.delete(runId);
      this.opts.logger.info("recorded a run's end after the database came back", {
        run_id: runId,
      });
      this.opts.onSettled(runId, true);
    } catch (err) {
      if (transientDbError(err)) return;
      // Refused for good (or the run is gone): recovery at the next start closes it.
      this.unrecorded.delete(runId);
      const closed = err instanceof RunAlreadyClosedError || foreignKeyViolation(err);
      if (!closed) this.givenUp.add(runId);
      this.opts.logger.error("gave up recording a run's end", {
        run_id: runId,
        error: describeDbError(err),
      });
      this.opts.onSettled(runId, false);
    }
  }

  /**
   * The run's outcome, its session's new totals, its completion event and the hooks' part, in one
   * transaction. finishRun closes the run, once, in it: that is the completion's fence. Without
   * hooks it takes two round trips on Postgres: the close with `begin`, then the completion, its
   * feed entry and its session's ring, which need nothing of each other's answers, with `commit`.
   */
  private persist(
    row: RunRow,
    completion: CompletionEvent,
    hooks: readonly RunTransactionHook[],
    entryFor: (totals: SessionUsage | undefined) => SequencedEvent,
  ): Promise<SequencedEvent> {
    const outcome: RunOutcome = {
      status: completion.status,
      usage: completion.usage,
      costUsd: completion.cost_usd,
      durationMs: completion.duration_ms,
      agentSessionId: completion.agent_session_id,
      lastMessageUuid: completion.resume_at,
      exitCode: null,
    };
    const recorded = (entry: SequencedEvent): Statement[] => {
      // One batch of one run, naming no agent session: a statement of a few texts, prepared.
      const stored = eventsAppended(
        [{ runId: row.id, events: [entry], lastPublicSeq: entry.publicSeq ?? 0 }],
        { whileOpen: false, ring: this.opts.ring },
      );
      return [
        ...(stored ? [stored.statement] : []),
        // Its session may be free now for a run waiting for it on another instance.
        ...(this.opts.ring ? [waitingRunsRung({ sessionId: row.sessionId })] : []),
        feedEntriesAppended([runFinished(row, completion)]),
      ];
    };
    const { db } = this.opts;
    if (hooks.length === 0) {
      return inTwoRoundTrips(db, [runClosed(row, outcome)], ([closed]) => {
        const entry = entryFor(closedRun(row, closed));
        return { statements: recorded(entry), value: entry };
      });
    }
    return db.transaction(async (tx) => {
      const entry = entryFor(await finishRun(tx, row, outcome));
      await Promise.all(recorded(entry).map((statement) => executePrepared(tx, statement)));
      for (const hook of hooks) await hook.completed(tx, row);
      return entry;
    });
  }
}

function numbered(
  completion: CompletionEvent,
  at: CompletionPosition,
  totals?: SessionUsage,
): SequencedEvent {
  return sequenced(
    { ...completion, ...(totals ? { session_usage: totals } : {}) },
    at.seq,
    at.publicSeq,
  );
}

/** The last resort when the database refuses even that: a failure with nothing of the run's. */
function bareFailure(err: unknown): CompletionEvent {
  return bareCompletion("failed", `the run's outcome could not be stored: ${describeDbError(err)}`);
}

/** What is recorded when the database refuses a run's outcome: a failure, keeping the spend. */
function refusedOutcome(completion: CompletionEvent, err: unknown): CompletionEvent {
  return {
    ...completion,
    status: "failed",
    is_error: true,
    result: null,
    error: `the run's outcome could not be stored: ${describeDbError(err)}`,
  };
}
