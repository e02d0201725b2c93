import { type Context, context } from "@opentelemetry/api";
import { storedImages } from "../agents/images.js";
import type { Database } from "../store/db.js";
import { uniqueViolation } from "../store/errors.js";
import { countLiveInstances } from "../store/instances.js";
import { type AdmissionState, admissionState, retryPoint } from "../store/run-admission.js";
import { getActiveRun } from "../store/runs.js";
import type { RunRow, SessionRow } from "../store/schema.js";
import { sessionSettings } from "../store/sessions.js";
import { getSessionWorktree } from "../store/worktrees.js";
import { ActiveRun } from "./active-run.js";
import {
  RunNotLatestError,
  SessionBusyError,
  SessionExpiredError,
  SessionGoneError,
  WorktreeHostGoneError,
} from "./errors.js";
import { toHandover } from "./handover.js";
import { findIdempotentRun, messageHash } from "./idempotency.js";
import { type Message, NO_RUN_OPTIONS, runSettings } from "./message.js";
import type { RunParts } from "./parts.js";
import { recordRun } from "./recording.js";

/** A read of a session's admission state, with the mark taken as it started (Admission.readMark). */
export interface AdmissionRead {
  state: AdmissionState;
  mark: number | undefined;
}

/**
 * A message becomes a run: its session is read again and its key's gate asked, its run written
 * (with its idempotency key, its host pinned when its worktree is on one) and admitted here, or
 * queued in the database for whichever instance has a slot.
 */
export class Submission {
  constructor(private readonly parts: RunParts) {}

  /**
   * Creates and queues a run for the session; with an idempotency key, may return an earlier one.
   * `read`: the caller's read of the session's admission state, and the mark taken as it started.
   */
  submit(
    session: SessionRow,
    message: Message,
    read?: AdmissionRead,
  ): Promise<{ run: RunRow; created: boolean }> {
    // Taken now, in the caller's request: the run's span is a child of the request's.
    const traceParent = context.active();
    const { admission } = this.parts;
    const fresh = read && admission.quietSince(session.id, read.mark) ? read.state : undefined;
    // The unique index on active runs still guards against other processes.
    return admission.inAdmissionOrder(session.id, () =>
      this.admit(session, message, traceParent, fresh),
    );
  }

  /**
   * Calls `task` in the session's admission order when the session has no active run (else
   * resolves undefined without calling it): a message arriving meanwhile waits for `task` and
   * sees what it did. The sweep expires sessions through this.
   */
  whenIdle<T>(sessionId: string, task: () => Promise<T>): Promise<T | undefined> {
    const { admission, opts } = this.parts;
    return admission.inAdmissionOrder(sessionId, async () => {
      if (admission.isActive(sessionId) || (await getActiveRun(opts.db, sessionId))) {
        return undefined;
      }
      return task();
    });
  }

  private async admit(
    session: SessionRow,
    message: Message,
    traceParent: Context,
    fresh: AdmissionState | undefined,
  ): Promise<{ run: RunRow; created: boolean }> {
    try {
      return await this.admitNew(session, message, traceParent, fresh);
    } catch (err) {
      const key = message.idempotencyKey;
      // Another try of the same request, on this instance or another, made its run between this
      // one's look for it and its own insert (the session busy, or the key taken): answer that run.
      const raced =
        err instanceof SessionBusyError || uniqueViolation(err) === "runs_session_idempotency_key";
      if (!key || !raced) throw err;
      const earlier = await findIdempotentRun(this.db, session.id, key, messageHash(message));
      if (!earlier) throw err;
      return { run: earlier, created: false };
    }
  }

