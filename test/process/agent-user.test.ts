import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  AgentUserError,
  capabilityRefusal,
  resolveAgentUser,
} from "../../src/process/agent-user.js";
import { AGENT_USER, ensureAgentUser, isRoot } from "../support/agent-user.js";

// Whether the agents can run as AGENT_BRIDGE_AGENT_USER is settled at start-up, with one line
// saying what is missing. Needs root, as the feature does.

describe.skipIf(!isRoot)("the agent user", () => {
  it("is looked up by name or by uid", () => {
    const { uid, gid } = ensureAgentUser();
    expect(resolveAgentUser(AGENT_USER)).toEqual({ name: AGENT_USER, uid, gid, groups: [gid] });
    expect(resolveAgentUser(String(uid))).toEqual({ name: AGENT_USER, uid, gid, groups: [gid] });
  });

  it("must exist, and the refusal says how to make it", () => {
    expect(() => resolveAgentUser("no-such-agent")).toThrow(
      new AgentUserError(
        'AGENT_BRIDGE_AGENT_USER: there is no user "no-such-agent" on this machine; create one with: useradd --system --user-group --no-create-home --shell /usr/sbin/nologin no-such-agent',
      ),
    );
  });

  it("must not be root, nor the server's own user", () => {
    expect(() => resolveAgentUser("root")).toThrow(/is uid 0, root; the agents need a user/);
  });

  it("is refused to a server that cannot switch users, naming what it lacks", () => {
    // What /proc/self/status reads for a process of `nobody`, and for one that kept CAP_KILL only.
    const status = (...caps: string[]) =>
      execFileSync(
        "setpriv",
        [
          "--reuid=nobody",
          "--regid=nogroup",
          "--clear-groups",
          ...(caps.length
            ? [`--inh-caps=${caps.join(",")}`, `--ambient-caps=${caps.join(",")}`]
            : []),
          "--",
          "cat",
          "/proc/self/status",
        ],
        { encoding: "utf8" },
      );
    expect(capabilityRefusal(AGENT_USER, 65534, status())).toBe(
      `AGENT_BRIDGE_AGENT_USER is set, but the server runs as uid 65534 without CAP_CHOWN, CAP_KILL, CAP_SETGID, CAP_SETUID: start it as root (it then runs only the agents as ${AGENT_USER}), or give it those capabilities, or unset AGENT_BRIDGE_AGENT_USER`,
    );
    expect(capabilityRefusal(AGENT_USER, 65534, status("+kill"))).toMatch(
      / without CAP_CHOWN, CAP_SETGID, CAP_SETUID: /,
    );
    expect(
      capabilityRefusal(AGENT_USER, 65534, status("+chown", "+kill", "+setgid", "+setuid")),
    ).toBeUndefined();
    expect(capabilityRefusal(AGENT_USER, 0, "")).toBeUndefined();
  });
});
