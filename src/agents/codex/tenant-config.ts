import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { AgentFiles } from "../../process/agent-files.js";

// A tenant's codex runs with a CODEX_HOME of its own (src/process/tenant-homes.ts), which holds
// none of what the operator set up in theirs. Each run copies the operator's settings
// (config.toml) in, so the tenant's codex behaves as the operator's would, and changes reach the
// next run; never the operator's login (auth.json), whose key stays with the gateway
// (credentials.ts), and a copy an earlier version of the bridge left there is removed. The files
// are written as the agent, whose directory that is (src/process/agent-files.ts says why).

/** Copies the operator's config.toml, when there is one, into `tenantHome`, and no auth.json. */
export async function seedTenantCodexHome(
  operatorHome: string,
  tenantHome: string,
  files: AgentFiles,
): Promise<void> {
  if (operatorHome === tenantHome) return;
  const settings = await readFile(join(operatorHome, "config.toml")).catch(
    (err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    },
  );
  if (settings !== undefined) await files.write(join(tenantHome, "config.toml"), settings);
  await files.remove(join(tenantHome, "auth.json"));
}
