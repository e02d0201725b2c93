import type { Command } from "commander";
import { listCommand } from "./list-command.js";
import { clientOf, jsonObjectFile, positiveInt } from "./options.js";
import { printJson, printRuns } from "./print.js";
import type { Output } from "./render.js";
import { showNewRun, watchRun } from "./watch-run.js";

/** `runs ls|show|events|retry|cancel|interrupt|input|control|approve`. */
export function addRunCommands(program: Command, out: Output): void {
  const runs = program.command("runs").description("list, show, follow, retry and cancel runs");
  listCommand(
    out,
    runs,
    "list runs, newest first: a session's, or every run the key may see",
    printRuns,
    (client, page, options) =>
      client.listRuns({ ...page, ...(options.session ? { sessionId: options.session } : {}) }),
  ).option("--session <id>", "only this session's runs");
  runs
    .command("show")
    .description(
      "print a run (status, timings, usage, completion, output schema and structured output, replies on a forge) as JSON",
    )
    .argument("<id>", "run id")
    .action(async (id: string, _options, command: Command) => {
      printJson(out, await clientOf(command).getRun(id));
    });
  runs
    .command("events")
    .description(
      "print the events a run has stored so far as JSON lines, and exit (also while the run goes on)",
    )
    .argument("<id>", "run id")
    .option("--follow", "show the run live like `send` until it ends; exit with its status")
    .option("--after <n>", "start after this event id", positiveInt, 0)
    .option(
      "--full",
      "add reasoning, subagents' text, tool calls and results, session and context window events, rate limits",
    )
    .action(async (id: string, options, command: Command) => {
      const client = clientOf(command);
      const controller = new AbortController();
      const view = {
        after: options.after,
        signal: controller.signal,
        ...(options.full ? { events: "full" as const } : {}),
      };
      if (options.follow) return watchRun(out, client.follow(id, view), client, controller);
      for await (const event of client.storedEvents(id, view)) {
        out.stdout.write(`${JSON.stringify(event)}\n`);
      }
    });
  runs
    .command("retry")
    .description(
      "retry a session's latest run from the last good message (its failed turn left out), shown as `send` shows a run",
    )
    .argument("<id>", "run id")
    .option("--text <text>", "a new prompt (default: the run's own)")
    .option(
      "--output-schema <file>",
      "a JSON Schema file for the new run's answer (default: the run's own schema, if any)",
      jsonObjectFile,
    )
    .option("--json", "wait for the new run and print it as JSON (run, completion, text)")
    .option("--async", "print the new run's id at once and leave it going (with --json: the run)")
    .action(async (id: string, options, command: Command) => {
      const client = clientOf(command);
      const retryOptions = {
        ...(options.text ? { text: options.text } : {}),
        ...(options.outputSchema ? { outputSchema: options.outputSchema } : {}),
      };
      await showNewRun(out, client, options, {
        queued: () => client.retryAsync(id, retryOptions),
        finished: () => client.retry(id, retryOptions),
        async *live(signal) {
          const run = await client.retryAsync(id, { ...retryOptions, signal });
          yield* client.follow(run.id, { signal });
        },
      });
    });
  runs
    .command("cancel")
    .description("cancel a run")
    .argument("<id>", "run id")
    .action(async (id: string, _options, command: Command) => {
      const run = await clientOf(command).cancelRun(id);
      out.stdout.write(`${run.status} ${run.id}\n`);
    });

  runs
    .command("interrupt")
    .description("end a run's turn cleanly: cancelled, its usage and cost counted")
    .argument("<id>", "run id")
    .action(async (id: string, _options, command: Command) => {
      const run = await clientOf(command).interruptRun(id);
      out.stdout.write(`${run.status} ${run.id}\n`);
    });
  runs
    .command("input")
    .description("write the user's next message to a live run's agent (answered in the same run)")
    .argument("<id>", "run id")
    .argument("<text>", "what to say")
    .action(async (id: string, text: string, _options, command: Command) => {
      const event = await clientOf(command).sendInput(id, { text });
      out.stdout.write(`input ${event.input_id} ${id}\n`);
    });
  runs
    .command("control")
    .description("switch a live run's model or permission mode")
    .argument("<id>", "run id")
    .option("--model <model>", "the model its next API request uses")
    .option("--permission-mode <mode>", "how it may use tools from now on")
    .action(async (id: string, options, command: Command) => {
      const event = await clientOf(command).controlRun(id, {
        ...(options.model === undefined ? {} : { model: options.model }),
        ...(options.permissionMode === undefined
          ? {}
          : { permission_mode: options.permissionMode }),
      });
      const parts = [
        ...(event.model === undefined ? [] : [`model ${event.model}`]),
        ...(event.permission_mode === undefined
          ? []
          : [`permission_mode ${event.permission_mode}`]),
      ];
      out.stdout.write(`${parts.join(" ")} ${id}\n`);
    });
  runs
    .command("approve")
    .description(
      "answer a run's permission request (a session with approvals: api): allow it, or deny",
    )
    .argument("<id>", "run id")
    .argument("<request>", "the request_id of its permission_request event")
    .option("--deny", "deny it (default: allow)")
    .option("--message <text>", "with --deny: what the model is told")
    .option("--session", "allow the same for the rest of the session")
    .action(async (id: string, request: string, options, command: Command) => {
      const answered = await clientOf(command).answer(id, request, {
        decision: options.deny ? "deny" : "allow",
        ...(options.message ? { message: options.message } : {}),
        ...(options.session ? { scope: "session" as const } : {}),
      });
      out.stdout.write(`${answered.state} ${answered.request_id}\n`);
    });
}
