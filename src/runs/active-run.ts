import type { Context } from "@opentelemetry/api";
import type { CompletionEvent } from "../events.js";
import { RunInterruptedError } from "../process/errors.js";
import type { RunRow, SessionRow } from "../store/schema.js";
import type { Admittable } from "./admission.js";
import type { RunOptions } from "./message.js";
import type { RunTransactionHook } from "./recording.js";
import type { RunLog } from "./run-log.js";

/** A run of this process, from its admission until its CLI is gone and its slot is free. */
export class ActiveRun implements Admittable {
  readonly abort = new AbortController();
  /** Aborted when a client asks the run to end its turn (RunContext.interruption). */
  readonly interruption = new AbortController();
  /** Set when the server's shutdown, not a client, ended the run. */
  interruptedBy: string | undefined;
  /** A client cancelled the run before its outcome was known: it ends `cancelled`. */
  cancelled = false;
  /** The run's outcome, once known: from then on it can no longer be cancelled. */
  outcome: CompletionEvent["status"] | undefined;
  /** The trace context the run was submitted in (its request's span), when tracing is on. */
  traceParent: Context | undefined;
  /** Resolves once the run's CLI is gone and its slot is free. */
  readonly finished: Promise<void>;
  readonly markFinished: () => void;

  constructor(
    /** Replaced by the promoted row when a waiting run takes its turn. */
    public row: RunRow,
    readonly session: SessionRow,
    readonly log: RunLog,
    /** Resumes the agent's session: known when no other run of the session can be active. */
    public resume: boolean,
    /** The transaction hooks that joined the run when it was written. */
    readonly hooks: readonly RunTransactionHook[],
    /** What its message set for this run alone. */
    readonly options: RunOptions,
    /** A retry's place to resume the conversation at (AgentRunRequest.resumeAt). */
    readonly resumeAt: string | null = null,
  ) {
    let markFinished = () => {};
    this.finished = new Promise<void>((resolve) => {
      markFinished = resolve;
    });
    this.markFinished = markFinished;
  }

  /**
   * Stops the run for the bridge's own reason (a shutdown, a lost lease): it ends `interrupted`,
   * and its CLI's end is logged so (the abort carries the reason to the process driver).
   */
  interrupt(reason: string): void {
    this.interruptedBy = reason;
    this.abort.abort(new RunInterruptedError(reason));
  }

  get id(): string {
    return this.row.id;
  }

  get sessionId(): string {
    return this.session.id;
  }

  get keyId(): string | null {
    return this.session.ownerKeyId;
  }
}
