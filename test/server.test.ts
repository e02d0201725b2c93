import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { getTableName, is } from "drizzle-orm";
import { PgTable } from "drizzle-orm/pg-core";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import * as schema from "../src/store/schema.js";
import { createServerDatabase } from "./support/postgres-databases.js";
import { runServerToExit, startServer } from "./support/server.js";

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function createSession(url: string, title: string) {
  const res = await fetch(`${url}/v1/sessions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ title }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { id: string };
}

describe("the service process", () => {
  it("runs on the embedded database and keeps a session across a restart", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "agent-bridge-data-"));
    dirs.push(dataDir);
    const env = { AGENT_BRIDGE_DATA_DIR: dataDir };

    const first = await startServer(env);
    const ready = await (await fetch(`${first.url}/readyz`)).json();
    expect(ready.database).toBe("pglite");
    const { id } = await createSession(first.url, "survives restarts");
    expect(await first.stop("SIGTERM")).toBe(0);

    const second = await startServer(env);
    try {
      const res = await fetch(`${second.url}/v1/sessions/${id}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ id, title: "survives restarts" });
    } finally {
      await second.stop();
    }
  });

  it.runIf(process.env.TEST_DATABASE_URL)(
    "runs on a real Postgres server: creates its tables at start-up and keeps a session across a restart",
    async () => {
      const { url: databaseUrl, drop } = await createServerDatabase();
      try {
        const first = await startServer({ DATABASE_URL: databaseUrl });
        expect((await (await fetch(`${first.url}/readyz`)).json()).database).toBe("postgres");
        const { id } = await createSession(first.url, "on postgres");
        await first.stop();

        const sql = postgres(databaseUrl, { max: 1 });
        const tables =
          await sql`select table_name from information_schema.tables where table_schema = 'public'`;
        await sql.end();
        // Every table of the schema, and nothing else.
        const expected = Object.values(schema)
          .filter((t) => is(t, PgTable))
          .map((t) => getTableName(t))
          .sort();
        expect(tables.map((t) => t.table_name).sort()).toEqual(expected);

        const second = await startServer({ DATABASE_URL: databaseUrl });
        try {
          expect((await fetch(`${second.url}/v1/sessions/${id}`)).status).toBe(200);
        } finally {
          await second.stop();
        }
      } finally {
        await drop();
      }
    },
  );

  it("refuses to start on bad configuration, one line per problem", async () => {
    const { code, output } = await runServerToExit({
      PORT: "x",
      AGENT_BRIDGE_PERMISSION_MODE: "yolo",
    });
    expect(code).toBe(1);
    expect(output).toContain("PORT: expected a whole number");
    expect(output).toContain("AGENT_BRIDGE_PERMISSION_MODE: expected one of: default, acceptEdits");
  });
});
