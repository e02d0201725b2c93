import { Command, CommanderError, Option } from "commander";
import { ApiProblem } from "../client/index.js";
import { EXIT, Exit } from "./exit-codes.js";
import { addLocalCommands } from "./local.js";
import type { GlobalOptions } from "./options.js";
import { printJson } from "./print.js";
import type { Output } from "./render.js";
import { addRunCommands } from "./runs.js";
import { addSendCommand } from "./send.js";
import { addSessionCommands } from "./sessions.js";
import { addWatchCommand } from "./watch.js";

// `agent-bridge`: the service from a terminal or a CI step. Every command that talks to a
// server takes --url/--key (or AGENT_BRIDGE_URL/AGENT_BRIDGE_KEY); errors from the server are
// shown as their problem's detail and code, never as a stack trace.

const DEFAULT_URL = "http://127.0.0.1:8787";
const processOutput: Output = { stdout: process.stdout, stderr: process.stderr };

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

  addSendCommand(program, out);
  addSessionCommands(program, out);
  addRunCommands(program, out);
  addWatchCommand(program, out);

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
