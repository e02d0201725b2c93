import { type Command, Option } from "commander";
import { PERMISSION_MODES } from "../permission-modes.js";
import { printConversation } from "./conversation.js";
import { listCommand } from "./list-command.js";
import { clientOf } from "./options.js";
import { printJson, printSessions } from "./print.js";
import type { Output } from "./render.js";
import { addSessionSettingsCommands } from "./session-settings.js";

/** `sessions ls|new|fork|show|rm`. */
export function addSessionCommands(program: Command, out: Output): void {
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
    .command("fork")
    .description("fork a session: a new one that goes on from one of its runs; print its id")
    .argument("<id>", "session id")
    .option("--at-run <run>", "the finished run to branch after (default: the newest finished run)")
    .option("--title <title>", "a label for people (default: the session's)")
    .option("--json", "print the new session as JSON")
    .action(async (id: string, options, command: Command) => {
      const fork = await clientOf(command).forkSession(id, {
        ...(options.atRun ? { at_run: options.atRun } : {}),
        ...(options.title ? { title: options.title } : {}),
      });
      if (options.json) printJson(out, fork);
      else out.stdout.write(`${fork.id}\n`);
    });
  sessions
    .command("show")
    .description("print a session with its usage totals, as JSON; or its conversation")
    .argument("<id>", "session id")
    .option("--messages", "print its conversation instead: each run's message, text, tool calls")
    .action(async (id: string, options, command: Command) => {
      const client = clientOf(command);
      if (options.messages) return printConversation(out, client.messages(id, { limit: 100 }));
      printJson(out, await client.getSession(id));
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
  addSessionSettingsCommands(sessions, out);
}
