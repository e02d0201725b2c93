import type { PermissionAnswer, PermissionRequest, RunContext } from "../agents/agent.js";
import { type Clock, systemClock, type Timer } from "../clock.js";
import { errorText, type Logger } from "../log.js";
import type { Approvals as ApprovalMode } from "../session-settings.js";
import type { Database } from "../store/db.js";
import {
  allowToolsForSession,
  cancelPendingRequests,
  getPermissionRequest,
  insertPermissionRequest,
  resolvePermissionRequest,
} from "../store/permissions.js";
import type { PermissionRequestRow, RunRow } from "../store/schema.js";
import type { ActiveRun } from "./active-run.js";
import { answerOf, type ClientReply } from "./approval-answers.js";
import {
  appendRequest,
  clientResolution,
  type Resolved,
  requestEvent,
  resolvedEvent,
} from "./approval-events.js";
import { PermissionRequestNotFoundError, PermissionRequestResolvedError } from "./errors.js";

// Who answers an agent's permission requests, and the wait for the answer. With `approvals:
// "deny"` the bridge refuses each at once; with `"api"` each is recorded (before its event goes
// out), waits for a client's answer (`answer`, from the route) or its timeout, and is closed
// `cancel` when its run ends first. Every resolution is a conditional update of the request's
// row, so exactly one of them wins; the winner's answer goes to the CLI and its
// `permission_resolved` to the run's log.

export type { ClientReply } from "./approval-answers.js";

interface Waiter {
  run: ActiveRun;
  request: PermissionRequest;
  resolve: (answer: PermissionAnswer) => void;
  timer: Timer;
  /** Settles once the request is recorded and its event out; whatever resolves it waits for it. */
  recorded: Promise<void>;
}

export interface ApprovalsOptions {
  db: Database;
  logger: Logger;
  /** How long a request waits when its session sets no `approval_timeout_seconds`. */
  timeoutSeconds: number;
  /** Times the wait for an answer. */
  clock?: Clock;
}

/** One run's side of it: the RunContext callbacks, and `close` once its outcome is known. */
export type RunApprovals = Pick<
  RunContext,
  "approve" | "withdraw" | "awaiting" | "answersQuestions"
> & {
  /** Closes what still waits (`cancel`); later requests are refused. Never rejects. */
  close(): Promise<void>;
};

export class Approvals {
  /** Requests of this process's runs that wait for an answer, by run and request id. */
  private readonly waiting = new Map<string, Waiter>();
  private readonly clock: Clock;

  constructor(private readonly opts: ApprovalsOptions) {
    this.clock = opts.clock ?? systemClock;
  }

  forRun(run: ActiveRun, mode: ApprovalMode): RunApprovals {
    let closed = false;
    /** A request was recorded (or was being): only then is there a row to close. */
    let recorded = false;
    return {
      approve: (request) => {
        if (mode === "deny" || closed) return Promise.resolve(this.refuse(run, request, !closed));
        recorded = true;
        return this.wait(run, request);
      },
      withdraw: (requestId) => this.withdraw(run, requestId),
      awaiting: () => [...this.waiting.values()].some((w) => w.run === run),
      answersQuestions: mode === "api",
      close: async () => {
        closed = true;
        await this.stopping(run);
        if (!recorded) return;
        try {
          await cancelPendingRequests(this.opts.db, run.id);
        } catch (err) {
          this.opts.logger.error("could not close the run's permission requests", {
            run_id: run.id,
            error: errorText(err),
          });
        }
      },
    };
  }

