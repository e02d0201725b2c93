/**
 * The constraint a failed statement violated when it broke a unique index, else undefined.
 * postgres-js and PGlite report it under different names, and Drizzle wraps both in `cause`.
 */
export function uniqueViolation(err: unknown): string | undefined {
  for (let e: unknown = err; e && typeof e === "object"; e = (e as { cause?: unknown }).cause) {
    const pg = e as { code?: string; constraint_name?: string; constraint?: string };
    if (pg.code === "23505") return pg.constraint_name ?? pg.constraint ?? "";
  }
  return undefined;
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

/**
 * Whether a failed statement may succeed if tried again later: the server was unreachable, shut
 * down or overloaded (SQLSTATE classes 08, 53 and 57P), or the transaction lost a race (40001,
 * 40P01). A refused value or a broken constraint is not: the same statement fails again.
 */
export function transientDbError(err: unknown): boolean {
  for (let e: unknown = err; e && typeof e === "object"; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== "string") continue;
    if (CONNECTION_ERRORS.has(code)) return true;
    if (/^(08|53|57P)/.test(code) || code === "40001" || code === "40P01") return true;
  }
  return false;
}

/** A failure of the database as one line that holds no SQL, parameters or data. */
export function describeDbError(err: unknown): string {
  for (let e: unknown = err; e && typeof e === "object"; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && CONNECTION_ERRORS.has(code)) {
      return `the database is unreachable (${code})`;
    }
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) {
      return `the database refused the statement (SQLSTATE ${code})`;
    }
  }
  return "the database failed";
}

/** Whether a failed statement broke a foreign key (e.g. its parent row was deleted meanwhile). */
export function foreignKeyViolation(err: unknown): boolean {
  for (let e: unknown = err; e && typeof e === "object"; e = (e as { cause?: unknown }).cause) {
    if ((e as { code?: unknown }).code === "23503") return true;
  }
  return false;
}

/**
 * An error as a line safe to show a client: a database error by its code only (Drizzle's message
 * quotes the failed SQL and its parameters), anything else by its message.
 */
export function publicErrorText(err: unknown): string {
  for (let e: unknown = err; e && typeof e === "object"; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && (CONNECTION_ERRORS.has(code) || /^[0-9A-Z]{5}$/.test(code)))
      return describeDbError(err);
    if (e instanceof Error && e.message.startsWith("Failed query")) return describeDbError(err);
  }
  return err instanceof Error ? err.message : String(err);
}
