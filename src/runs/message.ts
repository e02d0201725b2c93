import type { ImageAttachment } from "../agents/images.js";
import type { Approvals, Effort, PermissionMode, SessionSettings } from "../session-settings.js";
import type { NewReply } from "../store/replies.js";
import type { ChangeCheckout } from "../worktrees/change.js";

/**
 * What a message sets for its own run alone, over its session's settings. Held with the run in
 * memory, never stored: images are too big for the run's row (a run that does not start in this
 * process never runs at all: recovery closes it).
 */
export interface RunOptions {
  maxTurns: number | null;
  maxBudgetUsd: number | null;
  /** Who answers the run's permission requests; null: as its session says. */
  approvals: Approvals | null;
  /** The run's permission mode, model and effort; null: its session's. */
  permissionMode: PermissionMode | null;
  model: string | null;
  effort: Effort | null;
  attachments: readonly ImageAttachment[];
}

export const NO_RUN_OPTIONS: RunOptions = {
  maxTurns: null,
  maxBudgetUsd: null,
  approvals: null,
  permissionMode: null,
  model: null,
  effort: null,
  attachments: [],
};

/** The session's settings with what the message sets for its own run in their place. */
export function runSettings(session: SessionSettings, options: RunOptions): SessionSettings {
  return {
    ...session,
    maxTurns: options.maxTurns ?? session.maxTurns,
    maxBudgetUsd: options.maxBudgetUsd ?? session.maxBudgetUsd,
    approvals: options.approvals ?? session.approvals,
    permissionMode: options.permissionMode ?? session.permissionMode,
    model: options.model ?? session.model,
    effort: options.effort ?? session.effort,
  };
}

/** What a route (or a webhook delivery, or a schedule) asks the run manager to run. */
export interface Message {
  text: string;
  systemPrompt: string | null;
  trigger: string;
  idempotencyKey: string | null;
  /** Absent: the session's settings alone. */
  options?: RunOptions;
  /**
   * When the session has an active run: wait in line for the session (the run is `waiting`)
   * rather than be refused with SessionBusyError. Webhook deliveries wait; messages do not.
   */
  waitForSession?: boolean;
  /**
   * A retry of this run (`POST /v1/runs/{id}/retry`): it must be its session's newest run, and
   * finished; the new run resumes the conversation at the last message a run before it confirmed.
   */
  retryOf?: string;
  /**
   * The JSON Schema the agent's answer must match (src/output-schema.ts), kept on the run's row:
   * whichever instance runs it, a retry of it and its callback see it. Absent: none.
   */
  outputSchema?: Record<string, unknown> | null;
  /** The pull (merge) request whose head the run works on (a hook's `checkout`). */
  checkout?: ChangeCheckout | null;
  /**
   * Where the run's sandbox may connect, besides what its key's egress list allows (both must);
   * stored on the run, so that whichever instance runs it holds it. Absent: the key's list alone.
   */
  egress?: string[] | null;
  /** Where to POST the run's outcome once it completes (an outbox row written with the run). */
  callback?: { url: string; secret: string } | null;
  /** What the run posts on the forge its delivery came from (outbox rows written with the run). */
  replies?: readonly NewReply[];
}
