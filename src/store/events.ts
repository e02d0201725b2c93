import { and, asc, desc, eq, gt, inArray, type SQL, sql } from "drizzle-orm";
import type { BridgeEvent, BridgeEventType, CompletionEvent } from "../events.js";
import { type Database, executePrepared, returnedRows } from "./db.js";
import { cliId, OPEN_STATUSES_LIST } from "./runs.js";
import { runEventBatches, runs, sessions } from "./schema.js";

// A run's event log, stored a batch to a row (see schema.ts). Each event is serialized once, when
// it is numbered; the same text is stored, sent live and replayed, so a replay is byte-identical
// to the live stream and costs no JSON work. A batch's `events` holds one line per event:
//
//   seq \t public seq (empty for an internal event) \t type \t the event as JSON
//
// but for consecutive text deltas, the bulk of a run, which share one line and store their text
// alone, each as its JSON string:
//
//   seq of the first \t its public seq \t text_delta* \t "text" \t "text" ...
//
// A delta stored whole took 4 to 5 times the bytes of its text, and storing them was a quarter of
// the server's CPU in a run of 100 000 (`npm run bench`, docs/performance.md). JSON.stringify
// never writes a raw tab or newline, and event types hold neither.

/** An event with its place in the run's log, and its JSON. */
export interface SequencedEvent {
  /** Position among all the run's events (`?events=full`), from 1 without gaps. */
  seq: number;
  /** Position among the events a client sees by default, from 1 without gaps; null if internal. */
  publicSeq: number | null;
  type: BridgeEventType;
  json: string;
  /** A text delta's text, as its JSON string: what its log stores of it. */
  text?: string;
}

/** Which numbering a reader follows: the default view, or `?events=full`. */
export type LogView = "public" | "full";

/** The event's position in the view (0 for an internal event in the default view). */
export const positionIn = (view: LogView, entry: SequencedEvent): number =>
  (view === "full" ? entry.seq : entry.publicSeq) ?? 0;

/** A text delta's JSON up to its text: `{type, text}` serialized, in that order. */
const TEXT_DELTA_START = '{"type":"text_delta","text":';
/** The type field of a line of consecutive text deltas. */
const TEXT_DELTAS = "text_delta*";

/**
 * A text delta, the bulk of a run, holds its text's JSON alone and makes its event's JSON when
 * asked. A run keeps thousands of its latest events for its subscribers, which outlive the young
 * generation's collections: each event held also as its JSON made those collections copy twice
 * the objects (docs/performance.md).
 */
class TextDeltaEntry implements SequencedEvent {
  readonly type = "text_delta";
  constructor(
    readonly seq: number,
    readonly publicSeq: number,
    readonly text: string,
  ) {}

  get json(): string {
    return `${TEXT_DELTA_START}${this.text}}`;
  }
}

export function sequenced(
  event: BridgeEvent,
  seq: number,
  publicSeq: number | null,
): SequencedEvent {
  if (
    event.type === "text_delta" &&
    typeof event.text === "string" &&
    publicSeq !== null &&
    fieldCount(event) === 2
  ) {
    return new TextDeltaEntry(seq, publicSeq, JSON.stringify(event.text));
  }
  return { seq, publicSeq, type: event.type, json: JSON.stringify(event) };
}

/** A text delta with a field besides its type and text is stored whole, so as to keep it. */
function fieldCount(event: object): number {
  let n = 0;
  for (const _ in event) n++;
  return n;
}

/** A batch's stored text: a line per event, a line per run of consecutive text deltas. */
function batchText(events: SequencedEvent[]): string {
  let out = "";
  let last: SequencedEvent | undefined;
  for (const e of events) {
    // A text delta right after another, in both views, joins its line.
    const joins =
      e.text !== undefined &&
      last?.text !== undefined &&
      e.seq === last.seq + 1 &&
      e.publicSeq === (last.publicSeq ?? 0) + 1;
    last = e;
    if (joins) {
      out += `\t${e.text}`;
      continue;
    }
    if (out) out += "\n";
    out +=
      e.text !== undefined
        ? `${e.seq}\t${e.publicSeq}\t${TEXT_DELTAS}\t${e.text}`
        : `${e.seq}\t${e.publicSeq ?? ""}\t${e.type}\t${e.json}`;
  }
  return out;
}

function parseBatch(events: string): SequencedEvent[] {
  const out: SequencedEvent[] = [];
  for (const line of events.split("\n")) {
    const a = line.indexOf("\t");
    const b = line.indexOf("\t", a + 1);
    const c = line.indexOf("\t", b + 1);
    const seq = Number(line.slice(0, a));
    const publicSeq = b === a + 1 ? null : Number(line.slice(a + 1, b));
    const type = line.slice(b + 1, c);
    if (type !== TEXT_DELTAS) {
      out.push({ seq, publicSeq, type: type as BridgeEventType, json: line.slice(c + 1) });
      continue;
    }
    // Consecutive events, public all: both positions go up by one each.
    const texts = line.slice(c + 1).split("\t");
    for (const [i, text] of texts.entries()) {
      out.push(new TextDeltaEntry(seq + i, (publicSeq ?? 0) + i, text));
    }
  }
  return out;
}

