import { realpath } from "node:fs/promises";
import { DomainError } from "../errors.js";
import type { Admission, CallRefusal, Ruling } from "../gateway/admission.js";
import { type EgressLists, EgressRuleError, parseEgressRule } from "../gateway/egress.js";
import { PERMISSION_MODES } from "../permission-modes.js";
import { type PriceTable, priceOf } from "../prices.js";
import type { SandboxMode } from "../process/sandbox-modes.js";
import { type SandboxStatus, tenantsUnsandboxed } from "../process/sandbox-start.js";
import type { PermissionMode, SessionSettings } from "../session-settings.js";
import type { Database } from "../store/db.js";
import {
  callLimitsOfKey,
  egressOfRun,
  getKey,
  getKeyAndActiveCount,
  type KeyPolicyColumns,
  keyOfRun,
  monthOf,
  monthSpend,
} from "../store/keys.js";
import { meteredUsage } from "../store/model-calls.js";
import type { ApiKeyRow, SessionRow } from "../store/schema.js";
import type { ToolRuleEntry } from "../tool-rules.js";
import { isWithin, resolveWorkDir, WorkDirNotAllowedError } from "./work-dir.js";

// What a key's runs may ask for, and what it may spend: one question (`checkRun`) that session
// creation, hook definitions and every run's admission and start (messages with their own
// settings, retries, webhook deliveries and schedules alike) all ask, of the settings as the run
// would get them.

/** Modes that switch every permission check off: a non-admin key gets them only when granted. */
export const BYPASS_MODES: readonly PermissionMode[] = [
  "bypassPermissions",
  "dangerously-skip-permissions",
];

export interface KeyPolicy {
  permissionModes: PermissionMode[];
  /** Real paths; a session's work dir must lie in one of them. */
  workRoots: string[];
  /** Spend allowed per calendar month (UTC); null: no cap. */
  maxBudgetUsd: number | null;
  worktrees: boolean;
  /** Where its sandboxed agents may connect (src/gateway/egress.ts): entries as written. */
  egress: string[];
  /** The models its runs may call (the model gateway refuses others); null: any. */
  models: string[] | null;
  /** Rules of its agents' tool uses, checked before a session's (src/tool-rules.ts). */
  toolRules: ToolRuleEntry[];
}

/** What a run asks for, as it would run: every setting (defaults and a message's own filled in). */
export interface RunAsk {
  settings: SessionSettings;
  /** The work dir, or null for the server's. */
  workDir: string | null;
}

export interface Budget {
  maxUsd: number;
  spentUsd: number;
  leftUsd: number;
  periodStart: Date;
}

/** A session or hook asks for more than its key's policy allows (403). */
export class PolicyDeniedError extends DomainError {
  constructor(
    readonly field: keyof typeof FIELD_NAMES,
    detail: string,
  ) {
    super("policy_denied", `the key's policy does not allow this ${FIELD_NAMES[field]}: ${detail}`);
  }
}

/** The key's spend this month has reached its cap: no run starts (402). */
export class BudgetExhaustedError extends DomainError {
  constructor(readonly budget: Budget) {
    super(
      "budget_exhausted",
      `the key's budget of $${budget.maxUsd} for the month from ${budget.periodStart.toISOString()} is spent ($${round(budget.spentUsd)}); it renews at the start of next month (UTC)`,
    );
  }
}

/** A policy given to a key that cannot be stored (400, naming the field). */
export class PolicyInputError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const FIELD_NAMES = {
  permission_modes: "permission_mode",
  work_roots: "work_dir",
  worktrees: "worktree mode",
  add_dirs: "add_dirs entry",
} as const;

/** What of the server's configuration a key's policy is checked against. */
export interface PolicyConfig {
  /** Real paths a session's work_dir must lie in. */
  allowedRoots: string[];
  /** The directory agents work in, unless a session names another. */
  workDir: string;
  sandbox: { mode: SandboxMode };
  prices: PriceTable;
}

/** With auth off there is one user, the operator: its agents may reach any public address. */
export const NO_KEY_EGRESS = ["*"] as const;

/**
 * Where a run's sandbox may connect: its key's egress list (any public address without a key),
 * and the run's own list that narrows it (a fork's pull request), as stored now.
 */
export async function egressListsOfRun(db: Database, runId: string): Promise<EgressLists> {
  const lists = await egressOfRun(db, runId);
  return { key: lists.key ?? NO_KEY_EGRESS, run: lists.run };
}

