import { once } from "node:events";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";

// A TCP proxy in front of a Postgres server, for the moments a real outage cannot be timed to:
// a connection lost right after its start-up, the database gone right after a given statement
// was answered or after it ran but before its answer reached the client, a client that gives up
// on a statement its backend still runs. It reads only what it needs of the protocol: a client
// message's first byte ('P' parse, 'Q' query, 'B' bind) and text (a bind's is that of the
// statement it runs again), and of the server's answer its messages' types and lengths (rows,
// completion, the ReadyForQuery 'Z' that ends it).

export interface PgProxy {
  /** `url` with the proxy's port: connect through this. */
  url: string;
  /** The first statement each connection sent after its start-up, as raw protocol text. */
  firstStatements: string[];
  /** The next connection to start is closed at its first statement, as by a restart then. */
  cutNextAtFirstStatement(): void;
  /**
   * The next connection is accepted and never answered, as by a server that hangs before its
   * start-up is done; it closes when its client gives up. Counts the connections held so.
   */
  holdNextConnection(): void;
  held: number;
  /**
   * Once a statement matching `pattern` has been answered, the database goes down; resolves
   * then.
   */
  downAfterAnswer(pattern: RegExp): Promise<void>;
  /**
   * A statement matching `pattern` runs (and commits, outside a transaction), and the database
   * goes down before its answer reaches the client; resolves then.
   */
  downLosingAnswer(pattern: RegExp): Promise<void>;
  /**
   * The client's side of the connection whose last statement matched `pattern` closed; the
   * database's side stays open, so that the statement goes on to its end and commits, as when
   * the network between them fails and the client gives up first.
   */
  cutClientOf(pattern: RegExp): void;
  /** Every connection closed, and new ones refused, until `up()`. */
  down(): void;
  up(): void;
  close(): void;
}

const PARSE = 0x50;
const BIND = 0x42;
const QUERY = 0x51;
const READY_FOR_QUERY = 0x5a;
const DATA_ROW = 0x44;
const COMMAND_COMPLETE = 0x43;

export async function startPgProxy(url: string): Promise<PgProxy> {
  const target = new URL(url);
  const sockets = new Set<Socket>();
  /** Each client connection's last statement, as raw protocol text. */
  const lastStatement = new Map<Socket, string>();
  /** The clients cut by `cutClientOf`, whose database side stays open. */
  const cut = new WeakSet<Socket>();
  const firstStatements: string[] = [];
  let cutNext = false;
  let downAfter:
    | { pattern: RegExp; answer: "delivered" | "lost"; wentDown: () => void }
    | undefined;
  let holdNext = false;
  const server = createServer((client) => {
    if (holdNext) {
      holdNext = false;
      proxy.held++;
      sockets.add(client);
      client.on("error", () => {});
      return;
    }
    const upstream = connect(Number(target.port), target.hostname);
    /** This connection's prepared statements by name, as raw protocol text. */
    const prepared = new Map<string, string>();
    sockets.add(client).add(upstream);
    const cutThis = cutNext;
    cutNext = false;
    let messages = 0;
    // This connection sent the statement the database goes down after: what of its answer arrives.
    let answering: { answer: "delivered" | "lost"; wentDown: () => void } | undefined;
    client.on("data", (chunk) => {
      const statement = chunk[0] === PARSE || chunk[0] === QUERY;
      // A statement prepared before on this connection runs again by a Bind of its name alone.
      const text = statement
        ? chunk.toString("latin1")
        : chunk[0] === BIND
          ? prepared.get(cString(chunk, 5 + cString(chunk, 5).length + 1))
          : undefined;
      if (chunk[0] === PARSE && text !== undefined) prepared.set(cString(chunk, 5), text);
      if (text !== undefined) lastStatement.set(client, text);
      if (messages++ === 1 && statement) {
        firstStatements.push(chunk.toString("latin1"));
        if (cutThis) {
          client.destroy();
          upstream.destroy();
          return;
        }
      }
      if (text !== undefined && downAfter?.pattern.test(text)) {
        answering = downAfter;
        downAfter = undefined;
      }
      upstream.write(chunk);
    });
    // The answer, message by message: what precedes the statement's result (its description,
    // which the client waits for before it sends the statement's execution) goes through; from
    // its first row or its completion on, nothing does, and once the database is ready for the
    // next statement (the statement committed) it goes down.
    let answer = Buffer.alloc(0);
    let losing = false;
    const loseResult = (chunk: Buffer) => {
      answer = Buffer.concat([answer, chunk]);
      const through: Buffer[] = [];
      while (answer.length >= 5 && answer.length >= 1 + answer.readInt32BE(1)) {
        const size = 1 + answer.readInt32BE(1);
        const [type] = answer;
        if (type === READY_FOR_QUERY) {
          down();
          answering?.wentDown();
          return;
        }
        if (type === DATA_ROW || type === COMMAND_COMPLETE) losing = true;
        if (!losing) through.push(answer.subarray(0, size));
        answer = answer.subarray(size);
      }
      if (through.length > 0) client.write(Buffer.concat(through));
    };
    upstream.on("data", (chunk) => {
      if (client.destroyed) return;
      // The answer ends with ReadyForQuery: 'Z', length 5, the transaction status.
      const end = chunk.length >= 6 && chunk[chunk.length - 6] === READY_FOR_QUERY;
      if (answering?.answer === "lost") {
        loseResult(chunk);
        return;
      }
      if (answering?.answer === "delivered" && end) {
        const { wentDown } = answering;
        answering = undefined;
        // Down once the answer has reached the client.
        client.write(chunk, () => {
          down();
          wentDown();
        });
        return;
      }
      client.write(chunk);
    });
    client.on("close", () => lastStatement.delete(client));
    for (const event of ["error", "close"]) {
      client.on(event, () => {
        if (!cut.has(client)) upstream.destroy();
      });
      upstream.on(event, () => client.destroy());
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  const proxied = new URL(url);
  proxied.port = String(port);
  // Down as a stopped server is: connections refused, not accepted and closed (a server that
  // accepts and closes is another case: test/store/postgres-closed-connection.test.ts).
  const down = () => {
    if (server.listening) server.close();
    for (const socket of sockets) socket.destroy();
    sockets.clear();
  };
  const proxy: PgProxy = {
    url: proxied.toString(),
    firstStatements,
    cutNextAtFirstStatement: () => {
      cutNext = true;
    },
    holdNextConnection: () => {
      holdNext = true;
    },
    held: 0,
    downAfterAnswer: (pattern) =>
      new Promise((wentDown) => {
        downAfter = { pattern, answer: "delivered", wentDown };
      }),
    downLosingAnswer: (pattern) =>
      new Promise((wentDown) => {
        downAfter = { pattern, answer: "lost", wentDown };
      }),
    cutClientOf: (pattern) => {
      for (const [client, statement] of lastStatement) {
        if (client.destroyed || !pattern.test(statement)) continue;
        cut.add(client);
        client.destroy();
      }
    },
    down,
    up: () => {
      if (!server.listening) server.listen(port, "127.0.0.1");
    },
    close: () => {
      server.close();
      down();
    },
  };
  return proxy;
}

/** The NUL-terminated string at `offset` of a protocol message. */
function cString(message: Buffer, offset: number): string {
  const end = message.indexOf(0, offset);
  return message.toString("latin1", offset, end < 0 ? message.length : end);
}
