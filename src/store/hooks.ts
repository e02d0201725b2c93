import { randomUUID } from "node:crypto";
import { asc, eq, isNotNull } from "drizzle-orm";
import type { Database } from "./db.js";
import { type HookRow, hooks } from "./schema.js";

// Hooks themselves: created, read, listed, updated and deleted by name. What they receive is
// hook-deliveries.ts; the callbacks of the runs they start, callbacks.ts.

export type HookInput = Omit<HookRow, "id" | "createdAt" | "updatedAt">;

export async function insertHook(db: Database, input: HookInput): Promise<HookRow> {
  const now = new Date();
  const [row] = await db
    .insert(hooks)
    .values({ id: randomUUID(), ...input, createdAt: now, updatedAt: now })
    .returning();
  if (!row) throw new Error("insert into hooks returned no row");
  return row;
}

export async function getHookByName(db: Database, name: string): Promise<HookRow | undefined> {
  const [row] = await db.select().from(hooks).where(eq(hooks.name, name));
  return row;
}

export async function getHookById(db: Database, id: string): Promise<HookRow | undefined> {
  const [row] = await db.select().from(hooks).where(eq(hooks.id, id));
  return row;
}

export async function listHooks(db: Database): Promise<HookRow[]> {
  return db.select().from(hooks).orderBy(asc(hooks.name));
}

/** The ids of every hook there is. */
export async function hookIds(db: Database): Promise<Set<string>> {
  const rows = await db.select({ id: hooks.id }).from(hooks);
  return new Set(rows.map((row) => row.id));
}

export async function scheduledHooks(db: Database): Promise<HookRow[]> {
  return db.select().from(hooks).where(isNotNull(hooks.schedule));
}

export async function updateHook(
  db: Database,
  name: string,
  input: Omit<HookInput, "name" | "ownerKeyId">,
): Promise<HookRow | undefined> {
  const [row] = await db
    .update(hooks)
    .set({ ...input, updatedAt: new Date() })
    .where(eq(hooks.name, name))
    .returning();
  return row;
}

export async function deleteHook(db: Database, name: string): Promise<boolean> {
  const deleted = await db.delete(hooks).where(eq(hooks.name, name)).returning({ id: hooks.id });
  return deleted.length > 0;
}
