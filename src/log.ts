// A small structured logger: one JSON object per line on stderr, so that logs stay greppable and
// never interleave with anything the service prints for people on stdout.

export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

/**
 * A logger writing lines at `level` and above. `ambient` adds fields of the moment a line is
 * written (the active span's trace id, when tracing is on).
 */
export function createLogger(
  level: LogLevel = "info",
  base: Record<string, unknown> = {},
  write: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
  ambient?: () => Record<string, unknown> | undefined,
): Logger {
  const emit = (lvl: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (ORDER[lvl] < ORDER[level]) return;
    const time = new Date().toISOString();
    write(JSON.stringify({ time, level: lvl, msg, ...base, ...ambient?.(), ...fields }));
  };
  return {
    debug: (msg, fields) => emit("debug", msg, fields),
    info: (msg, fields) => emit("info", msg, fields),
    warn: (msg, fields) => emit("warn", msg, fields),
    error: (msg, fields) => emit("error", msg, fields),
    child: (fields) => createLogger(level, { ...base, ...fields }, write, ambient),
  };
}

/** A logger that drops everything: the default for library code and tests. */
export const silentLogger: Logger = createLogger("error", {}, () => {});

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
