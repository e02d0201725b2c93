import type { AgentBackend } from "../agents/agent.js";
import type { AgentRegistry } from "../agents/registry.js";
import type { RunAllowance, RunGate } from "../auth/policy.js";
import { DomainError, type ErrorCode } from "../errors.js";
import {
  type BridgeEvent,
  bareCompletion,
  type CompletionErrorCode,
  type CompletionEvent,
} from "../events.js";
import { errorText, type Logger } from "../log.js";
import type { Metrics } from "../metrics.js";
import { ANONYMOUS_ADMIN } from "../principal.js";
import { bootId } from "../process/groups.js";
import type { AgentIdentity, TenantHomes } from "../process/tenant-homes.js";
import type { Database } from "../store/db.js";
import { describeDbError } from "../store/errors.js";
import { DatabaseOutageError } from "../store/retry.js";
import { markRunning, setRunPgid } from "../store/run-lifecycle.js";
import type { SessionRow } from "../store/schema.js";
import { getSession, sessionSettings, sessionTotals } from "../store/sessions.js";
import type { StoredCopy } from "../store/transcripts.js";
import type { DebugCapture, RunCapture } from "../telemetry/capture.js";
import type { RunExchange, RunTrace, Tracing } from "../telemetry/tracing.js";
import type { CheckoutCache } from "../worktrees/checkout-cache.js";
import type { Git, GitRunner } from "../worktrees/git.js";
import type { ActiveRun } from "./active-run.js";
import type { Approvals, RunApprovals } from "./approvals.js";
import { runSettings } from "./message.js";
import type { CompletionRecorder } from "./recording.js";
import type { RunLog } from "./run-log.js";
import { settleStructuredOutput } from "./structured-output.js";
import { RunWorkspace } from "./workspace.js";

export interface ExecutionOptions {
  db: Database;
  logger: Logger;
  agents: AgentRegistry;
  /** Whether the session's key may run now, and what a run may spend. */
  gate: RunGate;
  /** Set: the agents run as another OS user, each tenant in a HOME of its own. */
  homes?: TenantHomes | undefined;
  /** Runs git in a worktree session's repository as its tenant. */
  git: GitRunner;
  /** Where pull requests' heads are fetched, by the server, before a tenant takes them. */
  checkouts: CheckoutCache;
  /** Where a session without a work dir of its own runs. */
  workDir: string;
  /** This instance's host, recorded with the worktrees it makes. */
  host: string;
  metrics: Metrics;
  recorder: CompletionRecorder;
  /** Who answers the runs' permission requests. */
  approvals: Approvals;
  /** Called once a run's completion is stored. */
  onStored: (runId: string) => void;
  /** Spans of runs, when tracing is on. */
  tracing: Tracing;
  /** Set: each run's raw CLI output and events are written to files. */
  capture?: DebugCapture;
}

/**
 * Runs admitted runs: each is marked running, its worktree prepared, its agent's back-end driven
 * and its events relayed to its log; every way a run can end (its outcome, a cancel, a shutdown,
 * a refusal when its turn came, a failure in the bridge) becomes exactly one completion.
 */
export class Execution {
  /** Logs of finished runs whose completion is not stored yet: their subscribers wait for it. */
  private readonly unrecorded = new Map<string, RunLog>();

  private readonly workspace: RunWorkspace;

  constructor(private readonly opts: ExecutionOptions) {
    this.workspace = new RunWorkspace(opts);
  }

  /**
   * Runs the agent and relays its events to the log until its outcome is known, records and
   * publishes the completion, and only then waits for the agent's process group to be gone (an agent
   * that ignores SIGTERM costs its slot the kill's grace period, not the client its answer).
   * Never rejects: a run's end is recorded (or kept for later) inside it.
   */
  async run(run: ActiveRun): Promise<void> {
    run.life.fire({ type: "start" });
    // Set only for a run started within its admission, which read the session and asked the gate
    // a moment ago: a short run's first text waited about a millisecond for the two reads again.
    const admitted = run.admittedAllowance;
    if (!admitted) await this.readSettings(run);
    const { trace, capture } = this.watch(run);
    const execute = () => this.execute(run, admitted, trace, capture);
    // Inside the run's span: what the run logs carries its trace id.
    await (trace ? trace.within(execute) : execute());
  }

