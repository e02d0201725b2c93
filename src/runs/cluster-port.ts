import type { CommandReply, SteerCommand, SteerOutcome } from "../store/commands.js";
import type { LogView, SequencedEvent } from "../store/events.js";
import type { Claim } from "../store/run-claims.js";
import type { RunRow } from "../store/schema.js";

// What the runs need of the other instances on one database, as interfaces that src/cluster/
// implements and src/app.ts wires: the runs never import the cluster. On the embedded database
// (`shared` false) there are no other instances, and nothing of this is asked but the claims'
// bookkeeping at shutdown.

/** A dead instance, and whether its process is known gone (so its CLIs' groups may be killed). */
export interface DeadInstance {
  id: string;
  processGone: boolean;
}

/**
 * This instance's claims of runs queued in the database (to run them, to cancel them, to close
 * them when their host is gone): each claim writes a token of its own on the runs it takes, and
 * the runs of a claim that failed are given back by it (src/cluster/claim-ledger.ts).
 */
export interface QueueClaims {
  /** Runs `task` with a new claim; if it fails, its runs are given back later. */
  claim<T>(task: (claim: Claim) => Promise<T>): Promise<T>;
  /** Whether `token` is a failed claim's, whose runs this instance does not hold. */
  hasFailed(token: string | null): token is string;
  /** Resolves once the claims in progress now are over. */
  settled(): Promise<void>;
  /** No claim starts from now on; resolves once those in progress are over. */
  close(): Promise<void>;
  readonly closed: boolean;
  /** Gives back the runs of the failed claims still queued here. */
  giveBackFailed(): Promise<void>;
  /** Gives back the runs of these claims still queued here; the tokens that had runs. */
  giveBack(tokens: string[]): Promise<Set<string | null>>;
}

/** Runs another instance executes, reached through the database (src/cluster/commands.ts). */
export interface RemoteRuns {
  /**
   * The run's stored events after position `after` of the view, then those stored later, until
   * its completion (src/cluster/remote-follower.ts).
   */
  follow(
    runId: string,
    view: LogView,
    after: number,
    signal?: AbortSignal,
  ): AsyncGenerator<SequencedEvent[]>;
  /**
   * Asks the run's owner to cancel or interrupt it and waits for its completion; the status it
   * ended with (undefined: the run is gone).
   */
  stop(
    run: RunRow & { instanceId: string },
    kind: "cancel" | "interrupt",
  ): Promise<string | undefined>;
  /** Tells the run's owner that a client answered one of its permission requests. */
  answered(runId: string, requestId: string, owner: string): Promise<void>;
  /**
   * Gives the run's owner a client's input or switch and waits for its answer (see
   * src/cluster/commands.ts `steerElsewhere`).
   */
  steer(
    run: RunRow & { instanceId: string },
    command: SteerCommand,
    boundMs: number,
  ): Promise<SteerOutcome>;
  /** The owner's answer to a SteerCommand, for the instance that posted it. */
  reply(command: SteerCommand, reply: CommandReply): Promise<void>;
}

export interface ClusterPort {
  /** Whether other instances share the database (not the embedded one). */
  readonly shared: boolean;
  /** Whether stored batches and queued runs ring the other instances (LISTEN/NOTIFY). */
  readonly rings: boolean;
  readonly claims: QueueClaims;
  readonly remote: RemoteRuns;
}
