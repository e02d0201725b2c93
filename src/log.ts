import { type DestinationStream, type Logger as PinoLogger, pino } from "pino";

// Structured logs through pino: one JSON object per line on stderr, so that logs stay greppable
// and never interleave with anything the service prints for people on stdout.

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

/**
 * A logger writing lines at `level` and above: `{"level":"info","time":"<ISO>", …base,
 * …ambient, "msg":…, …fields}`. `ambient` adds fields of the moment a line is written (the active
 * span's trace id, when tracing is on). Without `write`, lines go to stderr synchronously, so
 * that none is lost when the process exits.
 */
export function createLogger(
  level: LogLevel = "info",
  base: Record<string, unknown> = {},
  write?: (line: string) => void,
  ambient?: () => Record<string, unknown> | undefined,
): Logger {
  const destination: DestinationStream = write
    ? { write: (line) => write(line.endsWith("\n") ? line.slice(0, -1) : line) }
    : pino.destination({ dest: 2, sync: true });
  return wrap(
    pino(
      {
        level,
        // No pid or hostname: a line carries what the bridge gives it and nothing else.
        base,
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }) },
        // A fresh object: pino merges the line's fields into what the mixin returns.
        mixin: ambient && (() => ({ ...ambient() })),
      },
      destination,
    ),
  );
}

/** The bridge's Logger over a pino logger. */
function wrap(logger: PinoLogger): Logger {
  // The message goes in the object, ahead of the fields, so that a line reads its message before
  // its details (pino would put a message given apart last).
  return {
    debug: (msg, fields) => logger.debug({ msg, ...fields }),
    info: (msg, fields) => logger.info({ msg, ...fields }),
    warn: (msg, fields) => logger.warn({ msg, ...fields }),
    error: (msg, fields) => logger.error({ msg, ...fields }),
    child: (fields) => wrap(logger.child(fields)),
  };
}

/** A logger that drops everything: the default for library code and tests. */
export const silentLogger: Logger = wrap(pino({ level: "silent" }, { write: () => {} }));

/**
 * An error and its causes in one line, for the operator's log: Drizzle's "Failed query: …" says
 * which statement failed, and only its cause says why (the driver's own words and code).
 */
export function errorText(err: unknown): string {
  return causes(err, true);
}

/**
 * `err` and up to 8 causes; with `inner`, an AggregateError's errors too (each without its own):
 * bounded, even for an error made to hold itself.
 */
function causes(err: unknown, inner: boolean): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; e !== undefined && e !== null && depth < 8; depth++) {
    if (!(e instanceof Error)) {
      parts.push(String(e));
      break;
    }
    const code = (e as { code?: unknown }).code;
    let text = e.name === "Error" ? e.message : e.message ? `${e.name}: ${e.message}` : e.name;
    if (typeof code === "string" && !text.includes(code)) text = `${text} [${code}]`;
    // A connection to a name with several addresses fails with one error per address, and an
    // empty message of its own.
    if (inner && e instanceof AggregateError && e.errors.length > 0)
      text = `${text} (${e.errors
        .slice(0, 4)
        .map((one) => causes(one, false))
        .join("; ")})`;
    parts.push(text);
    e = e.cause;
  }
  return parts.join(": ");
}

/** An error's message, causes and stack as log fields: for the operator's log, never for a response. */
export function errorFields(err: unknown): { error: string; stack?: string } {
  if (!(err instanceof Error)) return { error: String(err) };
  return { error: errorText(err), ...(err.stack ? { stack: err.stack } : {}) };
}
