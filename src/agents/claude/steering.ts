import type { CompletionEvent } from "../../events.js";
import type { ControlOutcome, RunControl, RunInput, RunSteering } from "../agent.js";
import { isRecord, type Json } from "../line-fields.js";
import { userMessageLine } from "./command.js";

// Steering a live Claude Code run: a client's input goes to the CLI's stdin as one more
// stream-json user message, and a switch of model or permission mode as the CLI's `set_model` /
// `set_permission_mode` control request. Observed with Claude Code 2.1.328 against the mock
// Messages API (test/agents/claude/steering.real.test.ts holds the run that shows it):
//
// - A user message written while a turn runs is queued and answered after that turn, as a new
//   API request that ends in a `result` line of its own. Several written during one turn become
//   one turn: one request (their texts in one user message), one result. So a run does not end at
//   its first result: it ends at the result after which no input it wrote waits for a turn.
// - With `--replay-user-messages` the CLI reports each user message it reads (`uuid` = the one
//   the message carries) as `command_lifecycle` lines: `queued`, `started` (taken into a turn,
//   before that turn's result), then `completed` after the result, or `cancelled`; and it echoes
//   each user message (`isReplay: true`) as it takes it. Without the flag it prints neither.
// - Each result covers its own turn: `usage`, `num_turns`, `duration_ms` and `result` (the text)
//   are that turn's, `model_usage_since_last_result` (whose costs runCost adds up) too, while
//   `total_cost_usd`, `modelUsage` and `duration_api_ms` run on over the process. `result_index`
//   counts the results (0, 1, …); the second turn's `system/init` line comes again.
// - `interrupt` ends the turn in progress (its result `error_during_execution`) and answers with
//   `still_queued: [uuid…]`; the CLI then runs the queued input all the same, in another turn.
//   An interrupted run here ends at its interrupt's result.
// - `set_model` is answered at once, while a request is in flight, `{"model": <resolved name>}`
//   (an alias resolved: `claude-opus-4-1` came back `claude-opus-5-5`), and the next API request
//   names that model; the CLI also echoes `<local-command-stdout>Set model to …` as a replayed
//   user line, its own note, not the agent's text. `set_permission_mode` is answered
//   `{"mode": M}`, or with an error (`bypassPermissions` in a CLI not started with
//   `--dangerously-skip-permissions`: `error_code: "bypass_not_launched"`).

/** How long the CLI has to answer a control request: it answers at once, even mid-request. */
export const CONTROL_ANSWER_MS = 10_000;

const MODEL_NOTE = /^<local-command-stdout>Set model to /;

type Pending = (outcome: ControlOutcome) => void;

/** One run's steering: what the CLI was sent, what it took, and the results held meanwhile. */
export class ClaudeSteering implements RunSteering {
  private write: ((text: string) => void) | undefined;
  private closed = false;
  /** Inputs written that the CLI has not taken into a turn yet. */
  private readonly waiting = new Set<string>();
  private readonly pending = new Map<string, Pending>();
  private requests = 0;
  /** A set_model was sent: the CLI echoes it ("Set model to …"), before its answer. */
  private modelSet = false;
  /** The completions of the turns before the last (each from its result). */
  private readonly held: CompletionEvent[] = [];

  constructor(
    private readonly runKey: string,
    private readonly answerMs = CONTROL_ANSWER_MS,
  ) {}

  /** The CLI runs: from now on input can be written. */
  attach(write: (text: string) => void): void {
    this.write = write;
  }

  input(input: RunInput): boolean {
    if (this.closed || !this.write) return false;
    this.waiting.add(input.inputId);
    this.write(userMessageLine(input.text, input.attachments, input.inputId));
    return true;
  }

  async control(change: RunControl): Promise<ControlOutcome> {
    const answers: Promise<ControlOutcome>[] = [];
    if (change.model !== undefined) {
      answers.push(this.request({ subtype: "set_model", model: change.model }));
    }
    if (change.permissionMode !== undefined) {
      // The bridge's name of the flag's mode is the CLI's `bypassPermissions`.
      const mode =
        change.permissionMode === "dangerously-skip-permissions"
          ? "bypassPermissions"
          : change.permissionMode;
      answers.push(this.request({ subtype: "set_permission_mode", mode }));
    }
    const outcomes = await Promise.all(answers);
    const failed = outcomes.find((o) => !o.ok);
    if (failed) return failed;
    return Object.assign({ ok: true }, ...outcomes) as ControlOutcome;
  }