  /**
   * The session's row read again as a run that waited for its session or was queued starts: its
   * settings are those of the session now (a `PATCH` since its admission counts). A failed read
   * leaves the row it was admitted with.
   */
  private async readSettings(run: ActiveRun): Promise<void> {
    try {
      const row = await getSession(this.opts.db, run.session.id, ANONYMOUS_ADMIN);
      if (row) run.sessionReadAtStart(row);
    } catch (err) {
      this.opts.logger.warn("could not read the session's settings again at the run's start", {
        run_id: run.id,
        error: errorText(err),
      });
    }
  }

  private async execute(
    run: ActiveRun,
    admitted: RunAllowance | undefined,
    trace?: RunTrace,
    capture?: RunCapture,
  ): Promise<void> {
    const { db, logger } = this.opts;
    const { row, session } = run;
    const startedAt = new Date();
    appendStarted(run, startedAt, trace);
    // Recorded once the gate has ruled, while the CLI starts: recovery closes queued and running
    // runs alike, and the run's end is recorded only after this. On the embedded database each
    // statement holds the server's thread, so it does not go before the gate's reads.
    let marking: Promise<void> | undefined;
    const mark = () => {
      marking ??= markRunning(db, row.id, startedAt).catch((err) =>
        logger.error("could not mark the run running", { run_id: row.id, error: errorText(err) }),
      );
    };
    let events: AsyncGenerator<BridgeEvent[]> | undefined;
    let completion: CompletionEvent | undefined;
    let transcripts: { agent: AgentBackend; identity: AgentIdentity | undefined } | undefined;
    /** The transcript's first store, under way from the CLI's outcome on. */
    let storing: Promise<StoredCopy | undefined> | undefined;
    const mode = run.options.approvals ?? (session.approvals === "api" ? "api" : "deny");
    const approvals = this.opts.approvals.forRun(run, mode);
    const git = this.opts.git.forSession(session.ownerKeyId, this.workDirOf(session));
    try {
      // Asked again unless the run started within its admission: the key's other runs may have
      // spent its budget while this one was queued.
      if (admitted) mark();
      const allowance =
        admitted ??
        (await this.opts.gate
          .allow(session, runSettings(sessionSettings(session), run.options))
          .finally(mark));
      if (row.checkout !== null) await this.workspace.checkOutChange(session, git, row.checkout);
      else if (session.worktree) await this.workspace.prepareWorktree(session, git);
      const agent = this.opts.agents.get(session.agent);
      const identity = await this.opts.homes?.identityFor(session.ownerKeyId);
      transcripts = { agent, identity };
      // A fork's first run resumes the conversation it was copied from.
      if (run.resume || session.forkedFrom) {
        await this.workspace.restoreTranscript(run, agent, identity);
      }
      events = await this.runAgent(run, agent, { identity, git }, allowance, approvals, {
        capture,
        exchange: trace?.exchange,
      });
      run.life.fire({ type: "launch" });
      completion = await relay(run, events);
      // Its file work (a process, as the agent) goes on while the log's last events are stored.
      storing = this.workspace.saveTranscript(run, completion, transcripts);
      // Requests still waiting are closed before the completion, in the run's log.
      await approvals.close();
      await run.log.drain();
    } catch (err) {
      await approvals.close();
      const refusal = refusedAtStart(run, err);
      // Stored before its completion, as for any run that ends without its CLI.
      if (refusal) await run.log.drain().catch(() => {});
      completion = refusal ?? this.failure(run, err, completion);
    }
    // Before the completion goes out, so that a client reading the session then sees the record,
    // and its next message finds the transcript at any instance.
    if (session.worktree) await this.workspace.recordWorktree(session, git);
    if (transcripts && !storing)
      storing = this.workspace.saveTranscript(run, completion, transcripts);
    const stored = await storing;
    const { stop } = run.life;
    if (stop) completion = ended(completion, stop.status, stop.reason);
    mark();
    await marking;
    await this.complete(run, completion);
    try {
      // Lets the back-end stop the agent's group; resolves once it is gone.
      await events?.return(undefined);
    } catch (err) {
      logger.error("stopping the CLI failed", { run_id: row.id, error: errorText(err) });
    }
    // Whatever the CLI wrote after its outcome, over the copy stored before it, or whole where
    // that store found none: the session is free for any instance's run by now.
    if (transcripts) {
      await this.workspace.saveTranscript(run, completion, transcripts, stored ?? null);
    }
  }

