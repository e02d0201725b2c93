import { createInterface } from "node:readline";
import type { AnswerPermission, StreamedEvent } from "../client/index.js";
import type { Output } from "./render.js";

// `send --approvals ask`: each permission request of the run is put to the person at the
// terminal, and their answer posted back. A tool: y(es), n(o), or a(lways), which allows the same
// for the rest of the session. A question (AskUserQuestion): the number of an option, several
// separated by commas where the question takes several, or an answer in their own words.

type PermissionRequest = Extract<StreamedEvent, { type: "permission_request" }>;

interface Question {
  question: string;
  options: { label: string; description?: string }[];
  multiSelect?: boolean;
}

export class TerminalApprover {
  private readonly lines: AsyncIterator<string>;
  private readonly close: () => void;

  constructor(
    input: NodeJS.ReadableStream,
    private readonly out: Output,
  ) {
    const reader = createInterface({ input, terminal: false });
    this.lines = reader[Symbol.asyncIterator]();
    this.close = () => reader.close();
  }

  /** The person's answer to the request; a denial once their input has ended. */
  async answer(request: PermissionRequest): Promise<AnswerPermission> {
    const questions = questionsOf(request);
    if (questions) return this.answerQuestions(questions);
    const reply = await this.ask(`Allow ${request.tool_name}${detail(request.input)}? [y/n/a] `);
    if (reply === undefined) return { decision: "deny", message: "Nobody was there to answer." };
    const key = reply.trim().toLowerCase();
    if (key.startsWith("a")) return { decision: "allow", scope: "session" };
    if (key.startsWith("y")) return { decision: "allow" };
    return { decision: "deny" };
  }

  dispose(): void {
    this.close();
  }

  private async answerQuestions(questions: Question[]): Promise<AnswerPermission> {
    const answers: Record<string, string | string[]> = {};
    for (const q of questions) {
      this.out.stderr.write(`${q.question}\n`);
      q.options.forEach((o, i) => {
        this.out.stderr.write(
          `  ${i + 1}. ${o.label}${o.description ? ` (${o.description})` : ""}\n`,
        );
      });
      const reply = await this.ask(
        q.multiSelect ? "numbers, or your answer: " : "number, or your answer: ",
      );
      if (reply === undefined) return { decision: "deny", message: "Nobody was there to answer." };
      const picked = reply
        .split(",")
        .map((part) => q.options[Number(part.trim()) - 1]?.label)
        .filter((label): label is string => label !== undefined);
      const chosen = picked.length > 0 && /^[\d,\s]+$/.test(reply) ? picked : [reply.trim()];
      answers[q.question] = q.multiSelect ? chosen : (chosen[0] ?? "");
    }
    return { answers };
  }

  private async ask(prompt: string): Promise<string | undefined> {
    this.out.stderr.write(prompt);
    const next = await this.lines.next();
    return next.done ? undefined : next.value;
  }
}

function questionsOf(request: PermissionRequest): Question[] | undefined {
  if (request.tool_name !== "AskUserQuestion") return undefined;
  const questions = (request.input as { questions?: unknown }).questions;
  return Array.isArray(questions) ? (questions as Question[]) : undefined;
}

/** What the tool would act on, in a few words: a command, a file, else its input. */
function detail(input: Record<string, unknown>): string {
  const shown =
    typeof input.command === "string"
      ? input.command
      : typeof input.file_path === "string"
        ? input.file_path
        : JSON.stringify(input);
  return `: ${shown.length > 200 ? `${shown.slice(0, 200)}…` : shown}`;
}