  /**
   * Whether the line is the CLI's own account of the steering (a command's lifecycle, a control
   * answer, an echo of a message the bridge wrote or of a model switch), handled here: it is
   * nothing the mapper shows.
   */
  consume(line: Json): boolean {
    if (line.type === "command_lifecycle") {
      const id = typeof line.command_uuid === "string" ? line.command_uuid : "";
      if (line.state !== "queued") this.waiting.delete(id);
      return true;
    }
    if (line.type === "control_response") {
      this.answered(line.response);
      return true;
    }
    if (line.type === "user" && line.isReplay === true && isRecord(line.message)) {
      const { content } = line.message;
      // The prompt and the inputs, as the bridge wrote them: the log has them already.
      if (Array.isArray(content)) return true;
      if (typeof content === "string" && this.modelSet && MODEL_NOTE.test(content)) return true;
    }
    return false;
  }

  /**
   * At a result's completion: whether the run ends with it. It does unless input the CLI has not
   * taken yet waits for a turn of its own, the turn succeeded, and the run was not asked to end
   * its turn (an interrupt ends the run at its result, whatever is queued). Ending, the run takes
   * no more input, so that none is written that no turn would answer.
   */
  endsAt(completion: CompletionEvent, interrupted: boolean): boolean {
    if (!interrupted && completion.status === "succeeded" && this.waiting.size > 0) {
      this.held.push(completion);
      return false;
    }
    this.close();
    return true;
  }

  /** The run's completion: the last turn's, with what the earlier turns spent added. */
  finish(last: CompletionEvent): CompletionEvent {
    this.close();
    return combineTurns(this.held, last);
  }

  /** No more input: what waits for an answer is told the CLI is gone. */
  close(): void {
    this.closed = true;
    for (const [id, settle] of this.pending) {
      this.pending.delete(id);
      settle({ ok: false, reason: "no_answer", error: "the run ended before the agent answered" });
    }
  }

  private request(request: Record<string, unknown>): Promise<ControlOutcome> {
    if (this.closed || !this.write) {
      return Promise.resolve({
        ok: false,
        reason: "refused",
        error: "the agent takes no more requests: the run is ending",
      });
    }
    const id = `control-${++this.requests}-${this.runKey}`;
    const write = this.write;
    if (request.subtype === "set_model") this.modelSet = true;
    return new Promise<ControlOutcome>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve({
          ok: false,
          reason: "no_answer",
          error: `the agent did not answer within ${this.answerMs / 1000} s`,
        });
      }, this.answerMs);
      timer.unref();
      this.pending.set(id, (outcome) => {
        clearTimeout(timer);
        resolve(outcome);
      });
      write(`${JSON.stringify({ type: "control_request", request_id: id, request })}\n`);
    });
  }

  private answered(response: unknown): void {
    if (!isRecord(response) || typeof response.request_id !== "string") return;
    const settle = this.pending.get(response.request_id);
    if (!settle) return;
    this.pending.delete(response.request_id);
    if (response.subtype !== "success") {
      const error = typeof response.error === "string" ? response.error : "the agent refused";
      settle({ ok: false, reason: "refused", error });
      return;
    }
    const body = isRecord(response.response) ? response.response : {};
    settle({
      ok: true,
      ...(typeof body.model === "string" ? { model: body.model } : {}),
      ...(typeof body.mode === "string" ? { permissionMode: body.mode } : {}),
    });
  }
}

/**
 * A run's completion from its turns' (each its own result's, in order): the last one's status,
 * text and resume point, with the tokens, turns, time and cost of all of them. The API time is
 * the CLI's running total, so the last turn's is all of it; a cost one turn does not know leaves
 * the run's unknown.
 */
export function combineTurns(held: readonly CompletionEvent[], last: CompletionEvent) {
  if (held.length === 0) return last;
  const all = [...held, last];
  const sum = (f: (c: CompletionEvent) => number) => all.reduce((n, c) => n + f(c), 0);
  const costs = all.map((c) => c.cost_usd);
  return {
    ...last,
    cost_usd: costs.some((c) => c === null) ? null : sum((c) => c.cost_usd ?? 0),
    duration_ms: sum((c) => c.duration_ms),
    usage: {
      input_tokens: sum((c) => c.usage.input_tokens),
      output_tokens: sum((c) => c.usage.output_tokens),
      cache_read_tokens: sum((c) => c.usage.cache_read_tokens),
      cache_creation_tokens: sum((c) => c.usage.cache_creation_tokens),
      num_turns: sum((c) => c.usage.num_turns),
      duration_api_ms: Math.max(...all.map((c) => c.usage.duration_api_ms)),
    },
  } satisfies CompletionEvent;
}
