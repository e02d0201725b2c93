import { createReadStream } from "node:fs";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import {
  type AgentBridgeClient,
  ApiProblem,
  createClient,
  type FinishedRun,
  type Run,
  type Session,
  type StreamedEvent,
} from "../client/index.js";
import { PERMISSION_MODES } from "../permission-modes.js";
import { TerminalApprover } from "./approvals.js";
import { EXIT, exitCodeOf } from "./exit-codes.js";
import { addLocalCommands } from "./local.js";
import { type Output, RunRenderer } from "./render.js";

// `agent-bridge`: the service from a terminal or a CI step. Every command that talks to a
// server takes --url/--key (or AGENT_BRIDGE_URL/AGENT_BRIDGE_KEY); errors from the server are
// shown as their problem's detail and code, never as a stack trace.

const DEFAULT_URL = "http://127.0.0.1:8787";
const processOutput: Output = { stdout: process.stdout, stderr: process.stderr };

/** Thrown by a command to end with this exit code (after it has printed what it had to). */
class Exit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

interface GlobalOptions {
  url: string;
  key?: string;
}

function clientOf(command: Command): AgentBridgeClient {
  const { url, key } = command.optsWithGlobals<GlobalOptions>();
  return createClient({ baseUrl: url, ...(key ? { key } : {}) });
}

function printJson(out: Output, value: unknown): void {
  out.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected a whole number");
  return n;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks).toString("utf8");
}