/** Consecutive events of one run, stored as one row. */
export interface EventBatch {
  runId: string;
  events: SequencedEvent[];
  /** The default view's position at the batch's end: the last public event's, here or before. */
  lastPublicSeq: number;
  /**
   * The agent's own session id, named by an event of the batch: recorded on the run and its
   * session by the statement that stores the batch.
   */
  agentSessionId?: string;
}

/** The doorbell's channel for stored events; a payload is `<run id> <last seq>`. */
export const RUN_EVENTS_CHANNEL = "agent_bridge_run_events";

/**
 * Stores batches, of one run or of several, in one statement, each only while its run is open:
 * a run another instance has closed (its owner lost its lease) takes nothing more. Resolves with
 * the ids of the runs whose batches were stored. `whileOpen: false` is for the completion, stored
 * in the transaction that closes the run (whose conditional update is its fence). With `ring`,
 * the same statement rings the doorbell once per stored batch (NOTIFY on RUN_EVENTS_CHANNEL, the
 * run id and the batch's last seq), delivered when it commits: followers on other instances then
 * read the stored batches (src/cluster/).
 */
export async function appendEvents(
  db: Database,
  batches: EventBatch[],
  options: { whileOpen?: boolean; ring?: boolean } = {},
): Promise<Set<string>> {
  const appending = eventsAppended(batches, options);
  if (!appending) return new Set();
  const { statement, prepared } = appending;
  const result = await (prepared ? executePrepared(db, statement) : db.execute(statement));
  return new Set(returnedRows<{ run_id: string }>(result).map((r) => r.run_id));
}

/**
 * appendEvents's statement, and whether it is one of a few texts (to run prepared); undefined
 * when there is nothing to store.
 */
export function eventsAppended(
  batches: EventBatch[],
  { whileOpen = true, ring = false } = {},
): { statement: SQL; prepared: boolean } | undefined {
  const rows = batches.flatMap(({ runId, events, lastPublicSeq }) => {
    const first = events[0];
    const last = events.at(-1);
    if (!first || !last) return [];
    const text = batchText(events);
    return [{ runId, firstSeq: first.seq, lastSeq: last.seq, lastPublicSeq, events: text }];
  });
  const [first, ...more] = rows;
  if (!first) return undefined;
  const createdAt = new Date().toISOString();
  // One batch (a single busy run) goes as plain parameters: its text is sent as it is, where an
  // array parameter is escaped and parsed again (PGlite relay 101 000 -> 81 000 events/s).
  // Several go as five arrays, each one text parameter: a multi-row `values` list costs the
  // query builder work per row and column (drizzle's `is`, 12 % of the server's CPU with 50 runs).
  const column = (pick: (row: (typeof rows)[number]) => string | number) =>
    arrayLiteral(rows.map(pick));
  const source =
    more.length === 0
      ? sql`(select ${first.runId}::uuid as run_id, ${first.firstSeq}::integer as first_seq,
          ${first.lastSeq}::integer as last_seq, ${first.lastPublicSeq}::integer as last_public_seq,
          ${first.events}::text as events)`
      : sql`unnest(${column((r) => r.runId)}::uuid[], ${column((r) => r.firstSeq)}::integer[],
          ${column((r) => r.lastSeq)}::integer[], ${column((r) => r.lastPublicSeq)}::integer[],
          ${column((r) => r.events)}::text[])`;
  const insert = sql`
    insert into ${runEventBatches} (run_id, first_seq, last_seq, last_public_seq, events, created_at)
    select b.*, ${createdAt}::timestamptz
    from ${source} as b (run_id, first_seq, last_seq, last_public_seq, events)
    ${whileOpen ? sql`where exists (select 1 from ${runs} r where r.id = b.run_id and r.status in ${OPEN_STATUSES_LIST})` : sql``}
    returning run_id, last_seq`;
  const named = batches.flatMap(({ runId, agentSessionId }) => {
    const id = cliId(agentSessionId ?? null);
    return id === null ? [] : [{ runId, id }];
  });
  const ctes = [
    ...namingAgentSessions(named, whileOpen),
    ...(ring ? [sql`stored as (${insert})`] : []),
  ];
  const main = ring
    ? sql`select run_id, pg_notify(${RUN_EVENTS_CHANNEL}, run_id || ' ' || last_seq) from stored`
    : insert;
  const statement = ctes.length > 0 ? sql`with ${sql.join(ctes, sql`, `)} ${main}` : main;
  // Of a few texts, but for the list of several names (runs that started together).
  return { statement, prepared: named.length <= 1 };
}

