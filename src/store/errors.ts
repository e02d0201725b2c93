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
