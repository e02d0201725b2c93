import { createReadStream } from "node:fs";
import { type Command, Option } from "commander";
import { PERMISSION_MODES } from "../permission-modes.js";
import { TerminalApprover } from "./approvals.js";
import { clientOf, jsonObjectFile } from "./options.js";
import type { Output } from "./render.js";
import { showNewRun } from "./watch-run.js";

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks).toString("utf8");
}

/** `send`: a message to a session (a new one by default), its run shown as it goes. */
export function addSendCommand(program: Command, out: Output): void {
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
    .option(
      "--output-schema <file>",
      "a JSON Schema file the agent's answer must match: printed as JSON on stdout after the text (the run fails output_invalid without a valid one)",
      jsonObjectFile,
    )
    .option(
      "--queue",
      "when the session has a live run, wait for its turn (after the messages queued before it) rather than fail as busy",
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
        ...(options.outputSchema ? { outputSchema: options.outputSchema } : {}),
        ...(options.queue ? { whenBusy: "queue" as const } : {}),
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
}