  /**
   * Records a client's answer to a request of `run`, with the API key that gave it (`keyId`, null
   * without keys), and, when this process runs it, gives it to the CLI; `delivered` false: the
   * run's instance is to be told (`answered` there).
   */
  async answer(
    run: RunRow,
    requestId: string,
    reply: ClientReply,
    keyId: string | null,
  ): Promise<{ row: PermissionRequestRow; delivered: boolean }> {
    const { db } = this.opts;
    const row = await getPermissionRequest(db, run.id, requestId);
    if (!row) throw new PermissionRequestNotFoundError(run.id, requestId);
    if (row.state !== "pending") throw new PermissionRequestResolvedError(requestId, row.state);
    const { answer, scope, rules } = answerOf(run.agent, row, reply);
    const resolved = await resolvePermissionRequest(db, run.id, requestId, {
      state: answer.behavior === "allow" ? "allowed" : "denied",
      by: "client",
      answeredByKeyId: keyId,
      answer,
      ...(scope ? { scope } : {}),
    });
    if (!resolved) {
      const now = await getPermissionRequest(db, run.id, requestId);
      throw new PermissionRequestResolvedError(requestId, now?.state ?? "cancelled");
    }
    const waiter = this.waiting.get(key(run.id, requestId));
    if (waiter) await this.deliver(waiter, answer, clientResolution(resolved, answer));
    // After the CLI has its answer: the session's later runs are what these rules are for.
    if (rules.length > 0) await allowToolsForSession(db, run.sessionId, rules);
    return { row: resolved, delivered: waiter !== undefined };
  }

  /**
   * The run is being stopped (cancelled, interrupted, or over): each request of it that waits is
   * denied `by: "cancel"`, ending the CLI's turn, unless a client's answer reached its row first.
   * Never rejects.
   */
  async stopping(run: ActiveRun): Promise<void> {
    const waiting = [...this.waiting.values()].filter((w) => w.run === run);
    await Promise.all(
      waiting.map((waiter) =>
        this.settle(
          waiter,
          { state: "cancelled", by: "cancel" },
          { behavior: "deny", interrupt: true },
          { decision: "deny", by: "cancel" },
        ),
      ),
    );
  }

  /** Another instance recorded an answer to a request of a run of this one: gives it to the CLI. */
  async answered(runId: string, requestId: string): Promise<void> {
    const waiter = this.waiting.get(key(runId, requestId));
    if (!waiter) return;
    const recorded = await getPermissionRequest(this.opts.db, runId, requestId);
    if (recorded) await this.deliverRecorded(waiter, recorded);
  }

  /** The bridge's own refusal (`approvals: "deny"`), shown in the stream when `visible`. */
  private refuse(run: ActiveRun, request: PermissionRequest, visible: boolean): PermissionAnswer {
    if (visible) {
      run.log.append(requestEvent(request, null));
      run.log.append(resolvedEvent(request.requestId, { decision: "deny", by: "policy" }));
    }
    return { behavior: "deny" };
  }

  private wait(run: ActiveRun, request: PermissionRequest): Promise<PermissionAnswer> {
    const seconds = run.session.approvalTimeoutSeconds ?? this.opts.timeoutSeconds;
    let resolve: (answer: PermissionAnswer) => void = () => {};
    const answered = new Promise<PermissionAnswer>((r) => {
      resolve = r;
    });
    // Waiting before the row exists: an answer can only come once it does.
    const waiter: Waiter = {
      run,
      request,
      resolve,
      timer: this.clock.setTimeout(() => this.expire(run, request, seconds), seconds * 1000),
      recorded: Promise.resolve(),
    };
    this.waiting.set(key(run.id, request.requestId), waiter);
    run.life.fire({ type: "approval_asked" });
    waiter.recorded = this.record(waiter, seconds);
    return answered;
  }

  /** Records the request, then sends its event; refuses it when it cannot be recorded. */
  private async record(waiter: Waiter, seconds: number): Promise<void> {
    const { run, request } = waiter;
    const createdAt = new Date(this.clock.now());
    const expiresAt = new Date(createdAt.getTime() + seconds * 1000);
    try {
      await insertPermissionRequest(this.opts.db, {
        runId: run.id,
        requestId: request.requestId,
        toolName: request.toolName,
        toolUseId: request.toolUseId,
        input: request.input,
        suggestions: request.suggestions,
        createdAt,
        expiresAt,
      });
    } catch (err) {
      this.opts.logger.error("could not record a permission request; it is denied", {
        run_id: run.id,
        error: errorText(err),
      });
      appendRequest(run, request, null);
      if (this.take(waiter)) {
        run.log.append(resolvedEvent(request.requestId, { decision: "deny", by: "policy" }));
        waiter.resolve({ behavior: "deny" });
      }
      return;
    }
    appendRequest(run, request, expiresAt);
  }

