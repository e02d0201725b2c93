import { once } from "node:events";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { issueKey } from "../src/auth/keys.js";
import { openDatabase } from "../src/store/db.js";
import { seedDataDir } from "./support/pglite-template.js";
import { createServerDatabase } from "./support/postgres-databases.js";
import { freePort, runServerToExit, startServer } from "./support/server.js";

// A start-up that cannot succeed says why in one line on stderr, `agent-bridge: <what is wrong
// and what to do>`, exits 1, and leaves nothing open: never a stack trace, never a password.

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const dataDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "agent-bridge-startup-"));
  dirs.push(dir);
  return dir;
};

async function startFails(env: NodeJS.ProcessEnv) {
  const result = await runServerToExit({ AGENT_BRIDGE_AUTH: "none", PORT: "0", ...env });
  expect(result.code).toBe(1);
  return result;
}

describe("a start-up that cannot succeed", () => {
  it("names a Postgres server nothing listens on, without the URL's password", async () => {
    const port = await freePort();
    const { stderr, output } = await startFails({
      DATABASE_URL: `postgres://agent:s3cret-pw@127.0.0.1:${port}/bridge`,
    });
    expect(stderr).toBe(
      `agent-bridge: cannot connect to the Postgres server at 127.0.0.1:${port}/bridge (connection refused); check that it is running and that DATABASE_URL is right\n`,
    );
    expect(output).not.toContain("s3cret-pw");
  });

  it("names a port another process listens on", async () => {
    const taken = createServer().listen(0, "127.0.0.1");
    await once(taken, "listening");
    const { port } = taken.address() as { port: number };
    try {
      // Seeded: the port is taken after the database opens, which need not run initdb for it.
      const data = dataDir();
      await seedDataDir(data);
      const { stderr } = await startFails({ AGENT_BRIDGE_DATA_DIR: data, PORT: String(port) });
      expect(stderr).toBe(
        `agent-bridge: port ${port} on 127.0.0.1 is in use by another process; stop it, or set PORT to a free port\n`,
      );
    } finally {
      taken.close();
    }
  });

  it("names a data directory it cannot use", async () => {
    const file = path.join(dataDir(), "a-file");
    writeFileSync(file, "");
    const { stderr } = await startFails({ AGENT_BRIDGE_DATA_DIR: file });
    expect(stderr).toBe(
      `agent-bridge: cannot use ${file} as the data directory (not a directory); make it a directory this user can write to, or set AGENT_BRIDGE_DATA_DIR to one\n`,
    );
  });

  it("names an MCP configuration file it cannot use, and what is wrong in it", async () => {
    const file = path.join(dataDir(), "mcp.json");
    writeFileSync(file, JSON.stringify({ mcpServers: { github: { url: "https://x" } } }));
    const { stderr } = await startFails({ AGENT_BRIDGE_MCP_CONFIG: file });
    expect(stderr).toBe(
      `agent-bridge: invalid configuration:\n  AGENT_BRIDGE_MCP_CONFIG: ${JSON.stringify(file)}: mcpServers.github: expected a stdio server {"command", "args"?, "env"?} or a remote one {"type": "sse" | "http", "url", "headers"?}\n`,
    );
  });

  it("names the sandbox it was asked for and cannot make, and what to install", async () => {
    const data = dataDir();
    await seedDataDir(data);
    // A PATH without bubblewrap on it, as on a machine without the package.
    const { stderr } = await startFails({
      AGENT_BRIDGE_DATA_DIR: data,
      AGENT_BRIDGE_SANDBOX: "on",
      PATH: "/nonexistent",
    });
    // After the log's lines of the database it opened (and closed again).
    expect(stderr.trimEnd().split("\n").at(-1)).toBe(
      "agent-bridge: AGENT_BRIDGE_SANDBOX=on, but runs cannot be sandboxed: bubblewrap (bwrap) is not installed; install them (Debian: apt-get install bubblewrap socat), or set AGENT_BRIDGE_SANDBOX=auto to run without one where it is missing",
    );
  });

  it("refuses agents of several tenants (two API keys) where no sandbox can be made, unless AGENT_BRIDGE_SANDBOX=off", async () => {
    const data = dataDir();
    await seedDataDir(data);
    const database = await openDatabase({ kind: "pglite", dataDir: data });
    try {
      await issueKey(database.db, { name: "tenant a", admin: true });
      await issueKey(database.db, { name: "tenant b", admin: false });
    } finally {
      await database.close();
    }
    // A PATH without bubblewrap on it, as on a machine without the package; `auto` is the default.
    const env = { AGENT_BRIDGE_DATA_DIR: data, AGENT_BRIDGE_AUTH: "keys", PATH: "/nonexistent" };
    const { stderr } = await startFails(env);
    expect(stderr.trimEnd().split("\n").at(-1)).toBe(
      "agent-bridge: 2 API keys could run agents here, but runs cannot be sandboxed: bubblewrap (bwrap) is not installed; install them (Debian: apt-get install bubblewrap socat), or set AGENT_BRIDGE_SANDBOX=off to run the agents of several tenants without one",
    );
    const server = await startServer({ ...env, AGENT_BRIDGE_SANDBOX: "off", PORT: "0" });
    try {
      const ready = await (await fetch(`${server.url}/readyz`)).json();
      expect(ready.sandbox).toEqual({ enabled: false, reason: "AGENT_BRIDGE_SANDBOX=off" });
    } finally {
      await server.stop();
    }
  });

  it("names an embedded database that cannot be opened", async () => {
    const dir = dataDir();
    mkdirSync(path.join(dir, "pgdata"));
    writeFileSync(path.join(dir, "pgdata", "PG_VERSION"), "not a version\n");
    const { stderr } = await startFails({ AGENT_BRIDGE_DATA_DIR: dir });
    expect(stderr).toBe(
      `agent-bridge: the embedded database in ${path.join(dir, "pgdata")} cannot be opened (PGlite failed to initialize properly); restore it from a backup, or move it aside to start with an empty one\n`,
    );
  });

  it.runIf(process.env.TEST_DATABASE_URL)(
    "names a schema the migrations cannot bring up to date, on a Postgres server",
    async () => {
      const { url, drop } = await createServerDatabase();
      try {
        const sql = postgres(url, { max: 1 });
        await sql`create table run_events (x int)`;
        await sql.end();
        const { stderr } = await startFails({ DATABASE_URL: url });
        // The same words on the embedded database: both go through one migration step.
        expect(stderr).toBe(
          'agent-bridge: the database\'s schema cannot be brought up to date (relation "run_events" already exists); it holds tables this version of agent-bridge did not make: use an empty database, or restore a backup\n',
        );
      } finally {
        await drop();
      }
    },
  );
});
