import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import type { Database } from "./db.js";
import { serverSecrets } from "./schema.js";

/**
 * The secret called `name`, made (32 random bytes, base64url) by the first instance that asks for
 * it; every instance on the database then gets the same one.
 */
export async function sharedSecret(db: Database, name: string): Promise<Buffer> {
  await db
    .insert(serverSecrets)
    .values({ name, secret: randomBytes(32).toString("base64url"), createdAt: new Date() })
    .onConflictDoNothing();
  const [row] = await db.select().from(serverSecrets).where(eq(serverSecrets.name, name));
  if (!row) throw new Error(`server secret ${name} was not stored`);
  return Buffer.from(row.secret, "base64url");
}