const round = (usd: number) => Math.round(usd * 1e6) / 1e6;

/** No key (auth off): everything the server allows. */
export function unrestricted(config: PolicyConfig): KeyPolicy {
  return {
    permissionModes: [...PERMISSION_MODES],
    workRoots: config.allowedRoots,
    maxBudgetUsd: null,
    worktrees: true,
    egress: [...NO_KEY_EGRESS],
    models: null,
    toolRules: [],
  };
}

/** The key's policy, its unset fields taken from the defaults for its role. */
export function policyOf(key: ApiKeyRow, config: PolicyConfig): KeyPolicy {
  const modes = PERMISSION_MODES.filter((m) =>
    key.permissionModes ? key.permissionModes.includes(m) : key.admin || !BYPASS_MODES.includes(m),
  );
  return {
    permissionModes: modes,
    workRoots: key.workRoots ?? config.allowedRoots,
    maxBudgetUsd: key.maxBudgetUsd,
    worktrees: key.worktrees,
    egress: key.egress,
    models: key.models,
    toolRules: key.toolRules,
  };
}

/** The policy of the key (unrestricted for none, as with auth off). */
export async function loadPolicy(
  db: Database,
  keyId: string | null,
  config: PolicyConfig,
): Promise<KeyPolicy> {
  return policyOfKey(keyId ? await getKey(db, keyId) : undefined, config);
}

/** The key's policy; unrestricted for none. */
const policyOfKey = (key: ApiKeyRow | undefined, config: PolicyConfig): KeyPolicy =>
  key ? policyOf(key, config) : unrestricted(config);

type Refusal = [field: keyof typeof FIELD_NAMES, detail: string];

/**
 * What the policy says of each setting: a refusal, or null. The type lists every field of
 * SessionSettings, so a setting added later does not compile until its rule here is written, and
 * no setting (a session's, a hook's or one message's own) can reach a run unasked.
 */
const SETTING_RULES: {
  [K in keyof SessionSettings]: (policy: KeyPolicy, value: SessionSettings[K]) => Refusal | null;
} = {
  permissionMode: (policy, mode) =>
    policy.permissionModes.includes(mode)
      ? null
      : [
          "permission_modes",
          `${mode} is not among its permission_modes (${policy.permissionModes.join(", ")})`,
        ],
  worktree: (policy, worktree) =>
    worktree && !policy.worktrees ? ["worktrees", "its worktrees is false"] : null,
  // The rest grant nothing the mode does not: which model and how hard it thinks, text added to
  // its prompt, MCP servers only from the admin's own list, caps that only lower what a run may
  // do (the key's budget caps its spend whatever a run asks), and who answers its permission
  // requests (the bridge denying, or the key's own client).
  effort: () => null,
  model: () => null,
  systemPrompt: () => null,
  mcpServers: () => null,
  maxTurns: () => null,
  maxBudgetUsd: () => null,
  approvals: () => null,
  // Takes tools away, never grants one.
  disallowedTools: () => null,
  // Checked after the key's own, which therefore decide first; and an `allow` grants nothing the
  // permission mode does not (src/tool-rules.ts).
  toolRules: () => null,
  // Asks more of the agent, grants it nothing: its git runs as the session's other git does.
  requireCleanWorkDir: () => null,
  // Each a directory the agent writes, as its work dir: inside the key's work roots, as that is.
  addDirs: (policy, dirs) => {
    const outside = dirs.find((dir) => !isWithin(dir, policy.workRoots));
    return outside === undefined
      ? null
      : ["add_dirs", `${outside} is outside its work_roots (${policy.workRoots.join(", ")})`];
  },
};

/** Throws PolicyDeniedError naming the first thing the run asks for that the policy refuses. */
export async function checkRun(
  policy: KeyPolicy,
  ask: RunAsk,
  config: PolicyConfig,
): Promise<void> {
  for (const field of Object.keys(SETTING_RULES) as (keyof SessionSettings)[]) {
    const rule = SETTING_RULES[field] as (p: KeyPolicy, v: unknown) => Refusal | null;
    const refusal = rule(policy, ask.settings[field]);
    if (refusal) throw new PolicyDeniedError(...refusal);
  }
  const given = ask.workDir ?? config.workDir;
  const workDir = await realpath(given).catch(() => given);
  if (!isWithin(workDir, policy.workRoots)) {
    throw new PolicyDeniedError(
      "work_roots",
      `${workDir} is outside its work_roots (${policy.workRoots.join(", ")})`,
    );
  }
}