  /**
   * Ends a run that never started (cancelled, or the server shut down: its lifecycle says how)
   * with its completion.
   */
  async endUnstarted(run: ActiveRun): Promise<void> {
    const { stop } = run.life;
    if (!run.life.endedUnstarted || !stop) {
      throw new Error(`run ${run.id} is ${run.life.state}, not ended before it started`);
    }
    appendStarted(run, new Date(), this.watch(run).trace);
    await run.log.drain().catch(() => {});
    const { status, reason } = stop;
    await this.complete(run, ended(bareCompletion(status, reason), status, reason));
  }

  /**
   * The log of a finished run whose completion is not stored yet: subscribers read its events,
   * then wait for the stored completion.
   */
  unrecordedLog(runId: string): RunLog | undefined {
    return this.unrecorded.get(runId);
  }

  /**
   * A completion the recorder kept trying to store is settled: stored, or given up on (another
   * instance closed the run, or the database refused it for good): the run's subscribers read
   * the completion that is stored, if any, from the log.
   */
  settled(runId: string, stored: boolean): void {
    this.unrecorded.get(runId)?.handOver();
    this.unrecorded.delete(runId);
    if (stored) this.opts.onStored(runId);
  }

  /** Lets the run's span and its debug capture, those that are on, see its events. */
  private watch(run: ActiveRun): { trace?: RunTrace; capture?: RunCapture } {
    const { row, session, options } = run;
    const trace = this.opts.tracing.startRun({
      runId: row.id,
      sessionId: session.id,
      agent: session.agent,
      // A message may pick its run's model over its session's.
      model: options.model ?? session.model,
      trigger: row.trigger,
      parent: run.traceParent,
    });
    const capture = this.opts.capture?.open(row.id);
    if (trace) run.log.observe(trace.observe);
    if (capture) run.log.observe(capture.event);
    return { ...(trace ? { trace } : {}), ...(capture ? { capture } : {}) };
  }

  private async runAgent(
    run: ActiveRun,
    agent: AgentBackend,
    { identity, git }: { identity: AgentIdentity | undefined; git: Git },
    allowance: RunAllowance,
    approvals: RunApprovals,
    { capture, exchange }: { capture?: RunCapture | undefined; exchange?: RunExchange | undefined },
  ): Promise<AsyncGenerator<BridgeEvent[]>> {
    const { db, logger } = this.opts;
    const { row, session, options } = run;
    const settings = sessionSettings(session);
    return agent.run(
      {
        sessionId: session.id,
        agentSessionId: session.agentSessionId,
        resume: run.resume,
        resumeAt: run.resumeAt,
        ...(session.forkedFrom && {
          forkOf: {
            agentSessionId: session.forkedFrom.agentSessionId,
            resumeAt: session.forkedFrom.resumeAt,
          },
        }),
        prompt: row.prompt,
        attachments: options.attachments,
        settings: runSettings(settings, options),
        messageSystemPrompt: row.systemPrompt,
        outputSchema: row.outputSchema,
        usageBefore: () => sessionTotals(db, session.id),
        maxBudgetUsd: allowance.maxBudgetUsd,
        cwd: this.workDirOf(session),
        ...(identity ? { identity } : {}),
        git,
        // A fork's pull request runs restricted (its egress list stored): none of the tools the
        // session allowed without asking, which would give it back what its mode takes away.
        allowedTools: row.egress === null ? session.allowedTools : [],
        toolRules: { key: allowance.toolRules, session: settings.toolRules },
      },
      {
        logger: logger.child({ run_id: row.id }),
        onSpawn: (pgid) =>
          void setRunPgid(db, row.id, pgid, bootId()).catch((err) =>
            logger.warn("could not record the CLI's process group", {
              run_id: row.id,
              error: errorText(err),
            }),
          ),
        runId: row.id,
        ...(capture ? { onRawLine: capture.rawLine } : {}),
        ...(exchange ? { exchange } : {}),
        approve: approvals.approve,
        withdraw: approvals.withdraw,
        awaiting: approvals.awaiting,
        answersQuestions: approvals.answersQuestions,
        interruption: run.interruption.signal,
        steer: (steering) => {
          run.steering = steering;
        },
      },
      run.abort.signal,
    );
  }

  /**
   * The completion of a run that failed in the bridge rather than in the CLI; what the CLI
   * reported (`reported`: its spend above all) is kept when it got that far.
   */
  private failure(run: ActiveRun, err: unknown, reported?: CompletionEvent): CompletionEvent {
    const { logger } = this.opts;
    let error: string;
    if (err instanceof DatabaseOutageError || run.log.hasFailed()) {
      error = `the run's events could not be stored: ${
        err instanceof DatabaseOutageError ? err.message : describeDbError(err)
      }`;
      logger.error("a run's event log could not be stored", { run_id: run.row.id, error });
    } else {
      error = "the bridge failed running the CLI; see its log";
      logger.error("run failed unexpectedly", { run_id: run.row.id, error: errorText(err) });
    }
    run.life.fire({ type: "outcome", status: "failed" });
    return reported
      ? { ...reported, status: "failed", is_error: true, error }
      : bareCompletion("failed", error);
  }

