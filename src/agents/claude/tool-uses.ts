import type { BridgeEvent, UserQuestion } from "../../events.js";
import type { ToolKind } from "../../tool-calls.js";
import { cut, isRecord } from "../line-fields.js";
import { toolStatusMessage, unfinishedOutcome } from "../tool-payloads.js";
import type { SDKContentBlock, SDKToolResultBlock, SDKUserMessage } from "./sdk-messages.js";
import {
  ASK_USER_QUESTION,
  normalizeToolCall,
  parseQuestions,
  toolKind,
  toolOutcome,
} from "./tools.js";

// The tool calls of a run, from their tool_use blocks to their results. A `status` as soon as a
// tool_use block starts (from the stream, else from the assistant line); AskUserQuestion with
// questions is a `user_question` instead, taken from the assistant line where its input is
// complete. Each is emitted once per tool_use id. With the whole block comes the `tool_call`
// (normalized, see tools.ts); its `tool_result` brings a `tool_update`, and at the run's end every
// call still open is closed by one.

type UserQuestionEvent = Extract<BridgeEvent, { type: "user_question" }>;
type ToolUseBlock = Extract<SDKContentBlock, { type: "tool_use" }>;

export function withParent<T extends object>(event: T, parent: string | null): T {
  return parent === null ? event : { ...event, parent_tool_use_id: parent };
}

/** A tool_result's content as one string: text blocks joined, other blocks named. */
function toolResultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content))
    return content === undefined || content === null ? "" : JSON.stringify(content);
  const parts: string[] = [];
  for (const block of content) {
    if (!isRecord(block)) continue;
    if (block.type === "text" && typeof block.text === "string") parts.push(block.text);
    else if (typeof block.type === "string") parts.push(`[${block.type}]`);
  }
  return parts.join("\n");
}

export class ToolUses {
  private readonly statusSent = new Set<string>();
  private readonly toolCallSent = new Set<string>();
  /** Tool calls without a result yet: their tool, kind and scope, to close them at the end. */
  private readonly openCalls = new Map<
    string,
    { name: string; kind: ToolKind; parent: string | null }
  >();
  private readonly questionSent = new Set<string>();
  /** Where the CLI runs shell commands: its init line's `cwd`, for a `shell_exec` call's work_dir. */
  private workDir: string | undefined;
  /**
   * Questions left to the run layer (questionsByRequest) whose permission request has not come:
   * one the CLI settles without asking (its permission mode) is emitted at its tool_result.
   */
  private readonly questionsHeld = new Map<
    string,
    { questions: UserQuestion[]; parent: string | null }
  >();

  constructor(
    private readonly maxToolResultChars: number,
    private readonly questionsByRequest: boolean,
  ) {}

  /** The CLI's work dir, from its init line. */
  setWorkDir(cwd: string | undefined): void {
    this.workDir = cwd;
  }

  /** A tool use started: its `status`, once. */
  status(id: string, name: string, parent: string | null): BridgeEvent[] {
    if (this.statusSent.has(id)) return [];
    this.statusSent.add(id);
    return [
      withParent(
        { type: "status", message: toolStatusMessage(name), tool_name: name, tool_use_id: id },
        parent,
      ),
    ];
  }

  /** A whole tool_use block: its status or question, and its `tool_call`, each once. */
  block(block: ToolUseBlock, parent: string | null): BridgeEvent[] {
    const { id, name } = block;
    if (!id || !name) return [];
    const events: BridgeEvent[] = [];
    const questions = name === ASK_USER_QUESTION ? parseQuestions(block.input) : [];
    if (questions.length > 0) {
      if (!this.questionSent.has(id)) {
        this.questionSent.add(id);
        this.statusSent.add(id);
        if (this.questionsByRequest) this.questionsHeld.set(id, { questions, parent });
        else events.push(withParent({ type: "user_question", tool_use_id: id, questions }, parent));
      }
    } else {
      events.push(...this.status(id, name, parent));
    }
    if (!this.toolCallSent.has(id)) {
      this.toolCallSent.add(id);
      const kind = toolKind(name);
      this.openCalls.set(id, { name, kind, parent });
      events.push(
        withParent(
          {
            type: "tool_call",
            tool_use_id: id,
            tool_name: name,
            kind,
            normalized: normalizeToolCall(name, block.input, this.maxToolResultChars, this.workDir),
            input: block.input ?? {},
          },
          parent,
        ),
      );
    }
    return events;
  }

  /** A user line's tool results: `tool_result` and the call's `tool_update` for each. */
  results(line: SDKUserMessage, results: SDKToolResultBlock[]): BridgeEvent[] {
    const parent = line.parent_tool_use_id;
    // The CLI's structured result (a command's stdout and stderr) belongs to the line's one result.
    const structured = results.length === 1 ? line.tool_use_result : undefined;
    return results.flatMap(({ tool_use_id: id, is_error: isError, content: raw }) => {
      const text = toolResultText(raw);
      const { content, truncated } = cut(text, this.maxToolResultChars);
      const events: BridgeEvent[] = [];
      const held = this.questionsHeld.get(id);
      if (held) {
        this.questionsHeld.delete(id);
        events.push(
          withParent(
            { type: "user_question", tool_use_id: id, questions: held.questions },
            held.parent,
          ),
        );
      }
      events.push(
        withParent(
          { type: "tool_result", tool_use_id: id, is_error: isError, content, truncated },
          parent,
        ),
      );
      const call = this.openCalls.get(id);
      if (call !== undefined) {
        this.openCalls.delete(id);
        const normalized = toolOutcome(
          call.name,
          { isError, text, structured },
          this.maxToolResultChars,
        );
        events.push(
          withParent(
            {
              type: "tool_update",
              tool_use_id: id,
              status: isError ? "error" : "complete",
              normalized,
            },
            call.parent,
          ),
        );
      }
      return events;
    });
  }

  /** A `tool_update` for each tool call the run ends without a result for (as complete). */
  closeOpen(): BridgeEvent[] {
    const events = [...this.openCalls].map(([id, call]) =>
      withParent(
        {
          type: "tool_update" as const,
          tool_use_id: id,
          status: "complete" as const,
          normalized: unfinishedOutcome(call.kind),
        },
        call.parent,
      ),
    );
    this.openCalls.clear();
    return events;
  }

  /** A `user_question` for a permission request, unless its tool_use block has given it. */
  questionFromControl(toolUseId: string, questions: UserQuestion[]): UserQuestionEvent | undefined {
    if (this.questionSent.has(toolUseId)) return undefined;
    this.questionSent.add(toolUseId);
    this.statusSent.add(toolUseId);
    return { type: "user_question", tool_use_id: toolUseId, questions };
  }

  /** The run layer streams this question itself: the subagent's call it comes from, if any. */
  questionRequested(toolUseId: string): string | null {
    this.questionSent.add(toolUseId);
    this.statusSent.add(toolUseId);
    const held = this.questionsHeld.get(toolUseId);
    this.questionsHeld.delete(toolUseId);
    return held?.parent ?? null;
  }
}
