import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { type Database, returnedRows } from "./db.js";
import { RUN_EVENTS_CHANNEL } from "./events.js";
import { runCommandReplies, runCommands, runs } from "./schema.js";

// Commands for a run's owner, posted on any instance (src/cluster/commands.ts).

/** The channel on which an instance is told that commands wait for it; the payload is its id. */
export const COMMANDS_CHANNEL = "agent_bridge_commands";

export type RunCommand =
  | { runId: string; kind: "cancel" | "interrupt" }
  /** A client answered the run's permission request: the answer is in its row. */
  | { runId: string; kind: "answer"; requestId: string }
  | SteerCommand;

/** An image of a client's input, as the command carries it (base64). */
export interface CommandImage {
  mediaType: string;
  data: string;
}

/**
 * A client's input for the live run, or a switch of its model or mode: the owner answers each in
 * a reply (`replyToCommand`) that the poster waits for.
 */
export type SteerCommand =
  | {
      runId: string;
      kind: "input";
      commandId: string;
      text: string;
      attachments: CommandImage[];
    }
  | {
      runId: string;
      kind: "control";
      commandId: string;
      model?: string;
      permissionMode?: string;
    };

/** What the owner answered to a SteerCommand. */
export type CommandReply =
  | { ok: true; event: Record<string, unknown> }
  | { ok: false; code: string; message: string };

/** What became of a SteerCommand posted for another instance's run. */
export type SteerOutcome =
  | CommandReply
  /** The run ended (or is gone) before its owner answered. */
  | { ok: false; finished: string }
  /** Its owner did not take it within the bound: withdrawn, never carried out. */
  | { ok: false; untaken: true };

function payloadOf(command: RunCommand): Record<string, unknown> | null {
  switch (command.kind) {
    case "answer":
      return { request_id: command.requestId };
    case "input":
      return {
        command_id: command.commandId,
        text: command.text,
        attachments: command.attachments,
      };
    case "control":
      return {
        command_id: command.commandId,
        ...(command.model === undefined ? {} : { model: command.model }),
        ...(command.permissionMode === undefined
          ? {}
          : { permission_mode: command.permissionMode }),
      };
    default:
      return null;
  }
}

/**
 * Stores a command for the run's owner and, with `ring`, tells the owner at once (the NOTIFY is
 * delivered when the statement commits). False when the run is gone.
 */
export async function postRunCommand(
  db: Database,
  command: RunCommand & { owner: string },
  ring: boolean,
): Promise<boolean> {
  const fields = payloadOf(command);
  const payload = fields === null ? null : JSON.stringify(fields);
  const inserted = sql`insert into ${runCommands} (id, run_id, kind, payload, created_at)
    select ${randomUUID()}::uuid, r.id, ${command.kind}, ${payload}::jsonb, now() from ${runs} r
    where r.id = ${command.runId}::uuid returning run_id`;
  const result = await db.execute(
    ring
      ? sql`with c as (${inserted}) select run_id, pg_notify(${COMMANDS_CHANNEL}, ${command.owner}) from c`
      : inserted,
  );
  return returnedRows(result).length > 0;
}

/**
 * Takes the commands waiting for the runs `owner` executes; commands of runs that
 * have ended (nobody will take them) go with them.
 */
export async function takeRunCommands(db: Database, owner: string): Promise<RunCommand[]> {
  const result = await db.execute(sql`
    delete from ${runCommands} c using ${runs} r
    where r.id = c.run_id
      and (r.instance_id = ${owner}::uuid or r.status not in ('queued', 'running', 'waiting'))
    returning c.run_id, c.kind, c.payload, r.instance_id = ${owner}::uuid as mine`);
  const rows = returnedRows<{
    run_id: string;
    kind: RunCommand["kind"];
    payload: Record<string, unknown> | null;
    mine: boolean;
  }>(result);
  return rows.filter((row) => row.mine).map((row) => commandOf(row.run_id, row.kind, row.payload));
}

function commandOf(
  runId: string,
  kind: RunCommand["kind"],
  payload: Record<string, unknown> | null,
): RunCommand {
  const field = (name: string) =>
    typeof payload?.[name] === "string" ? (payload[name] as string) : undefined;
  switch (kind) {
    case "answer":
      return { runId, kind, requestId: field("request_id") ?? "" };
    case "input":
      return {
        runId,
        kind,
        commandId: field("command_id") ?? "",
        text: field("text") ?? "",
        attachments: Array.isArray(payload?.attachments)
          ? (payload.attachments as CommandImage[])
          : [],
      };
    case "control": {
      const model = field("model");
      const permissionMode = field("permission_mode");
      return {
        runId,
        kind,
        commandId: field("command_id") ?? "",
        ...(model === undefined ? {} : { model }),
        ...(permissionMode === undefined ? {} : { permissionMode }),
      };
    }
    default:
      return { runId, kind };
  }
}

/**
 * Stores the owner's reply to a command and rings the run's followers (the poster waits among
 * them): a ring without a position, which every follower of the run reads as "look again".
 */
export async function replyToCommand(
  db: Database,
  command: { runId: string; commandId: string },
  reply: CommandReply,
  ring: boolean,
): Promise<void> {
  const inserted = sql`insert into ${runCommandReplies} (command_id, run_id, reply, created_at)
    values (${command.commandId}::uuid, ${command.runId}::uuid, ${JSON.stringify(reply)}::jsonb, now())
    on conflict (command_id) do nothing returning run_id`;
  await db.execute(
    ring
      ? sql`with r as (${inserted}) select pg_notify(${RUN_EVENTS_CHANNEL}, r.run_id::text) from r`
      : inserted,
  );
}

/** Takes the owner's reply to the command, once it has given one. */
export async function takeCommandReply(
  db: Database,
  commandId: string,
): Promise<CommandReply | undefined> {
  const result = await db.execute(
    sql`delete from ${runCommandReplies} where command_id = ${commandId}::uuid returning reply`,
  );
  return returnedRows<{ reply: CommandReply }>(result)[0]?.reply;
}

/** Withdraws a command its owner has not taken yet; false when it has (or the run is gone). */
export async function withdrawRunCommand(db: Database, commandId: string): Promise<boolean> {
  const result = await db.execute(
    sql`delete from ${runCommands} where payload->>'command_id' = ${commandId} returning id`,
  );
  return returnedRows(result).length > 0;
}