  private async admitNew(
    requested: SessionRow,
    message: Message,
    traceParent: Context,
    fresh: AdmissionState | undefined,
  ): Promise<{ run: RunRow; created: boolean }> {
    const { admission, opts } = this.parts;
    const { db, agents, gate, transactionHooks, cluster } = opts;
    admission.checkOpen(requested.id);
    // Read again, unless the caller's read is as good as one made now (nothing was admitted or
    // swept here since it started): the sweep may have expired the session since, or its run
    // before this one ended (and changed it). A run that starts at once runs on this row.
    const state = fresh ?? (await admissionState(db, requested.id));
    if (!state) throw new SessionGoneError(requested.id);
    if (state.expired) throw new SessionExpiredError(requested.id);
    const { session } = state;
    const requestHash = message.idempotencyKey ? messageHash(message) : null;
    if (message.idempotencyKey) {
      const earlier = await findIdempotentRun(db, session.id, message.idempotencyKey, requestHash);
      if (earlier) return { run: earlier, created: false };
    }
    const resumeAt = message.retryOf ? await this.retryPoint(session.id, message.retryOf) : null;
    const mayWait = Boolean(message.waitForSession);
    let wait = admission.mustWait(session.id, state.activeRunId, mayWait, state.waitingRunId);
    agents.get(session.agent);
    const options = message.options ?? NO_RUN_OPTIONS;
    const allowance = await gate.allow(
      session,
      runSettings(sessionSettings(session), options),
      state.ownerKey,
    );
    const pinnedHost = await this.pinnedHost(session);
    // Here when it can start here at once (or must wait in this instance's line for its session);
    // else queued in the database for any instance (of its host, when pinned) to claim.
    const here =
      !cluster.shared ||
      ((pinnedHost === null || pinnedHost === opts.host) && (wait || admission.hasFreeSlot()));
    if (here) admission.checkRoom();
    const hooks = transactionHooks.filter((hook) => hook.joins(message));
    const keyId = session.ownerKeyId;
    const retryAfterSeconds = () => admission.retryAfterSeconds();
    const limit = keyId
      ? { keyId, max: opts.maxPerKey, retryAfterSeconds, concurrent: cluster.shared }
      : null;
    const insert = (status: "queued" | "waiting") => {
      // A run that waits for its session waits in this instance's line.
      const unowned = !here && status === "queued";
      return recordRun(
        db,
        {
          sessionId: session.id,
          instanceId: unowned ? null : opts.instanceId(),
          agent: session.agent,
          status,
          trigger: message.trigger,
          prompt: message.text,
          systemPrompt: message.systemPrompt,
          outputSchema: message.outputSchema ?? null,
          images: storedImages(options.attachments),
          idempotencyKey: message.idempotencyKey,
          requestHash,
          handover: unowned ? toHandover({ options, resumeAt }) : null,
          checkout: message.checkout ?? null,
          egress: message.egress ?? null,
          pinnedHost,
        },
        message,
        hooks,
        limit,
        unowned ? { perInstance: opts.maxQueued, ring: cluster.rings, retryAfterSeconds } : null,
      );
    };
    const freePlace = admission.holdPlace();
    let row: RunRow;
    try {
      try {
        row = await insert(wait ? "waiting" : "queued");
      } catch (err) {
        // Another process (or a run admitted meanwhile) took the session: wait behind it.
        if (!mayWait || uniqueViolation(err) !== "runs_one_active_per_session") throw err;
        wait = true;
        row = await insert("waiting");
      }
    } catch (err) {
      const constraint = uniqueViolation(err);
      if (constraint === "runs_one_active_per_session") {
        const activeRun = await getActiveRun(db, session.id);
        throw new SessionBusyError(activeRun?.id ?? "unknown");
      }
      throw err;
    } finally {
      freePlace();
    }
    // Claimed by whichever instance has a slot first; its poster follows it from the log.
    if (row.instanceId === null) return { run: row, created: true };
    // `resume` is asked again when a waiting run takes its turn.
    const log = this.parts.logFor(row.id);
    const run = new ActiveRun(row, wait, {
      session,
      log,
      resume: state.resume,
      hooks,
      options,
      resumeAt,
      traceParent,
      allowance,
    });
    admission.add(run, wait);
    run.placed();
    return { run: row, created: true };
  }

  /**
   * The host a worktree session's runs must run on (null: any): the one whose disk holds its
   * worktree. A WorktreeHostGoneError when no instance of that host is alive to run it.
   */
  private async pinnedHost(session: SessionRow): Promise<string | null> {
    const { db, host, cluster } = this.parts.opts;
    if (!session.worktree) return null;
    const pinned = (await getSessionWorktree(db, session.id))?.host ?? null;
    if (pinned === null || pinned === host || !cluster.shared) return pinned;
    if ((await countLiveInstances(db, pinned)) === 0) {
      throw new WorktreeHostGoneError(session.id, pinned);
    }
    return pinned;
  }

  /**
   * Where a retry of `runId` resumes the conversation, once it is known to be the session's
   * newest run and finished (asked in the session's admission order, so no message slips in).
   */
  private async retryPoint(sessionId: string, runId: string): Promise<string | null> {
    const { latest, resumeAt } = await retryPoint(this.db, sessionId, runId);
    if (!latest) throw new SessionGoneError(sessionId);
    if (latest.id !== runId) throw new RunNotLatestError(runId, latest.id);
    if (["queued", "running", "waiting"].includes(latest.status)) {
      throw new SessionBusyError(latest.id);
    }
    return resumeAt;
  }

  private get db(): Database {
    return this.parts.opts.db;
  }
}
