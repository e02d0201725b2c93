import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { silentLogger } from "../../src/log.js";
import {
  ownCgroups,
  parseFlatKeyed,
  RunLimits,
  readOwnCgroups,
  startRunLimits,
} from "../../src/process/run-limits.js";
import { isRoot } from "../support/agent-user.js";

// The cgroup files as the kernel writes them, and the start-up's answers where limits cannot be.

/** This machine's kind: cgroup v1 controllers, a nested memory group, and v2 beside them. */
const HYBRID_MOUNTS = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`;
const HYBRID_GROUPS = `9:name=systemd:/
8:pids:/
4:memory:/process_api/51c8
2:cpu,cpuacct:/
0::/
`;

const MB = 1024 * 1024;

describe("ownCgroups", () => {
  it("finds the server's v1 memory and pids groups, nested or not", () => {
    expect(ownCgroups(HYBRID_MOUNTS, HYBRID_GROUPS)).toEqual({
      memory: "/sys/fs/cgroup/memory/process_api/51c8",
      pids: "/sys/fs/cgroup/pids",
    });
  });

  it("places a group below its mount's root (a container given a subtree)", () => {
    const mounts =
      "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory";
    expect(ownCgroups(mounts, "4:memory:/docker/abc/server\n")).toEqual({
      memory: "/sys/fs/cgroup/memory/server",
    });
    // A group outside what is mounted is nowhere to be written.
    expect(ownCgroups(mounts, "4:memory:/elsewhere\n")).toBe(
      "no cgroup hierarchy with the memory or pids controller is mounted",
    );
  });

  it("tells cgroup v2 alone apart, and a machine with neither", () => {
    const mounts = "25 23 0:24 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate";
    expect(ownCgroups(mounts, "0::/system.slice/agent-bridge.service\n")).toEqual({
      unified: "/sys/fs/cgroup/system.slice/agent-bridge.service",
    });
    expect(ownCgroups("", "")).toBe(
      "no cgroup hierarchy with the memory or pids controller is mounted",
    );
  });
});

describe("parseFlatKeyed", () => {
  it("reads memory.oom_control and pids.events", () => {
    const oom = parseFlatKeyed("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
    expect(oom.get("oom_kill")).toBe(2);
    expect(parseFlatKeyed("max 17\n").get("max")).toBe(17);
  });

  it("skips what is not a name and a count", () => {
    const values = parseFlatKeyed("\nmax\nmax max\n  low 3  \n");
    expect([...values]).toEqual([["low", 3]]);
  });
});

describe("startRunLimits", () => {
  const limits = { memoryBytes: 256 * MB, maxProcesses: 64 };

  it("has none when both are 0", () => {
    expect(startRunLimits({ memoryBytes: 0, maxProcesses: 0 }, silentLogger).status).toEqual({
      enabled: false,
      reason: "AGENT_BRIDGE_RUN_MEMORY_MB and AGENT_BRIDGE_RUN_MAX_PROCESSES are 0",
    });
  });

  it("runs without limits, and says why, on cgroup v2 or where it cannot make a group", () => {
    const v2 = startRunLimits(limits, silentLogger, { unified: "/sys/fs/cgroup" });
    expect(v2.limits).toBeUndefined();
    expect(v2.status).toMatchObject({ enabled: false, reason: expect.stringContaining("v2") });
    const missing = startRunLimits(limits, silentLogger, { memory: "/nonexistent/memory" });
    expect(missing.status).toMatchObject({
      enabled: false,
      reason: "the cgroup v1 pids controller is not mounted",
    });
    const unwritable = startRunLimits({ memoryBytes: 256 * MB, maxProcesses: 0 }, silentLogger, {
      memory: "/proc/self",
    });
    expect(unwritable.status).toMatchObject({
      enabled: false,
      reason: expect.stringMatching(/^cannot make a cgroup beneath \/proc\/self \(E[A-Z]+\)$/),
    });
  });

  const own = readOwnCgroups();
  const pids = typeof own === "object" && "pids" in own ? own.pids : undefined;

  it.skipIf(!isRoot || !pids)(
    "removes the groups a dead server left, and none of a live one",
    () => {
      const dead = spawnSync("true").pid as number;
      const stale = join(pids as string, `agent-bridge-${dead}-stale`);
      const live = join(pids as string, `agent-bridge-${process.pid}-live`);
      mkdirSync(stale);
      mkdirSync(live);
      try {
        new RunLimits({ pids }, limits, silentLogger).sweep();
        expect(existsSync(stale)).toBe(false);
        expect(existsSync(live)).toBe(true);
      } finally {
        for (const dir of [stale, live]) if (existsSync(dir)) rmdirSync(dir);
      }
    },
  );
});
