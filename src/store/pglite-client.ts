import {
  messages,
  PGlite,
  parse,
  protocol,
  type QueryOptions,
  type Results,
  type Transaction,
  types,
} from "@electric-sql/pglite";

// The embedded database's client, as the service uses it: statements that yield to the ticks
// queued before them, prepared once and named, and Drizzle's text types kept by the instance.

/** A statement prepared under a name of its own, and the types of its parameters. */
interface Prepared {
  name: string | undefined;
  types: number[];
  /** Date.now() when it was prepared. */
  at: number;
}

/**
 * Statements kept prepared at most, the least recently used closed beyond: each holds its parse
 * tree in the WebAssembly memory, which never shrinks. A statement made of a list's length
 * (`in ($1, $2…)`, a page's runs) makes one for each length.
 */
const MAX_PREPARED = 256;
/** Texts seen once, remembered to be prepared the second time (forgotten all at once beyond). */
const MAX_SEEN = 4096;
/**
 * A prepared statement is prepared again after this long. After five runs Postgres may keep a
 * generic plan, for any values, which it chose on the tables as they were then; a generic plan
 * cannot use a partial index that its query matches only through a parameter (`state = $1`),
 * and the embedded server has no autovacuum whose analyses would make it plan again. Prepared
 * again, the statement is planned for its values five times and the choice is made anew.
 */
export const REPREPARE_AFTER_MS = 60_000;

const DROPS_PREPARED = /^\s*(discard\s+all|deallocate\s+(prepare\s+)?all)\s*$/i;

const { serialize } = protocol;

/**
 * PGlite runs in this thread, and its statements resolve as microtasks: a chain of them (a
 * request's lookups, a run's completion) ran to its end before any `process.nextTick` callback.
 * Node corks an HTTP response's writes until the next tick, so SSE frames already sent waited
 * behind unrelated statements, a run's first text delta among them (`npm run bench -- --only
 * first`). Each statement, and each transaction as a whole, therefore waits for the ticks already
 * queued before it starts.
 *
 * PGlite's own `query` takes six calls into the database for each statement: parse, describe,
 * sync, then bind, describe, execute and sync, each a message of its own; the statement is
 * parsed and planned each time. A statement seen before here is prepared once under a name, and
 * then takes one call: bind, describe, execute and sync together. A one-row select by its key
 * took about a third of the thread's time it took before; on the embedded database statements
 * are most of a short run's CPU.
 */
export class TickYieldingPGlite extends PGlite {
  /** By text, the least recently used first. */
  private readonly prepared = new Map<string, Prepared>();
  private readonly seen = new Set<string>();
  /** Names the server still has that are to be closed with the next statement prepared. */
  private readonly unused: string[] = [];
  private statementNumber = 0;

  override async query<T>(query: string, params?: unknown[], options?: QueryOptions) {
    await afterQueuedTicks();
    // A COPY's blob is PGlite's to hand over.
    if (options?.blob) return super.query<T>(query, params, this.ownParsers(options));
    await this._checkReady();
    return this._runExclusiveTransaction(() =>
      this.run<T>(query, params, this.ownParsers(options), false),
    );
  }

  override async transaction<T>(callback: (tx: Transaction) => Promise<T>): Promise<T> {
    await afterQueuedTicks();
    return super.transaction((tx) => {
      const query = tx.query.bind(tx);
      tx.query = <R>(text: string, params?: unknown[], options?: QueryOptions) => {
        if (tx.closed || options?.blob) return query<R>(text, params, this.ownParsers(options));
        return this.run<R>(text, params, this.ownParsers(options), true);
      };
      return callback(tx);
    });
  }

