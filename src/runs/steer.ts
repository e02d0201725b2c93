import { randomUUID } from "node:crypto";
import type { ImageAttachment } from "../agents/images.js";
import { pluginOf } from "../agents/registry.js";
import { DomainError, type ErrorCode } from "../errors.js";
import type { BridgeEvent } from "../events.js";
import { errorText } from "../log.js";
import type { PermissionMode } from "../session-settings.js";
import type { CommandReply, SteerCommand } from "../store/commands.js";
import { getRun, OPEN_STATUSES } from "../store/runs.js";
import type { RunRow } from "../store/schema.js";
import type { ActiveRun } from "./active-run.js";
import {
  AgentNoAnswerError,
  ControlFailedError,
  RunFinishedError,
  RunNotRunningError,
  SteeringUnsupportedError,
} from "./errors.js";
import type { RunParts } from "./parts.js";
import type { RunState } from "./run-state.js";

// Steering a live run: a client's input written to its agent as the user's next turn, and a
// switch of its model or permission mode, here or, for a run another instance executes, there (a
// command, whose reply the poster waits for, so that a refusal there reaches the client). What the
// agent took is recorded in the run's log (`user_input`, `control`); what it refused is not.

/** How long the run's owner has to take a command before the poster withdraws it. */
const OWNER_TAKES_MS = 15_000;

export type UserInputEvent = Extract<BridgeEvent, { type: "user_input" }>;
export type ControlEvent = Extract<BridgeEvent, { type: "control" }>;

/** A client's input, as the route takes it. */
export interface ClientInput {
  text: string;
  attachments: readonly ImageAttachment[];
}

/** A client's switch, as the route takes it (at least one of them). */
export interface ClientControl {
  model?: string | undefined;
  permissionMode?: PermissionMode | undefined;
}

const NOT_RUNNING: readonly RunState[] = ["waiting", "queued", "starting"];
const LIVE: readonly RunState[] = ["running", "awaiting_approval"];

export class Steering {
  constructor(private readonly parts: RunParts) {}

  /** Writes a client's input to the run's agent; the `user_input` event its log records. */
  async input(run: RunRow, agent: string, input: ClientInput): Promise<UserInputEvent> {
    requireSteering("input", agent);
    const command: SteerCommand = {
      runId: run.id,
      kind: "input",
      commandId: randomUUID(),
      text: input.text,
      attachments: input.attachments.map((a) => ({ mediaType: a.mediaType, data: a.data })),
    };
    return (await this.deliver(run, command)) as UserInputEvent;
  }

  /** Switches the run's model or permission mode; the `control` event its log records. */
  async control(run: RunRow, agent: string, change: ClientControl): Promise<ControlEvent> {
    requireSteering("control", agent);
    const command: SteerCommand = {
      runId: run.id,
      kind: "control",
      commandId: randomUUID(),
      ...(change.model === undefined ? {} : { model: change.model }),
      ...(change.permissionMode === undefined ? {} : { permissionMode: change.permissionMode }),
    };
    return (await this.deliver(run, command)) as ControlEvent;
  }

  /** Carries out a command another instance posted for a run of this one, and replies to it. */
  apply(command: SteerCommand): void {
    const { admission, opts } = this.parts;
    const run = admission.get(command.runId);
    const answer: Promise<CommandReply> = run
      ? this.here(run, command).then(
          (event): CommandReply => ({ ok: true, event }),
          (err: unknown): CommandReply => refusal(err),
        )
      : Promise.resolve(refusal(new RunFinishedError(command.runId, "ending")));
    void answer
      .then((reply) => opts.cluster.remote.reply(command, reply))
      .catch((err) =>
        opts.logger.warn("could not reply to a command from another instance", {
          run_id: command.runId,
          error: errorText(err),
        }),
      );
  }

  private deliver(row: RunRow, command: SteerCommand): Promise<BridgeEvent> {
    const run = this.parts.admission.get(row.id);
    return run ? this.here(run, command) : this.elsewhere(row, command);
  }

