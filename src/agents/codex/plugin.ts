import path from "node:path";
import { z } from "zod";
import { httpUrl, list, priceTable, usdRate } from "../../env-fields.js";
import { openaiApi } from "../../gateway/openai.js";
import type { WorktreeLayout } from "../../worktrees/worktree.js";
import { childEnvironment, type EnvPolicy } from "../child-env.js";
import { installedBin } from "../installed-bin.js";
import type { AgentPlugin } from "../plugin.js";
import { CODEX_CAPABILITIES, codexBackend } from "./backend.js";
import {
  codexUpstream,
  DEFAULT_CODEX_BASE_URL,
  operatorCodexHome,
  withoutCodexUpstream,
} from "./credentials.js";

/** The `codex` shipped in the installed @openai/codex package, else the one on PATH. */
export function defaultCodexBin(): string {
  return installedBin("@openai/codex", "codex");
}

/**
 * Where the bridge makes a codex session's worktree (codex makes none): where the claude CLI makes
 * its own, so that a repository keeps its sessions' worktrees in one place whatever their agent,
 * and the worktrees of sessions made before stay where they are.
 */
const CODEX_WORKTREES: WorktreeLayout = {
  directory: (repo, sessionId) => path.join(repo, ".claude", "worktrees", sessionId),
};

/** Its variables: its keys and its own settings. */
const envPolicy: EnvPolicy = { prefixes: ["OPENAI_", "CODEX_"], switched: [] };

const env = {
  AGENT_BRIDGE_CODEX_BIN: z.string().min(1).optional(),
  AGENT_BRIDGE_CODEX_MODEL: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$/, "expected a model slug such as gpt-5.5")
    .optional(),
  AGENT_BRIDGE_CODEX_ENV_ALLOW: list.default([]),
  // Where the model gateway forwards codex's calls (an OpenAI base URL, `…/v1`); else codex's own
  // OPENAI_BASE_URL, else OpenAI's.
  AGENT_BRIDGE_CODEX_BASE_URL: httpUrl.optional(),
  OPENAI_BASE_URL: httpUrl.optional(),
  // Superseded by AGENT_BRIDGE_MODEL_PRICES, still read: its entries are in the same table.
  AGENT_BRIDGE_CODEX_PRICES: priceTable(
    z.strictObject({ input: usdRate, cached_input: usdRate, output: usdRate }),
    '{"<model>": {"input": USD, "cached_input": USD, "output": USD}}',
  ).default({}),
};

/** OpenAI's Codex CLI (`@openai/codex`). */
export const codexPlugin: AgentPlugin<"codex", typeof env> = {
  name: "codex",
  env,
  secrets: ["OPENAI_API_KEY"],
  section(settings, environment) {
    const childEnv = childEnvironment(
      environment,
      settings.AGENT_BRIDGE_CODEX_ENV_ALLOW,
      envPolicy,
    );
    const upstream = codexUpstream(
      environment,
      settings.AGENT_BRIDGE_CODEX_BASE_URL ?? settings.OPENAI_BASE_URL ?? DEFAULT_CODEX_BASE_URL,
    );
    const found = !(upstream instanceof Error);
    return {
      bin: settings.AGENT_BRIDGE_CODEX_BIN ?? defaultCodexBin(),
      model: settings.AGENT_BRIDGE_CODEX_MODEL,
      childEnv: withoutCodexUpstream(childEnv),
      upstream: found ? upstream : undefined,
      ...(found ? {} : { missingCredentials: upstream }),
      // Runs without an agent user have the operator's CODEX_HOME as theirs (its threads).
      secretFiles: [path.join(operatorCodexHome(environment), "auth.json")],
      prices: Object.fromEntries(
        Object.entries(settings.AGENT_BRIDGE_CODEX_PRICES).map(([model, p]) => [
          model,
          // Its form has no rate for cache writes: they cost what input does.
          { input: p.input, output: p.output, cache_read: p.cached_input, cache_creation: p.input },
        ]),
      ),
    };
  },
  envPolicy,
  worktree: CODEX_WORKTREES,
  capabilities: CODEX_CAPABILITIES,
  // `codex exec` asks no questions.
  isQuestion: () => false,
  gatewayApi: openaiApi,
  create: (section, deps) =>
    codexBackend({
      bin: section.bin,
      env: section.childEnv,
      driver: deps.driver,
      prices: deps.prices,
      worktree: CODEX_WORKTREES,
      ...(deps.runAs ? { runAs: deps.runAs } : {}),
      ...(deps.gateway ? { gateway: deps.gateway } : {}),
      ...(section.missingCredentials ? { missingCredentials: section.missingCredentials } : {}),
    }),
};
