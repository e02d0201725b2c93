import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import type { AgentFiles } from "../../process/agent-files.js";

// A tenant's codex runs with a CODEX_HOME of its own (src/process/tenant-homes.ts), which holds
// none of what the operator set up in theirs: the model provider and settings (config.toml) and
// a `codex login` (auth.json). Each run copies them in, so the tenant's codex behaves as the
// operator's would, and changes reach the next run. The copies are written as the agent, whose
// directory that is (src/process/agent-files.ts says why): the agent reads them anyway.

const OPERATOR_FILES = ["config.toml", "auth.json"] as const;

/** The operator's CODEX_HOME: as the server's environment names it, else ~/.codex. */
export function operatorCodexHome(env: Record<string, string>): string {
  return env.CODEX_HOME ?? join(env.HOME ?? homedir(), ".codex");
}

/** Copies the operator's config.toml and auth.json, those there are, into `tenantHome`. */
export async function seedTenantCodexHome(
  operatorHome: string,
  tenantHome: string,
  files: AgentFiles,
): Promise<void> {
  if (operatorHome === tenantHome) return;
  for (const name of OPERATOR_FILES) {
    const ours = await readFile(join(operatorHome, name)).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    });
    if (ours !== undefined) await files.write(join(tenantHome, name), ours);
  }
}
