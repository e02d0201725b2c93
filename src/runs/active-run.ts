import type { Context } from "@opentelemetry/api";
import type { RunSteering } from "../agents/agent.js";
import type { RunAllowance } from "../auth/policy.js";
import { RunInterruptedError } from "../process/errors.js";
import type { RunRow, SessionRow } from "../store/schema.js";
import type { Admittable } from "./admission.js";
import type { RunOptions } from "./message.js";
import type { RunTransactionHook } from "./recording.js";
import type { RunLog } from "./run-log.js";
import { RunLifecycle } from "./run-state.js";

/** What a run is made of in this process, besides its rows. */
export interface ActiveRunParts {
  session: SessionRow;
  log: RunLog;
  /** Resumes the agent's session: known when no other run of the session can be active. */
  resume: boolean;
  /** The transaction hooks that joined the run when it was written. */
  hooks: readonly RunTransactionHook[];
  /** What its message set for this run alone. */
  options: RunOptions;
  /** A retry's place to resume the conversation at (AgentRunRequest.resumeAt). */
  resumeAt: string | null;
  /** The trace context the run was submitted in (its request's span), when tracing is on. */
  traceParent?: Context | undefined;
  /** What its key's gate allowed as it was admitted (see admittedAllowance). */
  allowance?: RunAllowance | undefined;
}

/**
 * A run of this process, from its admission until its CLI is gone and its slot is free. Its state
 * is its lifecycle's (run-state.ts): what happens to it is an event fired there.
 */
export class ActiveRun implements Admittable {
  /** Aborted to stop the run's CLI now (a shutdown or a lost lease says why). */
  readonly abort = new AbortController();
  /** Aborted when a client asks the run to end its turn (RunContext.interruption). */
  readonly interruption = new AbortController();
  readonly life: RunLifecycle;
  readonly log: RunLog;
  readonly hooks: readonly RunTransactionHook[];
  readonly options: RunOptions;
  readonly resumeAt: string | null;
  readonly traceParent: Context | undefined;
  /** Its agent's CLI as clients steer it, while it takes input (RunContext.steer). */
  steering: RunSteering | null = null;
  private current: RunRow;
  private resumes: boolean;
  private sessionRow: SessionRow;
  private allowance: RunAllowance | undefined;

  constructor(row: RunRow, waiting: boolean, parts: ActiveRunParts) {
    this.current = row;
    this.allowance = parts.allowance;
    this.resumes = parts.resume;
    this.sessionRow = parts.session;
    this.log = parts.log;
    this.hooks = parts.hooks;
    this.options = parts.options;
    this.resumeAt = parts.resumeAt;
    this.traceParent = parts.traceParent;
    this.life = new RunLifecycle(waiting ? "waiting" : "queued", {
      // The abort carries the reason to the process driver, which logs the CLI's end so.
      interrupted: (reason) => this.abort.abort(new RunInterruptedError(reason)),
    });
  }

  /** The run's row: the promoted one once a waiting run has taken its session's turn. */
  get row(): RunRow {
    return this.current;
  }

  /**
   * Its session's row: as read at its admission (or claim), then, unless it started within its
   * admission, as read again when it starts, whose settings (a `PATCH` since) it runs with.
   */
  get session(): SessionRow {
    return this.sessionRow;
  }

  /**
   * What its key's gate allowed at its admission, while the admission places it: a run that
   * starts then, at once, runs on its session's row and allowance as its admission read them a
   * moment before. One that waits for its session or queues asks again when it starts (a `PATCH`
   * or the key's other runs' spend since count).
   */
  get admittedAllowance(): RunAllowance | undefined {
    return this.allowance;
  }

  /** The admission has placed the run: what it read is not the run's to start on any more. */
  placed(): void {
    this.allowance = undefined;
  }

  /** The session's row as read when the run starts (the same session). */
  sessionReadAtStart(row: SessionRow): void {
    if (row.id !== this.sessionRow.id) throw new Error(`session ${row.id} is not run ${this.id}'s`);
    this.sessionRow = row;
  }

  /** Whether it resumes the agent's session (asked again when a waiting run takes its turn). */
  get resume(): boolean {
    return this.resumes;
  }

  /** A waiting run took its session's turn: its row and resume are the promoted ones. */
  promote(row: RunRow, resume: boolean): void {
    this.life.fire({ type: "promote" });
    this.current = row;
    this.resumes = resume;
  }

  get id(): string {
    return this.current.id;
  }

  get sessionId(): string {
    return this.session.id;
  }

  get keyId(): string | null {
    return this.session.ownerKeyId;
  }
}
