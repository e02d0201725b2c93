import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import type { TenantIdRange } from "./tenant-ids.js";

// The OS user that turns the agents' own ids on (AGENT_BRIDGE_AGENT_USER). The agent is a program
// that runs shell commands, so the boundary between it and the server (its environment, memory,
// database files and config) is the operating system's: another user id. Each tenant's agents run
// as a user and group id of that tenant's (tenant-ids.ts, tenant-homes.ts), with the agent user's
// groups as their supplementary groups: the work dirs are the agent user's, shared through its
// group. The server's git in a session's work dir runs as that session's tenant (src/worktrees/git.ts).

/** Its configuration section: every agent runs as this OS user (by name or uid), in a HOME of its tenant's. */
export interface AgentUserConfig extends TenantIdRange {
  spec: string;
  /** Where each tenant's HOME is made (one directory per API key). */
  homesDir: string;
}

export interface AgentUser extends RunAs {
  name: string;
}

/** Why the agents cannot run as another user here; one line for the operator. */
export class AgentUserError extends Error {}

// Linux capability bits: what switching to the agent user and managing its files and processes take.
const NEEDED_CAPABILITIES = { CAP_CHOWN: 0, CAP_KILL: 5, CAP_SETGID: 6, CAP_SETUID: 7 } as const;

/** Looks the user up (a name or a uid) and checks that this process can run programs as it. */
export function resolveAgentUser(spec: string): AgentUser {
  const refusal = capabilityRefusal(spec, process.getuid?.(), ownStatus());
  if (refusal) throw new AgentUserError(refusal);
  const user = lookUp(spec);
  if (user.uid === 0 || user.uid === process.getuid?.()) {
    throw new AgentUserError(
      `AGENT_BRIDGE_AGENT_USER: ${spec} is uid ${user.uid}, ${user.uid === 0 ? "root" : "the server's own user"}; the agents need a user of their own: useradd --system --user-group --no-create-home --shell /usr/sbin/nologin agent-bridge-agent`,
    );
  }
  try {
    execFileSync("setpriv", ["--version"], { stdio: "ignore" });
  } catch {
    throw new AgentUserError(
      "AGENT_BRIDGE_AGENT_USER needs setpriv (util-linux) on PATH to start the agents as that user",
    );
  }
  return user;
}

function lookUp(spec: string): AgentUser {
  let line: string;
  try {
    // getent asks the system's user database (files, LDAP, …) as login would.
    line = execFileSync("getent", ["passwd", spec], { encoding: "utf8" }).split("\n")[0] ?? "";
  } catch {
    throw new AgentUserError(
      `AGENT_BRIDGE_AGENT_USER: there is no user ${JSON.stringify(spec)} on this machine; create one with: useradd --system --user-group --no-create-home --shell /usr/sbin/nologin ${/^\d+$/.test(spec) ? "agent-bridge-agent" : spec}`,
    );
  }
  const [name = "", , uid = "", gid = ""] = line.split(":");
  // As login (initgroups) would give them: its own group and those it is a member of.
  const groups = execFileSync("id", ["-G", name], { encoding: "utf8" }).trim().split(/\s+/);
  return { name, uid: Number(uid), gid: Number(gid), groups: groups.map(Number) };
}

/**
 * Why a process of `uid` whose /proc/<pid>/status reads `status` cannot run the agents as `spec`:
 * the capabilities it lacks of those needed (root lacks none); undefined when it can.
 */
export function capabilityRefusal(
  spec: string,
  uid: number | undefined,
  status: string,
): string | undefined {
  if (uid === 0) return undefined;
  const effective = BigInt(`0x${/^CapEff:\s*([0-9a-f]+)/m.exec(status)?.[1] ?? "0"}`);
  const missing = Object.entries(NEEDED_CAPABILITIES)
    .filter(([, bit]) => (effective & (1n << BigInt(bit))) === 0n)
    .map(([name]) => name);
  if (missing.length === 0) return undefined;
  return `AGENT_BRIDGE_AGENT_USER is set, but the server runs as uid ${uid} without ${missing.join(", ")}: start it as root (it then runs only the agents as ${spec}), or give it those capabilities, or unset AGENT_BRIDGE_AGENT_USER`;
}

/** This process's status; empty where there is no /proc (no capabilities to speak of). */
function ownStatus(): string {
  try {
    return readFileSync("/proc/self/status", "utf8");
  } catch {
    return "";
  }
}

/** Who a process runs as: a tenant's agent (or the agent user itself). */
export interface RunAs {
  uid: number;
  gid: number;
  /** Its supplementary groups: the agent user's. */
  groups: number[];
}

/**
 * The command that starts `bin` as `runAs`: its user and group as real and effective ids, its
 * supplementary groups named (a tenant's uid has no passwd entry to look them up by), no
 * capabilities, no way to gain privileges again (set-uid programs such as sudo or su do not
 * work), and umask 007: what an agent makes in a work dir (setgid, the agent user's group) stays
 * the group's to change, as the work dirs are shared through it, and nothing is the world's.
 */
export function commandAs(runAs: RunAs, bin: string, args: string[]): [string, string[]] {
  return [
    "setpriv",
    [
      `--reuid=${runAs.uid}`,
      `--regid=${runAs.gid}`,
      runAs.groups.length > 0 ? `--groups=${runAs.groups.join(",")}` : "--clear-groups",
      "--no-new-privs",
      "--inh-caps=-all",
      "--bounding-set=-all",
      "--",
      "sh",
      "-c",
      'umask 007 && exec "$0" "$@"',
      bin,
      ...args,
    ],
  ];
}
