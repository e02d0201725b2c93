import type { Command } from "commander";
import { PERMISSION_MODES, PermissionMode } from "../agents/settings.js";
import { issueKey } from "../auth/keys.js";
import { type PolicyInput, policyColumns, policyOf } from "../auth/policy.js";
import { type Config, databaseTarget, loadConfig } from "../config.js";
import { type DatabaseHandle, openDatabase } from "../store/db.js";
import { listKeys, revokeKey, updateKeyPolicy } from "../store/keys.js";
import type { Output } from "./render.js";

// Commands that act on the server's own database (same configuration as the server: DATABASE_URL
// or the embedded database under AGENT_BRIDGE_DATA_DIR) rather than through its API. They work
// while the server is down, which is how the first key of a fresh install is made.

async function withDatabase<T>(
  use: (database: DatabaseHandle & { config: Config }) => Promise<T>,
): Promise<T> {
  const config = loadConfig();
  const database = await openDatabase(databaseTarget(config));
  try {
    return await use(Object.assign(database, { config }));
  } finally {
    await database.close();
  }
}

function requireKeyId(id: string) {
  if (!/^[0-9a-f-]{36}$/i.test(id)) throw new Error(`not a key id: ${id} (see keys list)`);
}

interface PolicyOptions {
  permissionModes?: string;
  workRoots?: string;
  maxBudgetUsd?: string;
  worktrees?: boolean;
}

/** The options of a key's policy (src/auth/policy.ts), shared by `keys create` and `keys update`. */
function withPolicyOptions(command: Command): Command {
  return command
    .option(
      "--permission-modes <modes>",
      `comma-separated modes its sessions may use (${PERMISSION_MODES.join(", ")}), or "default"`,
    )
    .option(
      "--work-roots <dirs>",
      'comma-separated dirs (inside AGENT_BRIDGE_ALLOWED_ROOTS) its sessions may work in, or "default"',
    )
    .option("--max-budget-usd <usd>", 'spending cap per calendar month (UTC), or "none"')
    .option("--worktrees", "its sessions may use worktree mode (the default)")
    .option("--no-worktrees", "its sessions may not use worktree mode");
}

const listOption = (value: string) =>
  value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);

function policyInput(options: PolicyOptions): PolicyInput {
  const input: PolicyInput = {};
  if (options.permissionModes !== undefined) {
    input.permission_modes =
      options.permissionModes === "default"
        ? null
        : listOption(options.permissionModes).map((mode) => {
            const parsed = PermissionMode.safeParse(mode);
            if (!parsed.success) {
              throw new Error(
                `--permission-modes: ${mode} is not one of ${PERMISSION_MODES.join(", ")}`,
              );
            }
            return parsed.data;
          });
  }
  if (options.workRoots !== undefined) {
    input.work_roots = options.workRoots === "default" ? null : listOption(options.workRoots);
  }
  if (options.maxBudgetUsd !== undefined) {
    const usd = Number(options.maxBudgetUsd);
    if (options.maxBudgetUsd !== "none" && !(Number.isFinite(usd) && usd >= 0)) {
      throw new Error(
        `--max-budget-usd: expected a number of USD or "none", got ${options.maxBudgetUsd}`,
      );
    }
    input.max_budget_usd = options.maxBudgetUsd === "none" ? null : usd;
  }
  if (options.worktrees !== undefined) input.worktrees = options.worktrees;
  return input;
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
  withPolicyOptions(
    keys
      .command("create")
      .description("make a key; prints it on stdout, this once (only its hash is stored)")
      .requiredOption("--name <name>", "what the key is for, e.g. ci")
      .option("--admin", "an admin key: sees every tenant and manages keys")
      .option("--json", "print the key with its record as JSON"),
  ).action(async (options: PolicyOptions & { name: string; admin?: boolean; json?: boolean }) => {
    // Read before the database is opened: a bad option stops the command without touching it.
    const policy = policyInput(options);
    const { key, row } = await withDatabase(async (d) =>
      issueKey(d.db, {
        name: options.name,
        admin: Boolean(options.admin),
        ...(await policyColumns(policy, d.config)),
      }),
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
      const config = loadConfig();
      const lines = [
        [
          "ID",
          "NAME",
          "PREFIX",
          "ROLE",
          "PERMISSION MODES",
          "WORK ROOTS",
          "BUDGET/MONTH",
          "WORKTREES",
          "CREATED",
          "LAST USED",
          "REVOKED",
        ],
      ];
      for (const k of rows) {
        const policy = policyOf(k, config);
        lines.push([
          k.id,
          k.name,
          `${k.prefix}…`,
          k.admin ? "admin" : "user",
          policy.permissionModes.join(","),
          policy.workRoots.join(","),
          policy.maxBudgetUsd === null ? "-" : `$${policy.maxBudgetUsd}`,
          policy.worktrees ? "yes" : "no",
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
  withPolicyOptions(
    keys
      .command("update")
      .description("change a key's policy; options left out stay as they are")
      .argument("<id>", "the key's id (from keys list)"),
  ).action(async (id: string, options: PolicyOptions) => {
    requireKeyId(id);
    const policy = policyInput(options);
    const row = await withDatabase(async (d) =>
      updateKeyPolicy(d.db, id, await policyColumns(policy, d.config)),
    );
    if (!row) throw new Error(`no key with id ${id}`);
    out.stderr.write(`updated key ${row.id} "${row.name}"\n`);
  });
  keys
    .command("revoke")
    .description("revoke a key: it stops working at once")
    .argument("<id>", "the key's id (from keys list)")
    .action(async (id: string) => {
      requireKeyId(id);
      const row = await withDatabase((d) => revokeKey(d.db, id));
      if (!row) throw new Error(`no key with id ${id}`);
      out.stderr.write(`revoked key ${row.id} "${row.name}"\n`);
    });
}