  private workDirOf(session: SessionRow): string {
    return session.workDir ?? this.opts.workDir;
  }

  /**
   * Records the run's end and publishes its completion once it is the stored one; never rejects.
   * One this instance could not store is not published: the run's subscribers read the stored log
   * once the recorder has stored it or learnt that another instance closed the run first (its
   * lease lapsed in the outage), so that no client sees an outcome other than the stored one.
   */
  private async complete(run: ActiveRun, outcome: CompletionEvent) {
    // Every way a run ends: one that ended otherwise than by its agent's success (a cancel after
    // its answer, a failure in the bridge) has a null `structured_output` when it had a schema.
    const completion = settleStructuredOutput(run.row.outputSchema, outcome);
    const at = run.log.completionPosition();
    const { entry, state } = await this.opts.recorder.record(run.row, at, completion, run.hooks);
    this.opts.metrics.runFinished(JSON.parse(entry.json) as CompletionEvent);
    if (state === "stored") {
      run.log.close(entry);
      this.opts.onStored(run.row.id);
      return;
    }
    run.log.endUnstored(entry);
    if (state === "pending") this.unrecorded.set(run.row.id, run.log);
    else run.log.handOver();
  }
}

/** The first event of every run, started or not. */
function appendStarted(run: ActiveRun, at: Date, trace: RunTrace | undefined) {
  run.log.append({
    type: "run_started",
    run_id: run.row.id,
    session_id: run.session.id,
    trigger: run.row.trigger,
    queued_ms: Math.max(0, at.getTime() - run.row.createdAt.getTime()),
    ...(trace ? { trace_id: trace.traceId } : {}),
  });
}

/**
 * Appends the back-end's events to the log until its completion, which it returns; the agent's
 * session id, when an event names one the session does not have, is stored with that event.
 */
async function relay(run: ActiveRun, events: AsyncGenerator<BridgeEvent[]>) {
  for (;;) {
    const next = await events.next();
    if (next.done) {
      run.life.fire({ type: "outcome", status: "failed" });
      return bareCompletion("failed", "the runner ended without a completion");
    }
    for (const event of next.value) {
      // In the statement that stores the event: a server killed once a client saw it has
      // recorded the agent's session for the session's next run to resume.
      const named = event.type === "session_status" ? event.agent_session_id : undefined;
      if (named && named !== run.session.agentSessionId) run.log.nameAgentSession(named);
      if (event.type !== "completion") {
        run.log.append(event);
        continue;
      }
      const completion = settleStructuredOutput(run.row.outputSchema, event);
      // Decided here, in one place: a cancel that comes after this is too late (409).
      run.life.fire({ type: "outcome", status: completion.status });
      return completion;
    }
    await run.log.keepPace();
  }
}

/** The refusals a run can meet when its turn comes, as its completion's `error_code`. */
const START_REFUSALS: Partial<Record<ErrorCode, CompletionErrorCode>> = {
  budget_exhausted: "budget_exhausted",
  policy_denied: "policy_denied",
  agent_unavailable: "agent_not_found",
  sandbox_required: "sandbox_required",
  // The run's pull request head could not be checked out (workspace.ts).
  worktree_unavailable: "work_dir_not_found",
};

/**
 * The completion of a run refused when its turn came (nothing was started): by its key's gate,
 * or because this server no longer runs the session's agent.
 */
function refusedAtStart(run: ActiveRun, err: unknown): CompletionEvent | undefined {
  const code = err instanceof DomainError && START_REFUSALS[err.code];
  if (!code) return undefined;
  run.life.fire({ type: "outcome", status: "failed" });
  return { ...bareCompletion("failed", err.message), error_code: code };
}

/** The completion with its status changed by the bridge (a cancel, a shutdown), spend kept. */
function ended(
  completion: CompletionEvent,
  status: "cancelled" | "interrupted",
  error: string,
): CompletionEvent {
  // The status's own code, whatever the CLI's end said (a cancel it answered by ending its
  // turn; a shutdown's kill, which it saw as a cancel), its spend kept.
  return { ...completion, status, is_error: true, error, error_code: status };
}
