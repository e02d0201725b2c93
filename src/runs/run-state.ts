import type { CompletionEvent } from "../events.js";

// A run's life in this process, as states and the events that move it between them. The table
// below is the one place that says which event a state takes and what it does; every other part
// asks a run's RunLifecycle (or fires an event at it) instead of setting flags on the run.
//
//   waiting ──promote──▶ queued ──start──▶ starting ──launch──▶ running ⇄ awaiting_approval
//      │                   │ └─hand_over─▶ handed_over             │
//      └─cancel/shutdown───┴──────────▶ ending ◀──outcome── (started, or stopping)
//                                         └──leave──▶ finished
//
// A started run told to stop (a client's cancel or interrupt, the server's shutdown, a lost lease)
// is `stopping` until its agent's outcome is known; a run that never started ends at once
// (`ending`, its completion made without its agent). Once the outcome is known (`ending`) the run
// can no longer be stopped: its completion is on its way.

export type RunState =
  /** In its session's line here, behind another run of the session. */
  | "waiting"
  /** The session's run, waiting for a slot here. */
  | "queued"
  /** Has a slot: its worktree, transcript and agent are being prepared. */
  | "starting"
  /** Its agent runs. */
  | "running"
  /** Its agent waits for the answer to a permission request. */
  | "awaiting_approval"
  /** Started, and told to stop: its agent is ending its turn, or being stopped. */
  | "stopping"
  /** Its outcome is known: its completion is being recorded and its agent's group stopped. */
  | "ending"
  /** Gone from this process: its slot is free and its completion recorded (or its row gone). */
  | "finished"
  /** Given back to the database's queue before it started, for an instance to claim. */
  | "handed_over";

export type RunEvent =
  /** Its session's turn, taken in the store: a waiting run becomes the session's queued run. */
  | { type: "promote" }
  /** A slot is free for it. */
  | { type: "start" }
  /** Its agent's back-end has started. */
  | { type: "launch" }
  /** Its agent asked for a permission and waits for the answer. */
  | { type: "approval_asked" }
  /** No permission request of the run waits any more. */
  | { type: "approval_settled" }
  /** A client cancelled it. */
  | { type: "cancel" }
  /** A client asked it to end its turn (a run not started yet is cancelled). */
  | { type: "interrupt" }
  /** This instance lost its lease: another one has closed the run. */
  | { type: "lease_lost" }
  /** The server is stopping. */
  | { type: "shutdown" }
  /** Queued for a host where no instance is alive any more. */
  | { type: "strand"; reason: string }
  /** Its agent's outcome (or the bridge's failure) is known, with the status it reported. */
  | { type: "outcome"; status: CompletionEvent["status"] }
  /** Given back to the database's queue, for whichever instance takes it. */
  | { type: "hand_over" }
  /** Its row is gone (its session deleted): nothing to run. */
  | { type: "vanish" }
  /** It has left this process's admission: its slot (or place) is free. */
  | { type: "leave" };

export type RunEventType = RunEvent["type"];

/** How the bridge, not the agent, ended a run: the status and error of its completion. */
export interface Stop {
  status: "cancelled" | "interrupted";
  reason: string;
}

/** What a transition does besides moving the run to its next state. */
type Effect =
  /** Never started: it ends so, its outcome known at once. */
  | { end: Stop }
  /** Ends as the event says (a stranded run's host is in the event). */
  | "end_stranded"
  /** A client stopped it: its completion says `cancelled`, unless the bridge interrupted it. */
  | "cancel"
  /** The bridge stops it now: its completion says `interrupted`, with this reason. */
  | { interrupt: string }
  /** Its outcome is known: from now on it cannot be stopped. */
  | "outcome"
  /** It left: whoever waits for that is told. */
  | "leave";

interface Step {
  to: RunState;
  does?: Effect;
}

const SHUT_DOWN_UNSTARTED = "the server shut down before the run started";
const SHUT_DOWN_STARTED = "the server shut down before the run finished";
const LEASE_LOST = "this instance lost its lease; another instance closed the run";
const CANCELLED_WAITING: Stop = {
  status: "cancelled",
  reason: "cancelled while it waited for its session",
};
const CANCELLED_QUEUED: Stop = { status: "cancelled", reason: "cancelled before it started" };

/**
 * What a started run (or one being stopped) takes: stops, and its outcome. One starting or being
 * stopped stays so while its agent asks for approval: `launch` (or the outcome) moves it on.
 */
function started(self: RunState): Partial<Record<RunEventType, Step>> {
  const stays = self === "starting" || self === "stopping";
  return {
    cancel: { to: "stopping", does: "cancel" },
    interrupt: { to: "stopping", does: "cancel" },
    lease_lost: { to: "stopping", does: { interrupt: LEASE_LOST } },
    shutdown: { to: "stopping", does: { interrupt: SHUT_DOWN_STARTED } },
    outcome: { to: "ending", does: "outcome" },
    approval_asked: { to: stays ? self : "awaiting_approval" },
    approval_settled: { to: stays ? self : "running" },
  };
}

