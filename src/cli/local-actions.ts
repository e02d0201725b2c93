import { issueKey } from "../auth/keys.js";
import { type PolicyInput, policyColumns, policyOf } from "../auth/policy.js";
import { type Config, databaseTarget, loadConfig } from "../config.js";
import { PERMISSION_MODES } from "../permission-modes.js";
import { PermissionMode } from "../session-settings.js";
import { type DatabaseHandle, openDatabase } from "../store/db.js";
import { listKeys, revokeKey, updateKeyPolicy } from "../store/keys.js";
import { type ToolRuleEntry, ToolRules } from "../tool-rules.js";
import type { Output } from "./render.js";

// What the local commands (./local.ts) do on the server's own database, with the server's
// configuration: loaded only when one of them runs.

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

/** The options of a key's policy (src/auth/policy.ts), of `keys create` and `keys update`. */
export interface PolicyOptions {
  permissionModes?: string;
  workRoots?: string;
  maxBudgetUsd?: string;
  worktrees?: boolean;
  egress?: string;
  models?: string;
  toolRules?: string;
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
  if (options.egress !== undefined) {
    input.egress = options.egress === "none" ? [] : listOption(options.egress);
  }
  if (options.models !== undefined) {
    input.models = options.models === "any" ? null : listOption(options.models);
  }
  if (options.toolRules !== undefined) input.tool_rules = toolRulesOption(options.toolRules);
  return input;
}

/** `--tool-rules`: the rules as JSON (the API's `tool_rules`), or "none". */
function toolRulesOption(value: string): ToolRuleEntry[] {
  if (value === "none") return [];
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    throw new Error(`--tool-rules: expected a JSON array of rules or "none", got ${value}`);
  }
  const parsed = ToolRules.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`--tool-rules: ${issue?.path.join(".") || "rules"}: ${issue?.message}`);
  }
  return parsed.data;
}

export async function migrate(out: Output) {
  const kind = await withDatabase(async (database) => database.kind);
  out.stderr.write(`the ${kind} database is up to date\n`);
}

export async function createKey(
  options: PolicyOptions & { name: string; admin?: boolean; json?: boolean },
  out: Output,
) {
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
}

export async function listKeysTable(out: Output) {
  const { rows, config } = await withDatabase(async (d) => ({
    rows: await listKeys(d.db),
    config: d.config,
  }));
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
      "EGRESS",
      "MODELS",
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
      policy.egress.join(",") || "-",
      policy.models?.join(",") ?? "any",
      k.createdAt.toISOString(),
      k.lastUsedAt?.toISOString() ?? "-",
      k.revokedAt?.toISOString() ?? "-",
    ]);
  }
  const widths = lines[0]?.map((_, i) => Math.max(...lines.map((l) => (l[i] ?? "").length))) ?? [];
  for (const line of lines) {
    out.stdout.write(
      `${line
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd()}\n`,
    );
  }
}

export async function updateKey(id: string, options: PolicyOptions, out: Output) {
  requireKeyId(id);
  const policy = policyInput(options);
  const row = await withDatabase(async (d) =>
    updateKeyPolicy(d.db, id, await policyColumns(policy, d.config)),
  );
  if (!row) throw new Error(`no key with id ${id}`);
  out.stderr.write(`updated key ${row.id} "${row.name}"\n`);
}

export async function revokeKeyById(id: string, out: Output) {
  requireKeyId(id);
  const row = await withDatabase((d) => revokeKey(d.db, id));
  if (!row) throw new Error(`no key with id ${id}`);
  out.stderr.write(`revoked key ${row.id} "${row.name}"\n`);
}
