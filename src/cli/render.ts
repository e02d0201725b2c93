import type { CompletionEvent, StreamedEvent } from "../client/index.js";

// How `send` and `runs events --follow` show a run: the agent's text on stdout as it arrives,
// everything else on stderr (a spinner with the current tool on a terminal, plain lines
// otherwise), and one summary line at the end.

export interface Output {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export class RunRenderer {
  private atLineStart = true;
  private runId = "";
  private spinner: { message: string; frame: number; timer: NodeJS.Timeout } | undefined;

  constructor(private readonly out: Output) {}

  event(event: StreamedEvent): void {
    switch (event.type) {
      case "run_started":
        this.runId = event.run_id;
        return;
      case "text_delta":
        this.stopSpinner();
        this.out.stdout.write(event.text);
        if (event.text) this.atLineStart = event.text.endsWith("\n");
        return;
      case "status":
        this.status(event.message);
        return;
      case "user_question":
        for (const q of event.questions)
          this.line(`question: ${q.question} (${q.options.map((o) => o.label).join(" / ")})`);
        return;
      case "permission_request":
        this.line(`permission requested: ${event.tool_name} (request ${event.request_id})`);
        return;
      case "permission_resolved":
        this.line(
          `permission ${event.decision === "allow" ? "allowed" : "denied"} (by ${event.by}${event.message ? `: ${event.message}` : ""})`,
        );
        return;
      case "permission_cancelled":
        this.line(`permission request ${event.request_id} withdrawn`);
        return;
      case "completion":
        this.completion(event);
        return;
      default:
        // reasoning, tool calls and the like (`?events=full`) are not shown.
        return;
    }
  }

  /** Stops the spinner: call when leaving early (Ctrl-C, an error). */
  close(): void {
    this.stopSpinner();
  }

  private completion(event: CompletionEvent): void {
    this.stopSpinner();
    if (!this.atLineStart) {
      this.out.stdout.write("\n");
      this.atLineStart = true;
    }
    // The answer a run's output schema asked for, on stdout after its text, for a script to read.
    if (event.structured_output !== undefined && event.structured_output !== null) {
      this.out.stdout.write(`${JSON.stringify(event.structured_output, null, 2)}\n`);
    }
    if (event.status !== "succeeded" && event.error) this.line(`error: ${event.error}`);
    this.line(summary(event, this.runId));
  }

  private status(message: string): void {
    if (!this.out.stderr.isTTY) {
      this.line(message);
      return;
    }
    // Keep the spinner off the agent's unfinished line when both go to the same terminal.
    if (!this.atLineStart && this.out.stdout.isTTY) {
      this.out.stdout.write("\n");
      this.atLineStart = true;
    }
    this.stopSpinner();
    const spinner = {
      message,
      frame: 0,
      timer: setInterval(() => this.drawSpinner(), 80),
    };
    spinner.timer.unref();
    this.spinner = spinner;
    this.drawSpinner();
  }

  private drawSpinner(): void {
    if (!this.spinner) return;
    const frame = FRAMES[this.spinner.frame++ % FRAMES.length];
    this.out.stderr.write(`\r\x1b[2K${frame} ${this.spinner.message}`);
  }

  private stopSpinner(): void {
    if (!this.spinner) return;
    clearInterval(this.spinner.timer);
    this.spinner = undefined;
    this.out.stderr.write("\r\x1b[2K");
  }

  private line(text: string): void {
    this.stopSpinner();
    this.out.stderr.write(`${text}\n`);
  }
}

/** `succeeded in 1.5s · 100 in / 20 out tokens · $0.0123 · run <id>` */
export function summary(event: CompletionEvent, runId: string): string {
  const parts = [
    `${event.status} in ${(event.duration_ms / 1000).toFixed(1)}s`,
    `${event.usage.input_tokens} in / ${event.usage.output_tokens} out tokens`,
    event.cost_usd === null ? "cost unknown" : `$${event.cost_usd.toFixed(4)}`,
  ];
  if (runId) parts.push(`run ${runId}`);
  return parts.join(" · ");
}
