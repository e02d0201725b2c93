// What a failed statement says about itself. postgres-js and PGlite report a failure's code (a
// SQLSTATE, or a connection error's code) under their own names, and Drizzle wraps both in
// `cause`: every question here walks the chain of causes.

interface DriverError {
  code?: unknown;
  constraint_name?: string;
  constraint?: string;
  message?: unknown;
}

function* causes(err: unknown): Generator<DriverError> {
  for (let e: unknown = err; e && typeof e === "object"; e = (e as { cause?: unknown }).cause) {
    yield e as DriverError;
  }
}

/** Errors a connection raises, not a statement: the same statement may work once it is back. */
const CONNECTION_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
]);

const isSqlState = (code: string) => /^[0-9A-Z]{5}$/.test(code);

/** The first code in the chain that is the database's: a connection error's or a SQLSTATE. */
function dbCode(err: unknown): string | undefined {
  for (const e of causes(err)) {
    if (typeof e.code === "string" && (CONNECTION_ERRORS.has(e.code) || isSqlState(e.code))) {
      return e.code;
    }
  }
  return undefined;
}

/** The constraint a failed statement violated when it broke a unique index, else undefined. */
export function uniqueViolation(err: unknown): string | undefined {
  for (const e of causes(err)) {
    if (e.code === "23505") return e.constraint_name ?? e.constraint ?? "";
  }
  return undefined;
}

/** Whether a failed statement broke a foreign key (e.g. its parent row was deleted meanwhile). */
export function foreignKeyViolation(err: unknown): boolean {
  for (const e of causes(err)) if (e.code === "23503") return true;
  return false;
}

/**
 * Whether a failed statement may succeed if tried again later: the server was unreachable, shut
 * down or overloaded (SQLSTATE classes 08, 53 and 57P), or the transaction lost a race (40001,
 * 40P01). A refused value or a broken constraint is not: the same statement fails again.
 */
export function transientDbError(err: unknown): boolean {
  for (const { code } of causes(err)) {
    if (typeof code !== "string") continue;
    if (CONNECTION_ERRORS.has(code)) return true;
    if (/^(08|53|57P)/.test(code) || code === "40001" || code === "40P01") return true;
  }
  return false;
}

/** A failure of the database as one line that holds no SQL, parameters or data. */
export function describeDbError(err: unknown): string {
  const code = dbCode(err);
  if (code === undefined) return "the database failed";
  return CONNECTION_ERRORS.has(code)
    ? `the database is unreachable (${code})`
    : `the database refused the statement (SQLSTATE ${code})`;
}

/**
 * An error as a line safe to show a client: a database error by its code only (Drizzle's message
 * quotes the failed SQL and its parameters), anything else by its message.
 */
export function publicErrorText(err: unknown): string {
  const fromDatabase =
    dbCode(err) !== undefined ||
    [...causes(err)].some(
      (e) => typeof e.message === "string" && e.message.startsWith("Failed query"),
    );
  if (fromDatabase) return describeDbError(err);
  return err instanceof Error ? err.message : String(err);
}
