import type { BridgeEvent } from "../../events.js";
import { errorText, type Logger } from "../../log.js";
import { type Git, GitError } from "../../worktrees/git.js";
import { isRecord, type Json } from "../line-fields.js";

// A session's `require_clean_work_dir`: the Stop hook (hooks.ts registers it, the facts of the
// CLI's side are there) checks the agent's work dir with `git status --porcelain`, through the
// session's Git (as its tenant, in its sandbox: never read by the server itself), and sends the
// agent back while it holds changes, at most MAX_STOP_BLOCKS times a turn.

/** The callback id of the Stop hook that checks the work dir. */
export const CLEAN_WORK_DIR_CALLBACK = "clean_work_dir";

/** How many times a turn the agent is sent back; its next try at stopping is let through. */
export const MAX_STOP_BLOCKS = 2;

/** How many changed files the event and the agent are told of. */
export const MAX_LISTED_FILES = 50;

type StopCheckEvent = Extract<BridgeEvent, { type: "stop_check" }>;

/** What `git status --porcelain -z` lists: each entry's status and path. */
export function porcelainEntries(out: string): { status: string; path: string }[] {
  const parts = out.split("\0");
  const entries: { status: string; path: string }[] = [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] ?? "";
    if (part.length < 4) continue;
    const status = part.slice(0, 2);
    entries.push({ status, path: part.slice(3) });
    // A rename or copy: its source path follows as an entry of its own.
    if (status.includes("R") || status.includes("C")) i++;
  }
  return entries;
}

/** The reason the agent is sent back with. */
export function blockReason(listed: { status: string; path: string }[], more: number): string {
  const lines = listed.map((e) => `${e.status} ${e.path}`);
  if (more > 0) lines.push(`… and ${more} more`);
  return [
    "The work dir has uncommitted changes (git status --porcelain):",
    ...lines,
    "Commit them, or say why they are left uncommitted, before you finish.",
  ].join("\n");
}

/** One run's Stop hook: its answers, the events they make, and how the run stopped. */
export class StopCheck {
  private blocks = 0;
  private toldNotRepository = false;
  private readonly queued: StopCheckEvent[] = [];
  /** The last check's finding; undefined until one ran (or when git could not tell). */
  dirty: boolean | undefined;

  constructor(
    private readonly git: Git,
    private readonly cwd: string,
    private readonly logger: Logger,
  ) {}

  /** The events of the checks since the last call (written before the CLI's next line). */
  drain(): StopCheckEvent[] {
    return this.queued.splice(0);
  }

  /** The hook's output for one Stop callback (`input` is the callback's `input`). */
  async answer(input: Json): Promise<Json> {
    // stop_hook_active: false on the turn's first try at stopping, true after a block.
    if (input.stop_hook_active !== true) this.blocks = 0;
    const attempt = this.blocks + 1;
    // The CLI's cwd: the session's worktree when it made one in the work dir.
    const cwd = typeof input.cwd === "string" && this.git.holds(input.cwd) ? input.cwd : this.cwd;
    let out: string;
    try {
      out = await this.git.run(["status", "--porcelain", "-z"], cwd);
    } catch (err) {
      this.dirty = undefined;
      if (err instanceof GitError && /not a git repository/i.test(err.stderr)) {
        if (!this.toldNotRepository) {
          this.toldNotRepository = true;
          this.queued.push(this.event(false, [], 0, false, attempt, { not_repository: true }));
        }
        return {};
      }
      this.logger.warn("could not check the work dir for a clean stop", { error: errorText(err) });
      this.queued.push(this.event(false, [], 0, false, attempt, { error: errorText(err) }));
      return {};
    }
    const entries = porcelainEntries(out);
    const listed = entries.slice(0, MAX_LISTED_FILES);
    const more = entries.length - listed.length;
    this.dirty = entries.length > 0;
    const blocked = this.dirty && this.blocks < MAX_STOP_BLOCKS;
    const files = listed.map((e) => e.path);
    this.queued.push(this.event(this.dirty, files, more, blocked, attempt));
    if (!blocked) return {};
    this.blocks++;
    return { decision: "block", reason: blockReason(listed, more) };
  }

  private event(
    dirty: boolean,
    files: string[],
    more: number,
    blocked: boolean,
    attempt: number,
    extra: Partial<StopCheckEvent> = {},
  ): StopCheckEvent {
    return {
      type: "stop_check",
      dirty,
      files,
      ...(more > 0 ? { more_files: more } : {}),
      blocked,
      attempt,
      ...extra,
    };
  }
}

/** Whether a control request is the Stop hook's callback. */
export function isStopCallback(request: Json): boolean {
  return request.subtype === "hook_callback" && request.callback_id === CLEAN_WORK_DIR_CALLBACK;
}

/** The callback's `input`. */
export function callbackInput(request: Json): Json {
  return isRecord(request.input) ? request.input : {};
}

/** The control_response line (with `\n`) that answers the callback `requestId` with `output`. */
export function stopAnswerLine(requestId: string, output: Json): string {
  const line = {
    type: "control_response",
    response: { subtype: "success", request_id: requestId, response: output },
  };
  return `${JSON.stringify(line)}\n`;
}