/**
 * The statement's parts that record the agent session ids the batches name, on their runs (those
 * still open, with `whileOpen`) and those runs' sessions: in the statement that stores the event
 * naming it, so that a client that has seen the event finds the session resumable, whatever
 * becomes of the server then. Ids that do not look like one (cliId) are not recorded.
 */
function namingAgentSessions(named: { runId: string; id: string }[], whileOpen: boolean): SQL[] {
  if (named.length === 0) return [];
  // A list of values, not arrays: the planner then knows it has a row or a few, and updates them by
  // their keys (with `unnest` it scanned the tables, 3 ms on the embedded database).
  const values = named.map(({ runId, id }) => sql`(${runId}::uuid, ${id}::text)`);
  return [
    sql`named (run_id, id) as (values ${sql.join(values, sql`, `)})`,
    // A name recorded already locks no row: this statement stores every running run's events.
    sql`named_runs as (update ${runs} r set agent_session_id = n.id from named n
      where r.id = n.run_id and r.agent_session_id is distinct from n.id
      ${whileOpen ? sql`and r.status in ${OPEN_STATUSES_LIST}` : sql``}
      returning r.session_id, n.id)`,
    sql`named_sessions as (update ${sessions} s set agent_session_id = nr.id from named_runs nr
      where s.id = nr.session_id and s.agent_session_id is distinct from nr.id)`,
  ];
}

/**
 * A Postgres array literal, sent as one text parameter and cast by the statement. The driver's own
 * array parameters need the array types it looks up on each new connection (postgres.js's
 * `fetch_types`), a lookup whose failure during an outage no caller can catch (db.ts).
 */
function arrayLiteral(values: (string | number)[]): string {
  const quoted = values.map((v) => `"${String(v).replace(/["\\]/g, "\\$&")}"`);
  return `{${quoted.join(",")}}`;
}

/**
 * Up to `limit` batches of the run's log, in order: those ending beyond `fromSeq` that hold an
 * event after position `after` of the view. (An event's public position is never above its
 * `seq`, so `after` is also a valid `fromSeq`.)
 */
export async function listEventBatches(
  db: Database,
  runId: string,
  page: { view: LogView; after: number; fromSeq: number; limit: number },
): Promise<SequencedEvent[][]> {
  const rows = await db
    .select({ events: runEventBatches.events })
    .from(runEventBatches)
    .where(
      and(
        eq(runEventBatches.runId, runId),
        gt(runEventBatches.lastSeq, page.fromSeq),
        page.view === "public" ? gt(runEventBatches.lastPublicSeq, page.after) : undefined,
      ),
    )
    .orderBy(asc(runEventBatches.lastSeq))
    .limit(page.limit);
  return rows.map((row) => parseBatch(row.events));
}

/** The run's last event, when it is its completion (always written alone, in the last batch). */
export async function getCompletionEvent(
  db: Database,
  runId: string,
): Promise<CompletionEvent | undefined> {
  return (await completionEvents(db, [runId])).get(runId);
}

/**
 * The completion event of each of the runs that has one, in one statement: each run's last
 * batch, found from the end of its index as for one run.
 */
export async function completionEvents(
  db: Database,
  runIds: string[],
): Promise<Map<string, CompletionEvent>> {
  const found = new Map<string, CompletionEvent>();
  if (runIds.length === 0) return found;
  const lastBatch = db
    .select({ events: runEventBatches.events })
    .from(runEventBatches)
    .where(eq(runEventBatches.runId, runs.id))
    .orderBy(desc(runEventBatches.lastSeq))
    .limit(1)
    .as("last_batch");
  const rows = await db
    .select({ runId: runs.id, events: lastBatch.events })
    .from(runs)
    .crossJoinLateral(lastBatch)
    .where(inArray(runs.id, runIds));
  for (const { runId, events } of rows) {
    const last = parseBatch(events).at(-1);
    if (last?.type === "completion") found.set(runId, JSON.parse(last.json) as CompletionEvent);
  }
  return found;
}

/** The highest `seq` and public position the run's log holds (0 when empty). */
export async function lastEventSeqs(db: Database, runId: string) {
  const [row] = await db
    .select({ seq: runEventBatches.lastSeq, publicSeq: runEventBatches.lastPublicSeq })
    .from(runEventBatches)
    .where(eq(runEventBatches.runId, runId))
    .orderBy(desc(runEventBatches.lastSeq))
    .limit(1);
  return row ?? { seq: 0, publicSeq: 0 };
}

/** Every text_delta of the run, joined: the `text` of its callback. */
export async function runText(db: Database, runId: string): Promise<string> {
  const rows = await db
    .select({ events: runEventBatches.events })
    .from(runEventBatches)
    .where(eq(runEventBatches.runId, runId))
    .orderBy(asc(runEventBatches.lastSeq));
  let text = "";
  for (const row of rows) {
    for (const e of parseBatch(row.events)) {
      if (e.type === "text_delta") text += (JSON.parse(e.json) as { text: string }).text;
    }
  }
  return text;
}