/** Refuses (PolicyDeniedError) what the key's policy does not allow; no key, no limits. */
export async function enforcePolicy(
  db: Database,
  config: PolicyConfig,
  keyId: string | null,
  ask: RunAsk,
): Promise<void> {
  await checkRun(await loadPolicy(db, keyId, config), ask, config);
}

/** The key's budget this month, or null when it has no cap. */
export async function budgetOf(
  db: Database,
  keyId: string,
  policy: Pick<KeyPolicy, "maxBudgetUsd">,
  now = new Date(),
): Promise<Budget | null> {
  if (policy.maxBudgetUsd === null) return null;
  const start = monthOf(now);
  const spentUsd = await monthSpend(db, keyId, start);
  return {
    maxUsd: policy.maxBudgetUsd,
    spentUsd,
    leftUsd: Math.max(0, policy.maxBudgetUsd - spentUsd),
    periodStart: start,
  };
}

/** What a run may spend when it starts: null for no cap. */
export interface RunAllowance {
  maxBudgetUsd: number | null;
  /** The key's tool rules, checked before the session's (src/tool-rules.ts). */
  toolRules: ToolRuleEntry[];
}

/**
 * Asked before a run is admitted and again when a run that queued or waited for its session starts
 * (the run manager's one question).
 */
export interface RunGate {
  /**
   * Throws PolicyDeniedError or BudgetExhaustedError when the session's key may not run it now,
   * with these settings (the session's, with the message's own in their place). `ownerKey`: the
   * session's key as a read of the caller's found it a moment ago (null: gone), not read again.
   */
  allow(
    session: SessionRow,
    settings: SessionSettings,
    ownerKey?: ApiKeyRow | null,
  ): Promise<RunAllowance>;
}

/**
 * The gate of the keys' policies and budgets; sessions without a key pass freely. Where runs
 * cannot be sandboxed (`sandbox`), it also refuses every run once several keys exist: whichever
 * way the second key came (another instance, the command line), no tenant's agent runs beside
 * another's unsandboxed.
 */
export function policyGate(db: Database, config: PolicyConfig, sandbox: SandboxStatus): RunGate {
  return {
    async allow(session, settings, ownerKey) {
      if (!session.ownerKeyId) return { maxBudgetUsd: null, toolRules: [] };
      let key: ApiKeyRow | undefined;
      // Counted only where the count can refuse: unsandboxed, unless the operator turned it off.
      if (!sandbox.enabled && config.sandbox.mode !== "off") {
        const read = await getKeyAndActiveCount(db, session.ownerKeyId);
        const refusal = tenantsUnsandboxed(sandbox, config.sandbox.mode, read.activeKeys);
        if (refusal) throw refusal;
        key = read.key;
      } else {
        key =
          ownerKey === undefined ? await getKey(db, session.ownerKeyId) : (ownerKey ?? undefined);
      }
      const policy = policyOfKey(key, config);
      // Asked at every run, so that a policy narrowed since the session was made holds too.
      await checkRun(policy, { settings, workDir: session.workDir }, config);
      const budget = await budgetOf(db, session.ownerKeyId, policy);
      if (budget && budget.leftUsd <= 0) throw new BudgetExhaustedError(budget);
      return { maxBudgetUsd: budget ? budget.leftUsd : null, toolRules: policy.toolRules };
    },
  };
}

/**
 * What the model gateway asks before it forwards a run's metered call: whether the run's own cap,
 * and its key's budget this month, have anything left; whether the key's `models` has the model;
 * and, for a run with a cap or a key with a budget, whether the model has a price its spend can be
 * counted at. A call that starts under a cap may end past it (as may calls under way at once): the
 * next is refused.
 */