  /** Nobody answered in time: denied, unless an answer reached the row from elsewhere. */
  private async expire(run: ActiveRun, request: PermissionRequest, seconds: number) {
    const waiter = this.waiting.get(key(run.id, request.requestId));
    if (!waiter) return;
    const message = `Nobody answered the request to use ${request.toolName} within ${seconds} s, so it was denied. Continue without it, or explain in your reply what you need.`;
    const answer: PermissionAnswer = { behavior: "deny", message };
    await this.settle(waiter, { state: "expired", by: "timeout" }, answer, {
      decision: "deny",
      by: "timeout",
      message,
    });
  }

  /**
   * Resolves the waiting request's row as `resolution` and gives the CLI `answer`; when a client's
   * answer reached the row first (from another instance), that one. A row that cannot be written
   * (the database away) does not hold the CLI up: it gets `answer`.
   */
  private async settle(
    waiter: Waiter,
    resolution: { state: "expired" | "cancelled"; by: "timeout" | "cancel" },
    answer: PermissionAnswer,
    how: Omit<Resolved, "type" | "request_id">,
  ): Promise<void> {
    const { run, request } = waiter;
    try {
      await waiter.recorded;
      const { db } = this.opts;
      const row = await resolvePermissionRequest(db, run.id, request.requestId, {
        ...resolution,
        answer,
      });
      const recorded = row ? undefined : await getPermissionRequest(db, run.id, request.requestId);
      if (recorded && (await this.deliverRecorded(waiter, recorded))) return;
    } catch (err) {
      this.opts.logger.error("could not record how a permission request ended", {
        run_id: run.id,
        state: resolution.state,
        error: errorText(err),
      });
    }
    await this.deliver(waiter, answer, how);
  }

  /** Gives the CLI a client's answer found in the request's row; false when there is none. */
  private async deliverRecorded(waiter: Waiter, recorded: PermissionRequestRow): Promise<boolean> {
    if (!recorded.answer || (recorded.state !== "allowed" && recorded.state !== "denied")) {
      return false;
    }
    const given = recorded.answer as PermissionAnswer;
    await this.deliver(waiter, given, clientResolution(recorded, given));
    return true;
  }

  private withdraw(run: ActiveRun, requestId: string) {
    const waiter = this.waiting.get(key(run.id, requestId));
    if (!waiter || !this.take(waiter)) return;
    void waiter.recorded.then(async () => {
      run.log.append({ type: "permission_cancelled", request_id: requestId });
      // The CLI wants no answer: the runner writes none.
      waiter.resolve({ behavior: "deny" });
      try {
        await resolvePermissionRequest(this.opts.db, run.id, requestId, {
          state: "cancelled",
          by: "cancel",
        });
      } catch (err) {
        this.opts.logger.error("could not record a withdrawn permission request", {
          run_id: run.id,
          error: errorText(err),
        });
      }
    });
  }

  /** Takes the waiter out of the waiting (once): false when something else resolved it. */
  private take(waiter: Waiter): boolean {
    const k = key(waiter.run.id, waiter.request.requestId);
    if (this.waiting.get(k) !== waiter) return false;
    this.clock.clear(waiter.timer);
    this.waiting.delete(k);
    const { run } = waiter;
    if (![...this.waiting.values()].some((w) => w.run === run)) {
      run.life.fire({ type: "approval_settled" });
    }
    return true;
  }

  /** Gives the CLI its answer and the log its `permission_resolved`, after the request's event. */
  private async deliver(
    waiter: Waiter,
    answer: PermissionAnswer,
    how: Omit<Resolved, "type" | "request_id">,
  ): Promise<void> {
    if (!this.take(waiter)) return;
    await waiter.recorded;
    waiter.run.log.append(resolvedEvent(waiter.request.requestId, how));
    waiter.resolve(answer);
  }
}

const key = (runId: string, requestId: string) => `${runId}\u0000${requestId}`;
