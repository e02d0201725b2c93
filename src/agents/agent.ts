import type { z } from "@hono/zod-openapi";
import type { BridgeEvent, UsageBefore, UserQuestion } from "../events.js";
import type { Logger } from "../log.js";
import type { AgentFiles } from "../process/agent-files.js";
import type { AgentIdentity } from "../process/tenant-homes.js";
import type { PermissionMode, SessionSettings } from "../session-settings.js";
import type { RunExchange } from "../telemetry/tracing.js";
import type { RunToolRules } from "../tool-rules.js";
import type { Git } from "../worktrees/git.js";
import type { ImageAttachment } from "./images.js";

// What an agent back-end is to the rest of the bridge. A back-end turns one message into one run
// of its CLI and yields only generic BridgeEvents, ending with exactly one `completion`; the run
// manager, the log, the routes and the clients need no change for a new one. Process supervision
// (the spawner, process groups, timeouts, cancel) is shared: src/process/driver/.

/** One message's run, as the run manager hands it to a back-end. */
export interface AgentRunRequest {
  /** The bridge's session id. */
  sessionId: string;
  /** The back-end's own session (thread) id, as it reported it on an earlier run; null before. */
  agentSessionId: string | null;
  /** Whether an earlier run of the session was started, so its conversation may exist. */
  resume: boolean;
  /**
   * Set for a retry (`POST /v1/runs/{id}/retry`): the agent's message to continue the conversation
   * from, leaving out what came after it. Only for a back-end that `resumesAtMessage`.
   */
  resumeAt: string | null;
  /**
   * Set on a forked session (POST /v1/sessions/{id}/fork): the conversation it branched from, which
   * a run that starts the session (`resume` false) continues from that message, as the session's
   * own. Only for a back-end whose plugin can `fork`.
   */
  forkOf?: ForkOf;
  prompt: string;
  /** Images sent with the prompt. */
  attachments: readonly ImageAttachment[];
  /** The session's settings, with the message's own caps in place of the session's. */
  settings: SessionSettings;
  /** The message's system prompt, added to the session's. */
  messageSystemPrompt: string | null;
  /**
   * The JSON Schema the agent's answer must match (src/output-schema.ts), or null. The back-end
   * asks its CLI for an answer of that shape and puts what the agent answered in its completion's
   * `structured_output` (left out when it gave none); the run layer checks it against the schema.
   */
  outputSchema: Record<string, unknown> | null;
  /**
   * What the session's earlier runs used (a back-end that reports running totals subtracts it);
   * undefined once the session is gone.
   */
  usageBefore: () => Promise<UsageBefore | undefined>;
  /** USD the run may spend, when its key has a budget (see `runBudget`). */
  maxBudgetUsd: number | null;
  cwd: string;
  /** Set: the CLI runs as its tenant's user, in its tenant's HOME (src/process/tenant-homes.ts). */
  identity?: AgentIdentity;
  /** Git in `cwd` as the session's tenant: for a back-end that makes the session's worktree. */
  git: Git;
  /** Tool rules allowed for the rest of the session (answers with `scope: "session"`). */
  allowedTools: readonly string[];
  /**
   * The rules of its tool uses (src/tool-rules.ts): its key's, then its session's. A back-end
   * that cannot enforce them refuses a run that has any.
   */
  toolRules: RunToolRules;
}

/** A forked session's starting point: the agent's own session, and the message to go on after. */
export interface ForkOf {
  agentSessionId: string;
  resumeAt: string;
}

/** What the CLI may say of a permission request, passed on as it says it. */
export const PERMISSION_DETAILS = [
  "blocked_path",
  "decision_reason",
  "title",
  "description",
] as const;

/** A tool the agent asks to use (or a question it asks the user), waiting for an answer. */
export interface PermissionRequest {
  /** The CLI's id of the request, unique within the run. */
  requestId: string;
  toolName: string;
  toolUseId: string | null;
  input: Record<string, unknown>;
  /** The CLI's own suggestions of rules that would allow it (`permission_suggestions`). */
  suggestions: unknown[];
  /** What the CLI says of it, when it does: blocked_path, decision_reason, title, description. */
  details: Partial<Record<(typeof PERMISSION_DETAILS)[number], string>>;
  /** The questions it asks the user (a question tool's request); empty for any other tool. */
  questions: UserQuestion[];
  /** The subagent's call it comes from (its Task tool use), when a subagent asks. */
  parentToolUseId?: string;
}

/** The answer to a PermissionRequest. */
export type PermissionAnswer =
  | {
      behavior: "allow";
      /** The tool's input as it runs; absent: as asked. */
      updatedInput?: Record<string, unknown>;
      /** Rules the CLI adds for the rest of its session (the CLI's `updatedPermissions`). */
      updatedPermissions?: unknown[];
    }
  | {
      behavior: "deny";
      /** What the model is told; absent: the back-end's own words for a refusal nobody gave. */
      message?: string;
      /** Also end the turn. */
      interrupt?: boolean;
    };

/** A client's message to a live run (`POST /v1/runs/{id}/input`). */
export interface RunInput {
  inputId: string;
  text: string;
  attachments: readonly ImageAttachment[];
}

/** A client's switch of a live run's model or permission mode (`POST /v1/runs/{id}/control`). */
export interface RunControl {
  model?: string;
  permissionMode?: PermissionMode;
}

/** What the CLI answered to a RunControl. */
export type ControlOutcome =
  | { ok: true; model?: string; permissionMode?: string }
  | { ok: false; reason: "refused" | "no_answer"; error: string };

