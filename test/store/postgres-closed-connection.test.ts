import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { runCommand } from "../support/process.js";

// postgres.js 3.4.9 writes a query's small messages on the next tick; when the server closed the
// connection in between, that write hit a null socket and threw where nothing could catch it, so
// the whole process died (porsager/postgres#1208; the chaos test's database outages hit it). The
// patch in patches/ (applied by `npm install`) fails the query instead, as any closed connection
// does. A process of its own, because the bug ends the process that meets it.

const url = process.env.TEST_DATABASE_URL;

const SCRIPT = [
  'import postgres from "postgres";',
  "let closed;",
  "const closedOnce = new Promise((resolve) => (closed = resolve));",
  "const sql = postgres(process.env.URL, { onnotice: () => {}, onclose: () => closed() });",
  "const conn = await sql.reserve();",
  'const [{ pid }] = await conn.unsafe("select pg_backend_pid() as pid");',
  'await sql.unsafe("select pg_terminate_backend($1)", [pid]);',
  "await closedOnce;",
  "for (const n of [2, 3]) {",
  '  try { await conn.unsafe("select " + n); console.log("answered"); }',
  '  catch (err) { console.log("refused " + err.code); }',
  "}",
  "conn.release();",
  'const [{ alive }] = await sql.unsafe("select 1 as alive");',
  'console.log("pool answers " + alive);',
  "await sql.end({ timeout: 1 });",
].join("\n");

describe.skipIf(!url)("a Postgres connection the server closed", () => {
  it("fails the queries sent on it with CONNECTION_CLOSED, and the process lives on", async () => {
    const res = await runCommand("node", ["--input-type=module", "-e", SCRIPT], {
      cwd: process.cwd(),
      env: { PATH: process.env.PATH, URL: url },
    });
    expect(res.stderr).not.toContain("TypeError");
    expect(res.stdout.trim().split("\n")).toEqual([
      "refused CONNECTION_CLOSED",
      "refused CONNECTION_CLOSED",
      "pool answers 1",
    ]);
    expect(res.code).toBe(0);
  });

  // The backend's FATAL error came while the query ran, was kept for a ReadyForQuery that never
  // came, and the next backend's first ReadyForQuery read it: the first query after the reconnect
  // failed with the old backend's 57P01 (porsager/postgres#1223). The patch forgets it on close.
  it("answers the first query after a backend terminated mid-query from the new backend", async () => {
    const sql = postgres(url ?? "", { max: 1, onnotice: () => {} });
    const admin = postgres(url ?? "", { max: 1, onnotice: () => {} });
    try {
      const [backend] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
      if (!backend) throw new Error("no backend pid");
      const { pid } = backend;
      const sleeping = sql`select pg_sleep(60)`.then(
        () => "answered",
        (err: { code?: string }) => err.code,
      );
      for (;;) {
        const [row] = await admin`select state, query from pg_stat_activity where pid = ${pid}`;
        if (row?.state === "active" && String(row.query).includes("pg_sleep")) break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await admin`select pg_terminate_backend(${pid})`;
      expect(await sleeping).toBe("CONNECTION_CLOSED");
      expect(await sql`select 1 as n`).toEqual([{ n: 1 }]);
    } finally {
      await sql.end({ timeout: 1 });
      await admin.end({ timeout: 1 });
    }
  });
});
