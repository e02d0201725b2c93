import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { type Database, returnedRows } from "./db.js";
import { runCommands, runs } from "./schema.js";

// Commands for a run's owner, posted on any instance (src/cluster/commands.ts).

/** The channel on which an instance is told that commands wait for it; the payload is its id. */
export const COMMANDS_CHANNEL = "agent_bridge_commands";

export type RunCommand =
  | { runId: string; kind: "cancel" | "interrupt" }
  /** A client answered the run's permission request: the answer is in its row. */
  | { runId: string; kind: "answer"; requestId: string };

/**
 * Stores a command for the run's owner and, with `ring`, tells the owner at once (the NOTIFY is
 * delivered when the statement commits). False when the run is gone.
 */
export async function postRunCommand(
  db: Database,
  command: RunCommand & { owner: string },
  ring: boolean,
): Promise<boolean> {
  const payload =
    command.kind === "answer" ? JSON.stringify({ request_id: command.requestId }) : null;
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
    payload: { request_id?: string } | null;
    mine: boolean;
  }>(result);
  return rows
    .filter((row) => row.mine)
    .map(
      (row): RunCommand =>
        row.kind === "answer"
          ? { runId: row.run_id, kind: "answer", requestId: row.payload?.request_id ?? "" }
          : { runId: row.run_id, kind: row.kind },
    );
}