/** Every transition there is; an event a state does not list is refused (RunStateError). */
export const TRANSITIONS: Record<RunState, Partial<Record<RunEventType, Step>>> = {
  waiting: {
    promote: { to: "queued" },
    cancel: { to: "ending", does: { end: CANCELLED_WAITING } },
    interrupt: { to: "ending", does: { end: CANCELLED_WAITING } },
    shutdown: {
      to: "ending",
      does: { end: { status: "interrupted", reason: SHUT_DOWN_UNSTARTED } },
    },
    // Stopped when its turn comes: it starts with its abort signal set, and ends interrupted.
    lease_lost: { to: "waiting", does: { interrupt: LEASE_LOST } },
    vanish: { to: "finished" },
  },
  queued: {
    start: { to: "starting" },
    cancel: { to: "ending", does: { end: CANCELLED_QUEUED } },
    interrupt: { to: "ending", does: { end: CANCELLED_QUEUED } },
    shutdown: {
      to: "ending",
      does: { end: { status: "interrupted", reason: SHUT_DOWN_UNSTARTED } },
    },
    strand: { to: "ending", does: "end_stranded" },
    lease_lost: { to: "queued", does: { interrupt: LEASE_LOST } },
    hand_over: { to: "handed_over" },
  },
  starting: {
    ...started("starting"),
    launch: { to: "running" },
  },
  running: started("running"),
  awaiting_approval: started("awaiting_approval"),
  stopping: {
    ...started("stopping"),
    // Told to stop while it was starting: its agent starts all the same, and is stopped.
    launch: { to: "stopping" },
  },
  ending: {
    // A failure in the bridge after the outcome (its log's last write): the later one counts.
    outcome: { to: "ending", does: "outcome" },
    // The requests still waiting are closed once the outcome is known, with any its agent made as
    // the outcome came.
    approval_asked: { to: "ending" },
    approval_settled: { to: "ending" },
    leave: { to: "finished", does: "leave" },
  },
  finished: { leave: { to: "finished", does: "leave" } },
  handed_over: { leave: { to: "handed_over", does: "leave" } },
};

/** An event the run's state does not take: a bug in the caller, or a race it must handle. */
export class RunStateError extends Error {
  constructor(
    readonly state: RunState,
    readonly event: RunEventType,
  ) {
    super(`a run that is ${state} does not take the event ${event}`);
  }
}

/** What the lifecycle does outside itself. */
export interface LifecycleHooks {
  /** The bridge stops the run now (a shutdown, a lost lease): its agent is to be killed. */
  interrupted(reason: string): void;
}

/** One run's state, moved only by `fire`, and what the transitions so far decided. */
export class RunLifecycle {
  private current: RunState;
  /** A client's cancel or interrupt reached the run while it ran. */
  private cancelled = false;
  /** The bridge's reason for interrupting it (a shutdown, a lost lease). */
  private interruptedBy: string | undefined;
  /** How a run that never started ended. */
  private unstarted: Stop | undefined;
  private decided: CompletionEvent["status"] | undefined;
  private markLeft: () => void = () => {};
  /** Resolves once the run has left this process's admission (its slot, or place, is free). */
  readonly left: Promise<void>;

  constructor(
    initial: "waiting" | "queued",
    private readonly hooks: LifecycleHooks,
  ) {
    this.current = initial;
    this.left = new Promise<void>((resolve) => {
      this.markLeft = resolve;
    });
  }

  get state(): RunState {
    return this.current;
  }

  /** Whether the run's state takes the event now. */
  accepts(event: RunEventType): boolean {
    return TRANSITIONS[this.current][event] !== undefined;
  }

  /** Moves the run by the event and does what the transition says; the new state. */
  fire(event: RunEvent): RunState {
    const step = TRANSITIONS[this.current][event.type];
    if (!step) throw new RunStateError(this.current, event.type);
    this.current = step.to;
    const does = step.does;
    if (does === "cancel") this.cancelled = true;
    else if (does === "outcome" && event.type === "outcome") {
      this.decided = this.cancelled ? "cancelled" : event.status;
    } else if (does === "end_stranded" && event.type === "strand") {
      this.endUnstarted({ status: "interrupted", reason: event.reason });
    } else if (does === "leave") this.markLeft();
    else if (typeof does === "object" && "end" in does) this.endUnstarted(does.end);
    else if (typeof does === "object" && "interrupt" in does) {
      this.interruptedBy = does.interrupt;
      this.hooks.interrupted(does.interrupt);
    }
    return this.current;
  }

  /** The run's outcome once known (a client's cancel decides `cancelled`): it takes no stop then. */
  get outcome(): CompletionEvent["status"] | undefined {
    return this.decided;
  }

  /**
   * How the bridge ended the run, when it did: its completion takes this status and error. The
   * bridge's interruption wins over a client's cancel.
   */
  get stop(): Stop | undefined {
    if (this.unstarted) return this.unstarted;
    if (this.interruptedBy) return { status: "interrupted", reason: this.interruptedBy };
    if (this.cancelled) return { status: "cancelled", reason: "cancelled by a client" };
    return undefined;
  }

  /** Whether the run ended without starting (its completion is made without its agent). */
  get endedUnstarted(): boolean {
    return this.unstarted !== undefined;
  }

  private endUnstarted(stop: Stop) {
    this.unstarted = stop;
    this.decided = stop.status;
  }
}