/**
 * A live run's CLI as a client steers it: set by a back-end whose CLI takes input while it runs
 * (RunContext.steer), from its start until its last answer.
 */
export interface RunSteering {
  /**
   * Writes the input to the CLI, which answers it after the turn in progress, in this run; false
   * when it takes no more (its last answer is given: the run is ending), and nothing was written.
   */
  input(input: RunInput): boolean;
  /** Asks the CLI to switch; resolves with its answer (or that none came within a bound). */
  control(change: RunControl): Promise<ControlOutcome>;
}

export interface RunContext {
  logger: Logger;
  /** Called once the CLI runs, with its process group id (to clean up after a crash). */
  onSpawn: (pgid: number) => void;
  /**
   * The bridge's run id: the CLI's own telemetry gets it as a resource attribute, and the model
   * gateway meters the run's calls against it.
   */
  runId: string;
  /** Sees each line the CLI writes on stdout, as framed (AGENT_BRIDGE_DEBUG_CAPTURE). */
  onRawLine?: (line: string) => void;
  /** Sees each line both ways, with the events of each (AGENT_BRIDGE_TRACE_EVENTS). */
  exchange?: RunExchange;
  /** Answers a permission request: at once by policy, or once someone (or the timeout) does. */
  approve: (request: PermissionRequest) => Promise<PermissionAnswer>;
  /** The CLI withdrew the request: it wants no answer any more. */
  withdraw: (requestId: string) => void;
  /** Whether a request is waiting for an answer (the CLI's silence is then not a stall). */
  awaiting: () => boolean;
  /**
   * A client answers the agent's questions (`approvals: "api"`): the run layer streams each as a
   * `user_question` with its request's id (PermissionRequest.questions), so the back-end's own
   * events leave them out.
   */
  answersQuestions: boolean;
  /**
   * Aborted when a client asks the run to end its turn (`POST /v1/runs/{id}/interrupt`): a
   * back-end that can asks its CLI to, so that the turn ends with its usage counted and its
   * conversation intact; the run's own signal stops one that does not.
   */
  interruption?: AbortSignal;
  /**
   * Called by a back-end whose CLI takes input while it runs: with its steering once the CLI
   * runs, and with null once it takes no more.
   */
  steer?: (steering: RunSteering | null) => void;
}

/** What `/readyz` shows of a back-end. */
export interface AgentReadiness {
  bin: string;
  version: string;
  /** Where the CLI's credentials come from (names of variables or files, never values). */
  credentials: string;
}

/**
 * Where the CLI keeps a session's transcript, the file a resume reads: stored in the database after
 * each run, and written back before a resume on an instance whose disk lacks it (or holds an older
 * copy), so that a session's next message can run on any instance.
 */
export interface TranscriptLocation {
  /** The directory the CLI keeps its state in, for this run's environment. */
  root: string;
  /** File work there, done as the CLI's user: the agent can change every path in it. */
  files: AgentFiles;
  /** The session's transcript, as a path relative to `root`, when it exists. */
  find(agentSessionId: string): Promise<string | undefined>;
  /**
   * Whether the session's transcript is the file found at `relative` before, for good: then it is
   * not looked for again (a listing less after each run). Absent: it is looked for every time.
   */
  stays?(agentSessionId: string, relative: string): boolean;
}

export interface AgentBackend {
  /** Its plugin's name (src/agents/registry.ts). */
  readonly name: string;
  /**
   * The values of the generic session settings this back-end can honour; a session asking for
   * another is refused (400) with the message, rather than run without it.
   */
  readonly settings: z.ZodType<SessionSettings>;
  /**
   * Can run a message from an earlier message of the conversation (`AgentRunRequest.resumeAt`),
   * which a retry needs.
   */
  readonly resumesAtMessage: boolean;
  /**
   * Ends its CLI's turn when `RunContext.interruption` is aborted, with the turn's usage counted
   * and its conversation intact; a cancel then asks it first, and kills it only when it does not.
   */
  readonly interruptible: boolean;
  /** Where the CLI keeps its transcripts: in its HOME, or the tenant's of `identity`. */
  transcripts(identity: AgentIdentity | undefined): TranscriptLocation;
  /** The CLI runs and has credentials; rejects with a message an operator can act on. */
  ready(): Promise<AgentReadiness>;
  run(
    request: AgentRunRequest,
    context: RunContext,
    signal: AbortSignal,
  ): AsyncGenerator<BridgeEvent[]>;
}

/** The message and the session's system prompts, in that order of precedence, joined. */
export function joinSystemPrompts(request: AgentRunRequest): string | null {
  const parts = [request.settings.systemPrompt, request.messageSystemPrompt].filter(
    (p): p is string => Boolean(p),
  );
  return parts.length ? parts.join("\n\n") : null;
}

/**
 * What the run may spend: the smaller of its own cap (`settings.maxBudgetUsd`) and what its key's
 * budget has left, and whose it is, since a run stopped by its own cap ends `max_budget` and one
 * stopped by its key's ends `budget_exhausted`. Null when neither caps it.
 */
export function runBudget(request: AgentRunRequest): { usd: number; own: boolean } | null {
  const own = request.settings.maxBudgetUsd;
  const key = request.maxBudgetUsd;
  if (own === null) return key === null ? null : { usd: key, own: false };
  return key !== null && key < own ? { usd: key, own: false } : { usd: own, own: true };
}
