import { randomUUID } from "node:crypto";
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, returnedRows } from "../../src/store/db.js";
import { insertKey } from "../../src/store/keys.js";
import { keyTakingToken, takeToken } from "../../src/store/rate-limits.js";
import * as schema from "../../src/store/schema.js";
import { BACKENDS, openTestDatabase, type TestDatabase } from "../support/db.js";

// A request's count is the write most requests make; it commits without waiting for the log's
// flush (src/store/rate-limits.ts), and nothing else does.

const commitMode = async (db: Database) =>
  returnedRows<{ mode: string }>(
    await db.execute(sql`select current_setting('synchronous_commit') as mode`),
  )[0]?.mode;

const tokensOf = async (db: Database, bucket: string) =>
  Number(
    returnedRows<{ tokens: number }>(
      await db.execute(sql`select tokens from rate_buckets where bucket = ${bucket}`),
    )[0]?.tokens,
  );

describe.each(BACKENDS)("a request's rate count on %s", (backend) => {
  let database: TestDatabase;
  /** One connection, so that a setting left on it would be seen by the next statement. */
  let one: Database;
  let client: postgres.Sql | undefined;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    if (database.url) client = postgres(database.url, { max: 1, onnotice: () => {} });
    // The embedded database has one connection.
    one = client ? drizzle({ client, schema }) : database.db;
  });
  afterAll(async () => {
    await client?.end();
    await database.destroy();
  });

  it("takes a key's token in a transaction that commits without waiting for the log's flush", async () => {
    const hash = randomUUID();
    const key = await insertKey(database.db, { name: "counted", admin: false, hash, prefix: "p" });
    const mode = await database.db.transaction(async (tx) => {
      const found = await keyTakingToken(tx, hash, 60);
      expect(found?.key.id).toBe(key.id);
      expect(found?.taken).toBe(true);
      return commitMode(tx);
    });
    expect(mode).toBe("off");
    expect(await tokensOf(database.db, key.id)).toBe(59);
  });

  it("takes a bucket's token the same way", async () => {
    const bucket = `stream:${randomUUID()}`;
    const mode = await database.db.transaction(async (tx) => {
      expect(await takeToken(tx, bucket, 60)).toBe(0);
      return commitMode(tx);
    });
    expect(mode).toBe("off");
    expect(await tokensOf(database.db, bucket)).toBe(59);
  });

  it("leaves the connection committing as it did: the next statement waits for the flush", async () => {
    const hash = randomUUID();
    await insertKey(one, { name: "then", admin: false, hash, prefix: "p" });
    expect(await commitMode(one)).toBe("on");
    expect((await keyTakingToken(one, hash, 60))?.taken).toBe(true);
    expect(await takeToken(one, `stream:${randomUUID()}`, 60)).toBe(0);
    expect(await commitMode(one)).toBe("on");
  });

  it("changes nothing of the commit where no token was taken: a revoked key's read", async () => {
    const hash = randomUUID();
    const key = await insertKey(database.db, { name: "revoked", admin: false, hash, prefix: "p" });
    await database.db.execute(sql`update api_keys set revoked_at = now() where id = ${key.id}`);
    const mode = await database.db.transaction(async (tx) => {
      expect((await keyTakingToken(tx, hash, 60))?.taken).toBe(false);
      return commitMode(tx);
    });
    expect(mode).toBe("on");
  });
});
