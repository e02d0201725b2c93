import type { ImageAttachment } from "../agents/images.js";
import type { RunOptions } from "./message.js";

// What a run's message set for it alone, kept on a queued run that any instance may claim (its
// `handover` column): the claimer was not there when the message came. Everything else a run
// needs is in its row and its session's.

export interface Handover {
  options: RunOptions;
  /** A retry's place to resume the conversation at. */
  resumeAt: string | null;
}

interface Stored {
  max_turns: number | null;
  max_budget_usd: number | null;
  approvals: RunOptions["approvals"];
  permission_mode: RunOptions["permissionMode"];
  model: string | null;
  effort: RunOptions["effort"];
  attachments: { media_type: string; data: string }[];
  resume_at: string | null;
}

export function toHandover({ options, resumeAt }: Handover): Stored {
  return {
    max_turns: options.maxTurns,
    max_budget_usd: options.maxBudgetUsd,
    approvals: options.approvals,
    permission_mode: options.permissionMode,
    model: options.model,
    effort: options.effort,
    attachments: options.attachments.map((a) => ({ media_type: a.mediaType, data: a.data })),
    resume_at: resumeAt,
  };
}

/** Written by toHandover: trusted as such. */
export function fromHandover(value: unknown): Handover {
  const stored = value as Stored;
  return {
    options: {
      maxTurns: stored.max_turns,
      maxBudgetUsd: stored.max_budget_usd,
      approvals: stored.approvals,
      permissionMode: stored.permission_mode,
      model: stored.model,
      effort: stored.effort,
      attachments: stored.attachments.map((a) => ({
        mediaType: a.media_type as ImageAttachment["mediaType"],
        data: a.data,
      })),
    },
    resumeAt: stored.resume_at,
  };
}