  /** The command for a run of this instance: carried out, or refused with a code. */
  private async here(run: ActiveRun, command: SteerCommand): Promise<BridgeEvent> {
    const { state } = run.life;
    if (state === "handed_over") {
      // Back in the database's queue: not running anywhere yet.
      throw new RunNotRunningError(run.id, "queued");
    }
    if (NOT_RUNNING.includes(state)) throw new RunNotRunningError(run.id, state);
    const steering = run.steering;
    if (!LIVE.includes(state)) return this.finished(run);
    if (!steering) throw new RunNotRunningError(run.id, "starting");
    if (command.kind === "input") {
      const taken = steering.input({
        inputId: command.commandId,
        text: command.text,
        attachments: command.attachments as ImageAttachment[],
      });
      // Its agent has given its last answer: no turn would answer this one.
      if (!taken) return this.finished(run);
      const event: UserInputEvent = {
        type: "user_input",
        input_id: command.commandId,
        text: command.text,
        ...(command.attachments.length > 0 ? { images: command.attachments.length } : {}),
      };
      run.log.append(event);
      return event;
    }
    const outcome = await steering.control({
      ...(command.model === undefined ? {} : { model: command.model }),
      ...(command.permissionMode === undefined
        ? {}
        : { permissionMode: command.permissionMode as PermissionMode }),
    });
    if (!LIVE.includes(run.life.state)) return this.finished(run);
    if (!outcome.ok) {
      throw outcome.reason === "refused"
        ? new ControlFailedError(outcome.error)
        : new AgentNoAnswerError(outcome.error);
    }
    const event: ControlEvent = {
      type: "control",
      control_id: command.commandId,
      ...(outcome.model === undefined ? {} : { model: outcome.model }),
      ...(outcome.permissionMode === undefined ? {} : { permission_mode: outcome.permissionMode }),
    };
    run.log.append(event);
    return event;
  }

  /** A run past its agent's last answer: refused once it is over, as a cancel is then. */
  private async finished(run: ActiveRun): Promise<never> {
    await run.life.left;
    throw new RunFinishedError(run.id, run.life.outcome ?? "unknown");
  }

  /** The command for a run this instance does not hold: its owner's, or refused from its row. */
  private async elsewhere(row: RunRow, command: SteerCommand): Promise<BridgeEvent> {
    const { opts, recorder } = this.parts;
    // Ended here, its completion not stored yet: stored first, so that it is answered finished.
    await recorder.storeNow(row.id);
    const fresh = await getRun(opts.db, row.id);
    if (!fresh || !OPEN_STATUSES.includes(fresh.status)) {
      throw new RunFinishedError(row.id, fresh?.status ?? "deleted");
    }
    const owner = fresh.instanceId;
    if (fresh.status !== "running" || !owner || owner === opts.instanceId()) {
      throw new RunNotRunningError(row.id, fresh.status === "running" ? "starting" : fresh.status);
    }
    const outcome = await opts.cluster.remote.steer(
      { ...fresh, instanceId: owner },
      command,
      OWNER_TAKES_MS,
    );
    if (outcome.ok) return outcome.event as BridgeEvent;
    if ("finished" in outcome) throw new RunFinishedError(row.id, outcome.finished);
    if ("untaken" in outcome) {
      throw new AgentNoAnswerError(
        `the instance that runs run ${row.id} did not take the request within ${OWNER_TAKES_MS / 1000} s; nothing was sent to its agent`,
      );
    }
    throw new DomainError(outcome.code as ErrorCode, outcome.message);
  }
}

/** Refuses a run whose agent cannot take it. */
function requireSteering(what: "input" | "control", agent: string): void {
  if (!pluginOf(agent)?.capabilities.steering) throw new SteeringUnsupportedError(what, agent);
}

/** A refusal on the owner, as the poster reports it to its client. */
function refusal(err: unknown): CommandReply {
  if (err instanceof DomainError) return { ok: false, code: err.code, message: err.message };
  return {
    ok: false,
    code: "internal_error",
    message: "the run's instance failed carrying it out",
  };
}