/** The command line, writing to `out` (tests run it in-process with their own). */
export function buildProgram(out: Output): Command {
  const program = new Command("agent-bridge")
    .description("The Claude Code CLI behind a durable HTTP API: serve it, or talk to a server.")
    .addOption(
      new Option("--url <url>", "server to talk to").env("AGENT_BRIDGE_URL").default(DEFAULT_URL),
    )
    .addOption(new Option("--key <key>", "API key, sent as a bearer token").env("AGENT_BRIDGE_KEY"))
    .showHelpAfterError("(add --help for usage)")
    .configureOutput({
      writeOut: (text) => out.stdout.write(text),
      writeErr: (text) => out.stderr.write(text),
    })
    .exitOverride();

  program
    .command("send")
    .description(
      "send a message and stream the agent's text to stdout; tool activity and a summary go to stderr",
    )
    .argument("<prompt>", 'the message ("-" reads it from stdin)')
    .option("--session <id>", "session to send to (default: a new session)")
    .addOption(new Option("--new", "start a new session (the default)").conflicts("session"))
    .addOption(
      new Option("--agent <name>", "the new session's agent (default: the server's)").conflicts(
        "session",
      ),
    )
    .option("--system-prompt <text>", "appended to the system prompt for this message")
    .addOption(
      new Option(
        "--approvals <mode>",
        "who answers the run's permission requests: ask (you, here: y/n/a, or an option of a question), api (another client), deny",
      ).choices(["ask", "api", "deny"]),
    )
    .addOption(
      new Option(
        "--permission-mode <mode>",
        "what the agent may do without asking, for this run (default: the session's; a new session's is the server's AGENT_BRIDGE_PERMISSION_MODE, acceptEdits, which writes files unasked)",
      ).choices(PERMISSION_MODES),
    )
    .option("--json", "wait for the run and print it as JSON (run, completion, text)")
    .option("--async", "print the run id at once and leave the run going (with --json: the run)")
    .action(async (prompt: string, options, command: Command) => {
      const client = clientOf(command);
      const ask = options.approvals === "ask";
      if (ask && (options.json || options.async)) {
        command.error("error: --approvals ask answers as the run goes: not with --json or --async");
      }
      const text = prompt === "-" ? await readStdin() : prompt;
      let sessionId: string = options.session;
      if (!sessionId) {
        sessionId = (await client.createSession(options.agent ? { agent: options.agent } : {})).id;
        out.stderr.write(`session ${sessionId}\n`);
      }
      const messageOptions = {
        ...(options.systemPrompt ? { systemPrompt: options.systemPrompt } : {}),
        ...(options.approvals ? { approvals: ask ? ("api" as const) : options.approvals } : {}),
        ...(options.permissionMode ? { permissionMode: options.permissionMode } : {}),
      };
      // The answers come from the terminal: stdin, unless it carried the prompt.
      const approver = ask
        ? new TerminalApprover(prompt === "-" ? createReadStream("/dev/tty") : process.stdin, out)
        : undefined;
      try {
        await showNewRun(
          out,
          client,
          options,
          {
            queued: () => client.sendAsync(sessionId, text, messageOptions),
            finished: () => client.send(sessionId, text, messageOptions),
            live: (signal) => client.stream(sessionId, text, { ...messageOptions, signal }),
          },
          approver,
        );
      } finally {
        approver?.dispose();
      }
    });

  const sessions = program.command("sessions").description("list, show and delete sessions");
  listCommand(out, sessions, "list sessions, newest first", printSessions, (client, page) =>
    client.listSessions(page),
  );
  sessions
    .command("new")
    .description("create a session and print its id")
    .option("--title <title>", "a label for people")
    .option("--agent <name>", "its agent: claude or codex (default: the server's)")
    .addOption(
      new Option(
        "--permission-mode <mode>",
        "what its agent may do without asking (default: the server's AGENT_BRIDGE_PERMISSION_MODE, acceptEdits)",
      ).choices(PERMISSION_MODES),
    )
    .option("--json", "print the session as JSON")
    .action(async (options, command: Command) => {
      const session = await clientOf(command).createSession({
        ...(options.title ? { title: options.title } : {}),
        ...(options.agent ? { agent: options.agent } : {}),
        ...(options.permissionMode ? { permission_mode: options.permissionMode } : {}),
      });
      if (options.json) printJson(out, session);
      else out.stdout.write(`${session.id}\n`);
    });
  sessions
    .command("show")
    .description("print a session with its usage totals, as JSON")
    .argument("<id>", "session id")
    .action(async (id: string, _options, command: Command) => {
      printJson(out, await clientOf(command).getSession(id));
    });
  sessions
    .command("rm")
    .description("delete sessions with their runs and events")
    .argument("<id...>", "session ids")
    .action(async (ids: string[], _options, command: Command) => {
      const client = clientOf(command);
      for (const id of ids) {
        await client.deleteSession(id);
        out.stdout.write(`deleted ${id}\n`);
      }
    });

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
    .description("print a run (status, timings, usage, completion) as JSON")
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
      if (options.follow) return render(out, client.follow(id, view), client, controller);
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
    .option("--json", "wait for the new run and print it as JSON (run, completion, text)")
    .option("--async", "print the new run's id at once and leave it going (with --json: the run)")
    .action(async (id: string, options, command: Command) => {
      const client = clientOf(command);
      const retryOptions = options.text ? { text: options.text } : {};
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

  addLocalCommands(program, out);

  program
    .command("serve")
    .description("run the server (what `npm start` runs); configured by environment variables")
    .option("--port <port>", "port to listen on (PORT)")
    .option("--host <host>", "address to bind (HOST)")
    .action(async (options) => {
      if (options.port) process.env.PORT = options.port;
      if (options.host) process.env.HOST = options.host;
      await import("../index.js");
    });

  program
    .command("openapi")
    .description("print the OpenAPI document (YAML, as openapi.yaml)")
    .option("--json", "print it as JSON")
    .action(async (options) => {
      if (options.json) {
        const { openApiDocument } = await import("../http/openapi.js");
        return printJson(out, openApiDocument());
      }
      const { openApiYaml } = await import("../http/openapi-yaml.js");
      out.stdout.write(openApiYaml());
    });

  return program;
}

/**
 * `<group> ls`: one page of a list, as a table (or JSON with `--json`), and on stderr the option
 * that gets the next page.
 */
function listCommand<T>(
  out: Output,
  group: Command,
  description: string,
  print: (out: Output, rows: T[]) => void,
  fetchPage: (
    client: AgentBridgeClient,
    page: { limit: number; cursor?: string },
    options: Record<string, string | undefined>,
  ) => Promise<{ data: T[]; next_cursor: string | null }>,
): Command {
  return group
    .command("ls")
    .description(description)
    .option("--limit <n>", "how many (1 to 100)", positiveInt, 20)
    .option("--cursor <cursor>", "next page: the cursor the previous page printed")
    .option("--json", "print the page as JSON")
    .action(async (options, command: Command) => {
      const page = await fetchPage(
        clientOf(command),
        { limit: options.limit, ...(options.cursor ? { cursor: options.cursor } : {}) },
        options,
      );
      if (options.json) return printJson(out, page);
      print(out, page.data);
      if (page.next_cursor) out.stderr.write(`more: --cursor ${page.next_cursor}\n`);
    });
}

function printSessions(out: Output, sessions: Session[]): void {
  printTable(out, [
    ["ID", "TITLE", "RUNS", "COST", "LAST ACTIVITY"],
    ...sessions.map((s) => [
      s.id,
      s.title ?? "-",
      String(s.usage.runs),
      `$${s.usage.cost_usd.toFixed(4)}`,
      s.last_activity_at,
    ]),
  ]);
}

function printRuns(out: Output, runs: Run[]): void {
  printTable(out, [
    ["ID", "SESSION", "STATUS", "TRIGGER", "COST", "CREATED"],
    ...runs.map((r) => [
      r.id,
      r.session_id,
      r.status,
      r.trigger,
      r.cost_usd === null ? "-" : `$${r.cost_usd.toFixed(4)}`,
      r.created_at,
    ]),
  ]);
}

/** Rows as columns padded to their widest cell; the first row is the header. */
function printTable(out: Output, rows: string[][]): void {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  for (const row of rows)
    out.stdout.write(
      `${row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd()}\n`,
    );
}

/**
 * A run a command starts, shown as asked: its id at once (`--async`; the run with `--json`), the
 * finished run as JSON (`--json`), or live (`render`). Exits with the run's status when it waited.
 */
async function showNewRun(
  out: Output,
  client: AgentBridgeClient,
  options: { json?: boolean; async?: boolean },
  start: {
    queued: () => Promise<Run>;
    finished: () => Promise<FinishedRun>;
    live: (signal: AbortSignal) => AsyncGenerator<StreamedEvent>;
  },
  approver?: TerminalApprover,
): Promise<void> {
  if (options.async) {
    const run = await start.queued();
    if (options.json) printJson(out, run);
    else out.stdout.write(`${run.id}\n`);
    return;
  }
  if (options.json) {
    const finished = await start.finished();
    printJson(out, finished);
    throw new Exit(exitCodeOf(finished.completion.status));
  }
  const controller = new AbortController();
  await render(out, start.live(controller.signal), client, controller, approver);
}

/**
 * Shows a run as it happens. Ctrl-C asks once whether to cancel the run or detach from it (on a
 * terminal; elsewhere it detaches); a second Ctrl-C detaches at once.
 */
async function render(
  out: Output,
  events: AsyncGenerator<StreamedEvent>,
  client: AgentBridgeClient,
  controller: AbortController,
  approver?: TerminalApprover,
): Promise<void> {
  const renderer = new RunRenderer(out);
  let runId: string | undefined;
  let asked = false;
  const onInterrupt = () => {
    renderer.close();
    if (asked || !runId || !process.stdin.isTTY) return controller.abort();
    asked = true;
    void askCancelOrDetach(out).then(async (answer) => {
      if (answer === "detach") return controller.abort();
      if (runId) await client.cancelRun(runId).catch(() => controller.abort());
    });
  };
  process.on("SIGINT", onInterrupt);
  try {
    for await (const event of events) {
      if (event.type === "run_started") runId = event.run_id;
      renderer.event(event);
      if (event.type === "permission_request" && approver && runId) {
        await answerRequest(out, client, runId, event, approver);
      }
      if (event.type === "completion") throw new Exit(exitCodeOf(event.status));
    }
  } catch (err) {
    if (!controller.signal.aborted) throw err;
    renderer.close();
    out.stderr.write(
      runId
        ? `detached; the run goes on: agent-bridge runs events ${runId} --follow\n`
        : "detached\n",
    );
    throw new Exit(EXIT.detached);
  } finally {
    process.off("SIGINT", onInterrupt);
  }
}

/** Puts a permission request to the person at the terminal and posts their answer. */
async function answerRequest(
  out: Output,
  client: AgentBridgeClient,
  runId: string,
  request: Extract<StreamedEvent, { type: "permission_request" }>,
  approver: TerminalApprover,
): Promise<void> {
  const answer = await approver.answer(request);
  try {
    await client.answer(runId, request.request_id, answer);
  } catch (err) {
    // Answered elsewhere, timed out or withdrawn meanwhile: its permission_resolved says how.
    if (!(err instanceof ApiProblem && err.status === 409)) throw err;
    out.stderr.write(`${err.problem?.detail ?? err.message}\n`);
  }
}

function askCancelOrDetach(out: Output): Promise<"cancel" | "detach"> {
  out.stderr.write("\nCancel the run (c) or detach and leave it going (d)? ");
  const stdin = process.stdin;
  stdin.setRawMode(true);
  stdin.resume();
  return new Promise((resolve) => {
    stdin.once("data", (data) => {
      stdin.setRawMode(false);
      stdin.pause();
      const key = data.toString().toLowerCase();
      out.stderr.write(`${key.startsWith("c") ? "cancelling" : "detaching"}\n`);
      resolve(key.startsWith("c") ? "cancel" : "detach");
    });
  });
}

/** What the user sees for an error: one line, no stack trace. */
function describeError(err: unknown, { url, key }: GlobalOptions): string {
  if (err instanceof ApiProblem) {
    const said = `${err.detail} (${err.code})`;
    if (err.status !== 401) return said;
    // The server cannot know where this command takes its key from.
    return key
      ? `${said}; check the key given with --key or AGENT_BRIDGE_KEY`
      : `${said}; set AGENT_BRIDGE_KEY or pass --key: the key the server printed at its first start, or one from \`agent-bridge keys create\``;
  }
  if (err instanceof Error) {
    const cause = err.cause as { code?: string; message?: string } | undefined;
    if (err.message === "fetch failed")
      return `cannot reach ${url}: ${cause?.code ?? cause?.message ?? "connection failed"}`;
    return err.message;
  }
  return String(err);
}

/** Runs the command line on `argv` (as `process.argv`); resolves to the exit code. */
export async function main(argv: string[], out: Output = processOutput): Promise<number> {
  const program = buildProgram(out);
  try {
    await program.parseAsync(argv);
    return EXIT.ok;
  } catch (err) {
    if (err instanceof Exit) return err.code;
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    out.stderr.write(`agent-bridge: ${describeError(err, program.opts<GlobalOptions>())}\n`);
    return EXIT.error;
  }
}

/** The `agent-bridge` process: the command line on its own arguments, stdout and stderr. */
export async function run(): Promise<void> {
  // A reader that has gone (`agent-bridge runs events ID | head -2`) is not an error: stop
  // quietly, as `git log | head` does, instead of a stack trace for the next write.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code !== "EPIPE") throw err;
      process.exit(EXIT.ok);
    });
  }
  // `serve` keeps the process alive with its server; every other command ends here.
  process.exitCode = await main(process.argv);
}