  /** One statement, as PGlite's own query runs it (its lock, its errors, its sync to disk). */
  private run<T>(
    text: string,
    params: unknown[] = [],
    options: QueryOptions | undefined,
    inTransaction: boolean,
  ): Promise<Results<T>> {
    return this._runExclusiveQuery(async () => {
      const protocolOptions = { syncToFs: false as const, onNotice: options?.onNotice };
      try {
        const statement = await this.statement(text, options, protocolOptions);
        const values = params.map((value, i) => {
          if (value === null || value === undefined) return null;
          const type = statement.types[i] ?? 0;
          const serializer = options?.serializers?.[type] ?? this.serializers[type];
          return serializer ? serializer(value) : String(value);
        });
        const results = await this.execProtocolStream(
          Buffer.concat([
            serialize.bind({ statement: statement.name, values }),
            serialize.describe({ type: "P" }),
            serialize.execute({}),
            serialize.sync(),
          ]),
          protocolOptions,
        );
        if (!inTransaction) await this.syncToFs();
        // These drop the session's prepared statements (the tests' pool of embedded databases
        // discards each one's state before lending it again).
        if (DROPS_PREPARED.test(text)) {
          this.prepared.clear();
          this.unused.length = 0;
        }
        return parse.parseResults(results, this.parsers, options)[0] as Results<T>;
      } catch (err) {
        if (!(err instanceof messages.DatabaseError)) throw err;
        // A statement the server no longer has, or whose plan's columns changed under it.
        if (err.code === "26000" || err.code === "0A000") this.forget(text);
        // What PGlite's own query adds to its errors.
        throw Object.assign(err, { query: text, params, queryOptions: options });
      }
    });
  }

  /**
   * The statement's name and its parameters' types: a statement seen before is prepared under a
   * name, once; one seen for the first time (a migration's, say), or with types of the caller's,
   * is parsed unnamed, as PGlite's own query does.
   */
  private async statement(
    text: string,
    options: QueryOptions | undefined,
    protocolOptions: { syncToFs: false; onNotice: QueryOptions["onNotice"] },
  ): Promise<Prepared> {
    // Types asked for are the caller's own: such a statement is parsed each time.
    const named = !options?.paramTypes && (this.prepared.has(text) || this.seen.has(text));
    let known = named ? this.prepared.get(text) : undefined;
    if (known && Date.now() - known.at > REPREPARE_AFTER_MS) {
      this.forget(text);
      known = undefined;
    }
    if (known) {
      this.prepared.delete(text);
      this.prepared.set(text, known);
      return known;
    }
    if (named) {
      this.seen.delete(text);
      const [oldest] = this.prepared.keys();
      if (oldest !== undefined && this.prepared.size >= MAX_PREPARED) this.forget(oldest);
    } else {
      if (this.seen.size >= MAX_SEEN) this.seen.clear();
      this.seen.add(text);
    }
    const name = named ? `agent_bridge_${++this.statementNumber}` : undefined;
    const closing = this.unused
      .splice(0)
      .map((unused) => serialize.close({ type: "S", name: unused }));
    const described = await this.execProtocolStream(
      Buffer.concat([
        ...closing,
        serialize.parse({ name, text, types: options?.paramTypes }),
        serialize.describe({ type: "S", name }),
        serialize.sync(),
      ]),
      protocolOptions,
    );
    const statement = {
      name,
      types: parse.parseDescribeStatementResults(described),
      at: Date.now(),
    };
    if (name) this.prepared.set(text, statement);
    return statement;
  }

  /** Leaves a prepared statement, closed on the server with the next one prepared. */
  private forget(text: string) {
    const name = this.prepared.get(text)?.name;
    this.prepared.delete(text);
    if (name) this.unused.push(name);
  }

  /**
   * Drizzle's driver passes the same parsers with every statement (the types it keeps as text:
   * drizzle-orm/pglite/session.js), which PGlite merges into its own 318 each time: about 0.1 ms
   * of the thread a statement, a third of a short one's. Once the instance keeps those types as
   * text itself (keepDrizzleText), a statement's are left out.
   */
  private ownParsers(options: QueryOptions | undefined): QueryOptions | undefined {
    const parsers = options?.parsers;
    if (!parsers) return options;
    for (const oid in parsers) if (this.parsers[oid] !== keepText) return options;
    const { parsers: _, ...rest } = options;
    return rest;
  }

  /** Keeps as text what Drizzle's driver does: called once ready (its array types are set then). */
  keepDrizzleText(): void {
    for (const oid of DRIZZLE_TEXT_TYPES) this.parsers[oid] = keepText;
  }
}

const keepText = (value: string) => value;
/** timestamp, timestamptz, interval, date, and numeric[], timestamp[], timestamptz[], interval[], date[]. */
const DRIZZLE_TEXT_TYPES = [
  types.TIMESTAMP,
  types.TIMESTAMPTZ,
  types.INTERVAL,
  types.DATE,
  1231,
  1115,
  1185,
  1187,
  1182,
];

const afterQueuedTicks = () => new Promise<void>((resolve) => process.nextTick(resolve));
