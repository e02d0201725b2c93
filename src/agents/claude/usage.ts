import { noUsage } from "../../completion-event.js";
import type { BridgeEvent, Usage } from "../../events.js";
import type { SDKModelUsage, SDKResultMessage, SDKUsage } from "./sdk-messages.js";

// What a Claude Code run spent, and how full the model's context is, from what the CLI reports:
// each API message's usage as it streams (message_start, the assistant lines, message_delta),
// and the run's totals in its `result` line.

type ContextWindowEvent = Extract<BridgeEvent, { type: "context_window" }>;

interface MessageUsage {
  input: number;
  cacheRead: number;
  cacheCreation: number;
  output: number;
  /** Of the main thread (not a subagent). */
  main: boolean;
}

/**
 * The usage the CLI reported for each API message of the run, by message id. The counts only
 * grow: `message_start` and the assistant lines (which repeat it) carry the input and an output of
 * 1, `message_delta` the final output. It is what a run that ends without a `result` spent.
 */
export class UsageLedger {
  private readonly messages = new Map<string, MessageUsage>();

  report(messageId: string, usage: SDKUsage | undefined, main: boolean): void {
    if (usage === undefined) return;
    const known = this.messages.get(messageId);
    this.messages.set(messageId, {
      input: Math.max(known?.input ?? 0, usage.input_tokens),
      cacheRead: Math.max(known?.cacheRead ?? 0, usage.cache_read_input_tokens),
      cacheCreation: Math.max(known?.cacheCreation ?? 0, usage.cache_creation_input_tokens),
      output: Math.max(known?.output ?? 0, usage.output_tokens),
      main: main || (known?.main ?? false),
    });
  }

  /** The tokens of the conversation as of the message: its input, cached or not, and output. */
  contextUsed(messageId: string): number | undefined {
    const m = this.messages.get(messageId);
    return m && m.input + m.cacheRead + m.cacheCreation + m.output;
  }

  /** Every message's usage added up (num_turns: the main thread's messages); no API time. */
  total(): Usage {
    const usage = noUsage();
    for (const m of this.messages.values()) {
      usage.input_tokens += m.input;
      usage.output_tokens += m.output;
      usage.cache_read_tokens += m.cacheRead;
      usage.cache_creation_tokens += m.cacheCreation;
      if (m.main) usage.num_turns++;
    }
    return usage;
  }
}

/**
 * A model's context window as documented, for when the CLI has not reported it yet: 200 000
 * tokens for Claude models, 1 000 000 for those run with the 1M window (`…[1m]`).
 */
export function documentedWindow(model: string | undefined): number {
  return model?.includes("[1m]") ? 1_000_000 : 200_000;
}

/** The context window of `model` as the result's `modelUsage` reports it (else the largest one). */
export function reportedWindow(
  modelUsage: Record<string, SDKModelUsage> | undefined,
  model: string | undefined,
): number | undefined {
  if (modelUsage === undefined) return undefined;
  const own = model !== undefined ? (modelUsage[model]?.contextWindow ?? 0) : 0;
  if (own > 0) return own;
  const largest = Math.max(0, ...Object.values(modelUsage).map((m) => m.contextWindow));
  return largest > 0 ? largest : undefined;
}

export function contextWindow(used: number, size: number): ContextWindowEvent {
  return {
    type: "context_window",
    used,
    size,
    remaining: Math.max(0, size - used),
    efficiency: size > 0 ? used / size : 0,
  };
}

/**
 * This run's cost. On --resume the CLI restores the session's cost, so `total_cost_usd` is the
 * session's running total; `model_usage_since_last_result` holds this run's usage per model.
 */
export function runCost(line: SDKResultMessage): number {
  const since = line.model_usage_since_last_result;
  if (since !== undefined) {
    let sum: number | undefined;
    for (const model in since) {
      const cost = since[model]?.costUSD;
      if (cost !== undefined) sum = (sum ?? 0) + cost;
    }
    if (sum !== undefined) return sum;
  }
  const total = line.total_cost_usd ?? line.cost_usd;
  return total !== undefined && Number.isFinite(total) ? total : 0;
}

/**
 * A resumed run's own API time from the CLI's running total and what the session's earlier runs
 * took. A total below theirs is not the same history (a worktree's conversation started afresh,
 * a transcript the CLI lost): then it is all this run's.
 */
export function ownApiMs(reported: number, earlier: number): number {
  return reported >= earlier ? reported - earlier : reported;
}
