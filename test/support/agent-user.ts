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

/**
 * `dir` as the README asks of a work dir: the agent user's, and its group's to write (every
 * tenant's agents have that group), directories setgid so what they make keeps the group.
 */
export function shareWithAgents(dir: string, agent: { uid: number; gid: number }) {
  execFileSync("chown", ["-R", `${agent.uid}:${agent.gid}`, dir]);
  execFileSync("chmod", ["-R", "g+rwX", dir]);
  execFileSync("find", [dir, "-type", "d", "-exec", "chmod", "g+s", "{}", "+"]);
}

/** AGENT_BRIDGE_TENANT_UID_BASE's default: tenant n's agents run as this + n (0: auth is off). */
export const TENANT_UID_BASE = 2_100_000_000;
