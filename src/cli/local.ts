import type { Command } from "commander";
import { issueKey } from "../auth/keys.js";
import { loadConfig } from "../config.js";
import { type DatabaseHandle, openDatabase } from "../store/db.js";
import { listKeys, revokeKey } from "../store/keys.js";
import type { Output } from "./render.js";

// Commands that act on the server's own database (same configuration as the server: DATABASE_URL
// or the embedded database under AGENT_BRIDGE_DATA_DIR) rather than through its API. They work
// while the server is down, which is how the first key of a fresh install is made.

async function withDatabase<T>(use: (database: DatabaseHandle) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const database = await openDatabase(
    config.databaseUrl
      ? { kind: "postgres", url: config.databaseUrl }
      : { kind: "pglite", dataDir: config.dataDir },
  );
  try {
    return await use(database);
  } finally {
    await database.close();
  }
}

export function addLocalCommands(program: Command, out: Output): void {
  program
    .command("migrate")
    .description("bring the database's schema up to date (the server also does this at start-up)")
    .action(async () => {
      const kind = await withDatabase(async (database) => database.kind);
      out.stderr.write(`the ${kind} database is up to date\n`);
    });

  const keys = program
    .command("keys")
    .description(
      "create, list and revoke API keys in the server's database (works while it is down)",
    );
  keys
    .command("create")
    .description("make a key; prints it on stdout, this once (only its hash is stored)")
    .requiredOption("--name <name>", "what the key is for, e.g. ci")
    .option("--admin", "an admin key: sees every tenant and manages keys")
    .option("--json", "print the key with its record as JSON")
    .action(async (options: { name: string; admin?: boolean; json?: boolean }) => {
      const { key, row } = await withDatabase((d) =>
        issueKey(d.db, { name: options.name, admin: Boolean(options.admin) }),
      );
      if (options.json) {
        out.stdout.write(
          `${JSON.stringify({ id: row.id, name: row.name, admin: row.admin, key }, null, 2)}\n`,
        );
        return;
      }
      out.stderr.write(
        `created ${row.admin ? "admin " : ""}key ${row.id} "${row.name}"; it is shown this once:\n`,
      );
      out.stdout.write(`${key}\n`);
    });
  keys
    .command("list")
    .alias("ls")
    .description("list keys (without their secrets)")
    .action(async () => {
      const rows = await withDatabase((d) => listKeys(d.db));
      const lines = [["ID", "NAME", "PREFIX", "ROLE", "CREATED", "LAST USED", "REVOKED"]];
      for (const k of rows) {
        lines.push([
          k.id,
          k.name,
          `${k.prefix}…`,
          k.admin ? "admin" : "user",
          k.createdAt.toISOString(),
          k.lastUsedAt?.toISOString() ?? "-",
          k.revokedAt?.toISOString() ?? "-",
        ]);
      }
      const widths =
        lines[0]?.map((_, i) => Math.max(...lines.map((l) => (l[i] ?? "").length))) ?? [];
      for (const line of lines) {
        out.stdout.write(
          `${line
            .map((cell, i) => cell.padEnd(widths[i] ?? 0))
            .join("  ")
            .trimEnd()}\n`,
        );
      }
    });
  keys
    .command("revoke")
    .description("revoke a key: it stops working at once")
    .argument("<id>", "the key's id (from keys list)")
    .action(async (id: string) => {
      if (!/^[0-9a-f-]{36}$/i.test(id)) throw new Error(`not a key id: ${id} (see keys list)`);
      const row = await withDatabase((d) => revokeKey(d.db, id));
      if (!row) throw new Error(`no key with id ${id}`);
      out.stderr.write(`revoked key ${row.id} "${row.name}"\n`);
    });
}
