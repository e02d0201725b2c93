import { execFileSync } from "node:child_process";

// The OS user tests run agents as (AGENT_BRIDGE_AGENT_USER); making it needs root, as CI has.

export const AGENT_USER = "ab-agent-test";

/** The agent user, made if missing (useradd exits 9 when a concurrent test made it first). */
export function ensureAgentUser(): { uid: number; gid: number } {
  try {
    execFileSync(
      "useradd",
      ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", AGENT_USER],
      { stdio: "ignore" },
    );
  } catch (err) {
    if ((err as { status?: number }).status !== 9) throw err;
  }
  const [, , uid, gid] = execFileSync("getent", ["passwd", AGENT_USER], { encoding: "utf8" }).split(
    ":",
  );
  return { uid: Number(uid), gid: Number(gid) };
}

export const isRoot = process.getuid?.() === 0;