export function callAdmission(db: Database, config: PolicyConfig): Admission {
  return ({ runId, maxBudgetUsd }) => {
    // The run's key is its session's for the run's life: read once, from the run's start (before
    // its first call), and read again only after a read that failed.
    let key: Promise<string | null> | undefined;
    const keyOf = () => {
      key ??= keyOfRun(db, runId).catch((err: unknown) => {
        key = undefined;
        throw err;
      });
      return key;
    };
    const ruling = async (): Promise<Ruling> => {
      const [spent, keyId] = await Promise.all([
        maxBudgetUsd === null ? undefined : meteredUsage(db, runId),
        keyOf(),
      ]);
      // Of the key's policy, the fields that rule on a call (a key that is gone: none).
      const limits = keyId ? await callLimitsOfKey(db, keyId) : undefined;
      const budget = keyId && limits ? await budgetOf(db, keyId, limits) : null;
      return (model): CallRefusal | null => {
        if (maxBudgetUsd !== null && spent && spent.costUsd >= maxBudgetUsd) {
          return {
            code: "max_budget",
            message: `the run's max_budget_usd of $${maxBudgetUsd} is spent ($${round(spent.costUsd)})`,
          };
        }
        if (limits?.models && !(model !== null && limits.models.includes(model))) {
          return {
            code: "policy_denied",
            message: `the key's policy does not allow the model ${model ?? "(none named)"}: it is not among its models (${limits.models.join(", ")})`,
          };
        }
        const unpriced = !priceOf(config.prices, model);
        if (maxBudgetUsd !== null && unpriced) {
          return {
            code: "policy_denied",
            message: `the run has a max_budget_usd, and the model ${model ?? "(none named)"} has no price to count its spend at (AGENT_BRIDGE_MODEL_PRICES)`,
          };
        }
        if (!budget) return null;
        if (budget.leftUsd <= 0) {
          return { code: "budget_exhausted", message: new BudgetExhaustedError(budget).message };
        }
        if (unpriced) {
          return {
            code: "policy_denied",
            message: `the key has a budget, and the model ${model ?? "(none named)"} has no price to count its spend at (AGENT_BRIDGE_MODEL_PRICES)`,
          };
        }
        return null;
      };
    };
    // The first call's reads are made now, before the run's CLI has started, rather than on the
    // call's way upstream, where (on the embedded database) they hold the server's thread and the
    // call with it (docs/performance.md). A first call within READ_AHEAD_MS takes them: no staler
    // than the reads of a call under way beside it.
    const readAt = performance.now();
    let ahead: Promise<Ruling> | undefined = ruling();
    ahead.catch(() => {});
    return () => {
      const taken = ahead && performance.now() - readAt < READ_AHEAD_MS ? ahead : undefined;
      ahead = undefined;
      return taken?.catch(ruling) ?? ruling();
    };
  };
}

/** How long the reads made as a run opens its access stand for its first call. */
const READ_AHEAD_MS = 2000;

/** A key's policy as an admin gives it (API or command line); unset fields are left alone. */
export interface PolicyInput {
  permission_modes?: PermissionMode[] | null;
  work_roots?: string[] | null;
  max_budget_usd?: number | null;
  worktrees?: boolean;
  egress?: string[];
  models?: string[] | null;
  tool_rules?: ToolRuleEntry[];
}

/** The columns to store for the input: work roots resolved to real paths inside the server's roots. */
export async function policyColumns(
  input: PolicyInput,
  config: PolicyConfig,
): Promise<KeyPolicyColumns> {
  const columns: KeyPolicyColumns = {};
  if (input.permission_modes !== undefined) columns.permissionModes = input.permission_modes;
  if (input.max_budget_usd !== undefined) columns.maxBudgetUsd = input.max_budget_usd;
  if (input.worktrees !== undefined) columns.worktrees = input.worktrees;
  if (input.tool_rules !== undefined) columns.toolRules = input.tool_rules;
  if (input.models !== undefined) {
    columns.models = input.models && [...new Set(input.models.map((model) => model.trim()))];
  }
  if (input.egress !== undefined) {
    columns.egress = input.egress.map((entry, i) => {
      try {
        parseEgressRule(entry);
        return entry.trim();
      } catch (err) {
        if (!(err instanceof EgressRuleError)) throw err;
        throw new PolicyInputError(`egress.${i}`, err.message);
      }
    });
  }
  if (input.work_roots === null) columns.workRoots = null;
  else if (input.work_roots !== undefined) {
    const roots: string[] = [];
    for (const [i, root] of input.work_roots.entries()) {
      try {
        roots.push(await resolveWorkDir(root, config.allowedRoots));
      } catch (err) {
        if (!(err instanceof WorkDirNotAllowedError)) throw err;
        throw new PolicyInputError(
          `work_roots.${i}`,
          err.message.replace(/^work_dir/, "work root"),
        );
      }
    }
    columns.workRoots = [...new Set(roots)];
  }
  return columns;
}
