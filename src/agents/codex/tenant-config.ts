import { chmod, readFile, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

// A tenant's codex runs with a CODEX_HOME of its own (src/process/tenant-homes.ts), which holds
// none of what the operator set up in theirs: the model provider and settings (config.toml) and
// a `codex login` (auth.json). Each run copies them in when they differ, so the tenant's codex
// behaves as the operator's would, and changes reach the next run.

const OPERATOR_FILES = ["config.toml", "auth.json"] as const;

/** The operator's CODEX_HOME: as the server's environment names it, else ~/.codex. */
export function operatorCodexHome(env: Record<string, string>): string {
  return env.CODEX_HOME ?? join(env.HOME ?? homedir(), ".codex");
}

async function contents(file: string): Promise<Buffer | undefined> {
  return readFile(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
}

/** Copies the operator's config.toml and auth.json into `tenantHome` where they differ. */
export async function seedTenantCodexHome(operatorHome: string, tenantHome: string): Promise<void> {
  if (operatorHome === tenantHome) return;
  for (const name of OPERATOR_FILES) {
    const [ours, theirs] = await Promise.all([
      contents(join(operatorHome, name)),
      contents(join(tenantHome, name)),
    ]);
    if (ours === undefined || (theirs !== undefined && ours.equals(theirs))) continue;
    const copy = join(tenantHome, name);
    // Written, not copied: a new file takes the group of the tenant's directory (set-group-id),
    // where a copy may take the original's (Node 24's copyFile does), which the tenant lacks.
    await writeFile(copy, ours);
    // The server owns the copy; the tenant's agents read it through the HOME's group.
    await chmod(copy, 0o640);
  }
}
