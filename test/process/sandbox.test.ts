import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, realpath, rename, rm, symlink, writeFile } from "node:fs/promises";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finished } from "node:stream/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { createLogger, silentLogger } from "../../src/log.js";
import { type Bubblewrap, bwrapArgs } from "../../src/process/bwrap-args.js";
import { terminateGroup } from "../../src/process/groups.js";
import { Sandbox } from "../../src/process/sandbox.js";
import { type Mount, sandboxMounts } from "../../src/process/sandbox-mounts.js";
import { SandboxError, startSandbox } from "../../src/process/sandbox-start.js";
import { spawnProcess } from "../../src/process/spawner.js";
import { testSandbox } from "../support/sandbox.js";

// The run's sandbox (src/process/sandbox.ts): its mount plan and bwrap's arguments, worked out
// without starting anything; what AGENT_BRIDGE_SANDBOX does where bubblewrap is missing; and, with
// the real bubblewrap, how a run's end reaches what runs in it. What an agent can reach from inside
// is test/process/sandbox.real.test.ts, with the real CLIs.

function readAll(stream: Socket): Promise<string> {
  let text = "";
  stream.on("data", (d: Buffer) => {
    text += d.toString();
  });
  // The pipe may have ended before the caller got it (nothing on it): finished() knows.
  return finished(stream).then(() => text);
}

const base = {
  cwd: "/srv/a/work",
  workDirWritable: true,
  writable: [],
  readOnly: [],
  hiddenDirs: [],
  hiddenFiles: [],
  roots: [],
  tmpBytes: 1024,
};

const paths = (mounts: Mount[]) =>
  mounts.map((m) => `${m.kind}${"writable" in m && m.writable ? "+w" : ""} ${m.path}`);

describe("the sandbox's mounts", () => {
  it("hide each allowed root, bind the work dir onto it, and hide the data dir inside the work dir", () => {
    const mounts = sandboxMounts({
      ...base,
      writable: ["/home/t"],
      hiddenDirs: ["/srv/a/work/.agent-bridge"],
      roots: ["/srv/a", "/srv/b"],
    });
    // Shallower first: each lands on top of what holds it.
    expect(paths(mounts)).toEqual([
      "dev /dev",
      "scratch /tmp",
      "scratch /dev/shm",
      "hide /srv/a",
      "hide /srv/b",
      "bind+w /home/t",
      "bind+w /srv/a/work",
      "hide /srv/a/work/.agent-bridge",
    ]);
  });

  it("hide nothing twice: the homes in the data dir, or a data dir in the host's /dev/shm", () => {
    const mounts = sandboxMounts({
      ...base,
      writable: ["/var/lib/bridge/homes/t"],
      hiddenDirs: ["/var/lib/bridge/homes", "/var/lib/bridge", "/dev/shm/data"],
    });
    expect(paths(mounts).filter((p) => p.startsWith("hide"))).toEqual(["hide /var/lib/bridge"]);
    expect(paths(mounts)).toContain("bind+w /var/lib/bridge/homes/t");
  });

  it("leave a root inside the work dir visible (it is part of it), and never hide /", () => {
    const mounts = sandboxMounts({ ...base, roots: ["/srv/a/work/sub", "/srv/a/work", "/"] });
    expect(mounts.filter((m) => m.kind === "hide")).toEqual([]);
  });

  it("bind the work dir read-only when asked, and its HOME writable all the same", () => {
    const mounts = sandboxMounts({ ...base, workDirWritable: false, writable: ["/home/t"] });
    expect(paths(mounts)).toContain("bind /srv/a/work");
    expect(paths(mounts)).toContain("bind+w /home/t");
  });

  it("show read-only only what a tmpfs hides: under a hidden root, or in the host's /dev/shm", () => {
    const mounts = sandboxMounts({
      ...base,
      writable: ["/home/t"],
      roots: ["/srv/a"],
      readOnly: [
        "/srv/a/bridge/node_modules",
        "/usr/lib/node_modules",
        "/dev/shm/run-1",
        "/home/t/x",
      ],
    });
    expect(paths(mounts).filter((p) => p.startsWith("bind "))).toEqual([
      "bind /dev/shm/run-1",
      "bind /srv/a/bridge/node_modules",
    ]);
  });

  it("hide a secret file under /dev/null, unless a hidden directory holds it already", () => {
    const mounts = sandboxMounts({
      ...base,
      hiddenDirs: ["/var/lib/bridge"],
      hiddenFiles: ["/run/secrets/key", "/var/lib/bridge/key"],
    });
    expect(paths(mounts)).toContain("hide-file /run/secrets/key");
    expect(paths(mounts)).not.toContain("hide-file /var/lib/bridge/key");
  });
});

describe("bwrap's arguments", () => {
  const mounts = sandboxMounts({ ...base, writable: ["/home/t"], roots: ["/srv/a"] });

  it("unshare PID, IPC and UTS, die with their parent, and drop every capability", () => {
    const args = bwrapArgs(mounts, {
      cwd: "/srv/a/work",
      switchesUser: false,
      setenv: {},
      ownNetwork: false,
    }).args;
    expect(args.slice(0, 8)).toEqual([
      "--die-with-parent",
      "--unshare-pid",
      "--unshare-ipc",
      "--unshare-uts",
      "--unshare-cgroup-try",
      "--ro-bind",
      "/",
      "/",
    ]);
    expect(args).toContain("--cap-drop");
    expect(args).not.toContain("--cap-add");
    expect(args.slice(-2)).toEqual(["--chdir", "/srv/a/work"]);
  });

  it("mount /proc after every bind, then make the hiding tmpfs and /dev read-only", () => {
    const args = bwrapArgs(mounts, {
      cwd: "/srv/a/work",
      switchesUser: false,
      setenv: {},
      ownNetwork: false,
    }).args;
    const proc = args.indexOf("--proc");
    expect(proc).toBeGreaterThan(args.lastIndexOf("--bind"));
    expect(args.slice(proc + 2, proc + 6)).toEqual([
      "--remount-ro",
      "/dev",
      "--remount-ro",
      "/srv/a",
    ]);
    expect(args.join(" ")).toContain("--perms 01777 --size 1024 --tmpfs /tmp");
  });

  it("make the directories leading to a bind inside a tmpfs passable (bwrap makes them 0700)", () => {
    const inShm = sandboxMounts({
      ...base,
      cwd: "/dev/shm/repo/clone",
      writable: ["/dev/shm/repo/home"],
    });
    const args = bwrapArgs(inShm, {
      cwd: "/dev/shm/repo/clone",
      switchesUser: false,
      setenv: {},
      ownNetwork: false,
    }).args;
    // Once, before the first bind that needs it.
    expect(args.join(" ")).toContain(
      "--perms 0755 --dir /dev/shm/repo --bind-fd 3 /dev/shm/repo/clone --bind-fd 4 /dev/shm/repo/home",
    );
  });

  it("give only what switching to the agent user takes, for setpriv to drop", () => {
    const args = bwrapArgs(mounts, {
      cwd: "/srv/a/work",
      switchesUser: true,
      setenv: {},
      ownNetwork: false,
    }).args;
    expect(args.join(" ")).toContain(
      "--cap-drop ALL --cap-add CAP_SETUID --cap-add CAP_SETGID --cap-add CAP_SETPCAP",
    );
  });
});

describe("a run's sandboxed command", () => {
  const tool = {
    bwrap: "/usr/bin/bwrap",
    env: "/usr/bin/env",
    socat: "/usr/bin/socat",
    version: "0.8.0",
  };
  let dir: string;
  let work: string;
  let home: string;
  let serverHome: string;
  let bin: string;

  beforeAll(async () => {
    // Not in the host's /tmp or /dev/shm (the tests' temp dir), which the run's own hide already.
    dir = await realpath(await mkdtemp(join("/var/tmp", "agent-bridge-sandbox-")));
    work = join(dir, "root", "work");
    home = join(dir, "home");
    serverHome = join(dir, "server-home");
    bin = join(dir, "root", "bridge", "node_modules", "cli", "bin", "cli");
    for (const d of [work, home, serverHome, join(bin, "..")]) await mkdir(d, { recursive: true });
    await writeFile(bin, "#!/bin/sh\n", { mode: 0o755 });
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const sandbox = () =>
    new Sandbox(tool, { hidden: [serverHome], roots: [join(dir, "root")], tmpBytes: 1024 });
  const command = (env: Record<string, string>, cliBin = bin) =>
    sandbox().command({ bin: cliBin, args: ["-p"], cwd: work, env });

  it("starts bwrap with SIGTERM ignored, and the CLI inside with it restored", async () => {
    const { bin: file, args } = await command({ HOME: home });
    expect(file).toBe("/usr/bin/env");
    expect(args.slice(0, 2)).toEqual(["--ignore-signal=TERM", "/usr/bin/bwrap"]);
    expect(args.slice(args.indexOf("--"))).toEqual([
      "--",
      "/usr/bin/env",
      "--default-signal=TERM",
      bin,
      "-p",
    ]);
  });

  it("hides the server's HOME, unless it is the CLI's own", async () => {
    const { args: other } = await command({ HOME: home });
    expect(other.join(" ")).toContain(`--tmpfs ${serverHome}`);
    const { args: own, dirs } = await command({ HOME: serverHome });
    expect(own.join(" ")).not.toContain(`--tmpfs ${serverHome}`);
    expect(own.join(" ")).toContain(`--bind-fd 3 ${serverHome}`);
    expect(dirs[0]).toBe(serverHome);
  });

  it("shows the CLI's installation read-only where its allowed root is hidden", async () => {
    const { args, dirs } = await command({ HOME: home });
    const installed = join(dir, "root", "bridge", "node_modules");
    expect(args.join(" ")).toContain(`--ro-bind-fd 5 ${installed}`);
    expect(dirs).toEqual([home, work, installed]);
  });

  it("binds each directory by an fd the spawner opens, and starts no run whose directory is reached through a link", async () => {
    const { args, dirs } = await command({ HOME: home });
    // bwrap never resolves their paths itself: the spawner opens them without following a link.
    expect(args.join(" ")).toContain(`--bind-fd 3 ${home} --bind-fd 4 ${work}`);
    expect(dirs.slice(0, 2)).toEqual([home, work]);
    // Another session's agent, whose work dir holds this one, swaps it for a link to the system.
    const aside = `${work}-aside`;
    await rename(work, aside);
    await symlink("/etc", work);
    try {
      await expect(command({ HOME: home })).rejects.toMatchObject({ code: "ELOOP" });
    } finally {
      await rm(work);
      await rename(aside, work);
    }
    // The run's own agent swaps a directory of its HOME it is given to write.
    await symlink("/etc", join(home, ".codex"));
    try {
      await expect(
        sandbox().command({
          bin,
          args: [],
          cwd: work,
          env: { HOME: home },
          reach: { writable: [join(home, ".codex")] },
        }),
      ).rejects.toMatchObject({ code: "ELOOP" });
    } finally {
      await rm(join(home, ".codex"));
    }
    // A link further up, inside HOME: nothing there is resolved while planning (an agent swapping
    // it meanwhile would choose the bind); the path goes to the spawner as given, which refuses it.
    const elsewhere = join(dir, "elsewhere");
    await mkdir(join(elsewhere, "codex"), { recursive: true });
    await symlink(elsewhere, join(home, "state"));
    try {
      const launch = await sandbox().command({
        bin,
        args: [],
        cwd: work,
        env: { HOME: home },
        reach: { writable: [join(home, "state", "codex")] },
      });
      expect(launch.dirs).toContain(join(home, "state", "codex"));
      expect(launch.dirs).not.toContain(join(elsewhere, "codex"));
      await expect(
        spawnProcess(launch.bin, launch.args, { cwd: work, env: {}, dirs: launch.dirs }),
      ).rejects.toMatchObject({ code: "ELOOP" });
    } finally {
      await rm(join(home, "state"));
    }
  });

  it("binds a session's extra directory at its stored path, and starts no run once a link stands on that path", async () => {
    // Stored as its real path when the session was given it: a repository in another directory
    // of the root, which an agent (this session's or another's) can write.
    const shared = join(dir, "root", "shared");
    const extra = join(shared, "inner", "repo");
    const victim = join(dir, "root", "other-tenant");
    await mkdir(extra, { recursive: true });
    await mkdir(join(victim, "repo"), { recursive: true });
    const run = () =>
      sandbox().command({
        bin,
        args: [],
        cwd: work,
        env: { HOME: home },
        reach: { extraDirs: [extra, join(dir, "root", "gone")] },
      });
    try {
      const launch = await run();
      expect(launch.dirs).toContain(extra);
      // One that is gone is left out, as before.
      expect(launch.dirs).not.toContain(join(dir, "root", "gone"));
      // The agent swaps a directory above it for a link to another tenant's root: resolved
      // again, the run would get that root's repository bound writable.
      await rename(join(shared, "inner"), join(shared, "inner-aside"));
      await symlink(victim, join(shared, "inner"));
      await expect(run()).rejects.toMatchObject({ code: "ELOOP" });
    } finally {
      await rm(shared, { recursive: true, force: true });
      await rm(victim, { recursive: true, force: true });
    }
  });

  it("points TMPDIR at its own /tmp when the CLI's is not writable there", async () => {
    const { args: outside } = await command({ HOME: home, TMPDIR: "/var/tmp" });
    expect(outside.join(" ")).toContain("--setenv TMPDIR /tmp");
    const { args: inHome } = await command({ HOME: home, TMPDIR: join(home, "tmp") });
    expect(inHome).not.toContain("--setenv");
  });

  it("gives a run that calls through the gateway a network of its own, with the gateway's socket served on its port", async () => {
    const gateway = { token: "abrun_t", port: 4321, socket: "/tmp/gw-x/run-1.sock" };
    const launch = await new Sandbox(tool, { hidden: [], roots: [], tmpBytes: 1024 }).command({
      bin,
      args: ["-p"],
      cwd: work,
      env: { HOME: home },
      reach: { gateway },
    });
    const { args } = launch;
    const line = args.join(" ");
    expect(args).toContain("--unshare-net");
    // The host's services' sockets are hidden; the gateway's is bound in, read-only.
    expect(line).toContain("--tmpfs /run");
    expect(line).toContain("--ro-bind /tmp/gw-x/run-1.sock /run/agent-bridge/gateway.sock");
    // The proxy's password, the run's token, in the environment: not in argv, which anyone reads.
    expect(line).not.toContain("abrun_t");
    expect(launch.env).toMatchObject({
      HTTPS_PROXY: "http://run:abrun_t@127.0.0.1:4321",
      NO_PROXY: "127.0.0.1,localhost,::1",
    });
    // The CLI starts behind socat, which listens on the gateway's port inside.
    const inner = args.slice(args.indexOf("--") + 3);
    expect(inner[0]).toBe("/bin/sh");
    expect(inner[2]).toContain(
      "TCP-LISTEN:4321,bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:/run/agent-bridge/gateway.sock",
    );
    expect(inner.slice(3)).toEqual(["sh", bin, "-p"]);
  });

  it("leaves a run that reaches its API itself on the host's network", async () => {
    const { args } = await command({ HOME: home });
    expect(args).not.toContain("--unshare-net");
    expect(args.join(" ")).not.toContain("PROXY");
  });

  it("rejects with ENOENT for a CLI that is not there, on PATH or by path", async () => {
    await expect(command({ HOME: home }, join(dir, "missing"))).rejects.toMatchObject({
      code: "ENOENT",
    });
    await expect(
      command({ HOME: home, PATH: join(dir, "root") }, "no-such-cli"),
    ).rejects.toMatchObject({ code: "ENOENT" });
  });
});

describe("AGENT_BRIDGE_SANDBOX where bubblewrap is missing", () => {
  const config = (env: Record<string, string>) =>
    loadConfig({ PATH: "/nonexistent", AGENT_BRIDGE_AUTH: "none", ...env });

  it("auto, with one user: runs go unsandboxed, logged and shown with the reason", () => {
    const lines: string[] = [];
    const logger = createLogger("warn", {}, (line) => lines.push(line));
    expect(startSandbox(config({}), logger)).toEqual({
      status: { enabled: false, reason: "bubblewrap (bwrap) is not installed" },
    });
    expect(lines.join("\n")).toContain("runs are not sandboxed");
  });

  it("on: refuses to start, saying what to install", () => {
    expect(() => startSandbox(config({ AGENT_BRIDGE_SANDBOX: "on" }), silentLogger)).toThrow(
      new SandboxError(
        "AGENT_BRIDGE_SANDBOX=on, but runs cannot be sandboxed: bubblewrap (bwrap) is not installed; install them (Debian: apt-get install bubblewrap socat), or set AGENT_BRIDGE_SANDBOX=auto to run without one where it is missing",
      ),
    );
  });

  it("auto, with agents of several tenants (AGENT_BRIDGE_AGENT_USER): refuses unless set off", () => {
    const tenants = { AGENT_BRIDGE_AGENT_USER: "agent-bridge-agent" };
    expect(() => startSandbox(config(tenants), silentLogger)).toThrow(
      /AGENT_BRIDGE_AGENT_USER is set \(agents of several tenants on this machine\), but runs cannot be sandboxed: bubblewrap \(bwrap\) is not installed; .* or set AGENT_BRIDGE_SANDBOX=off/,
    );
    expect(startSandbox(config({ ...tenants, AGENT_BRIDGE_SANDBOX: "off" }), silentLogger)).toEqual(
      { status: { enabled: false, reason: "AGENT_BRIDGE_SANDBOX=off" } },
    );
  });
});

describe("with the real bubblewrap", () => {
  it("on: finds it and says its version", () => {
    const { sandbox, status } = startSandbox(
      loadConfig({ PATH: process.env.PATH, AGENT_BRIDGE_SANDBOX: "on" }),
      silentLogger,
    );
    expect(sandbox).toBeDefined();
    expect(status).toEqual({
      enabled: true,
      mechanism: "bubblewrap",
      version: expect.stringMatching(/^\d+\.\d+/),
    });
  });

  it("serves the gateway's socket on its port inside, and starts no command when socat cannot", async () => {
    if (!testSandbox) throw new Error("bubblewrap does not work here (.ci/run installs it)");
    const dir = await realpath(await mkdtemp(join(tmpdir(), "agent-bridge-sandbox-")));
    // A stand-in gateway on a Unix socket, answering one line.
    const gateway = createServer((socket) => socket.end("from the gateway\n"));
    const socket = join(dir, "gateway.sock");
    await new Promise<void>((resolve) => gateway.listen(socket, resolve));
    const run = async (tool: Bubblewrap) => {
      const sandbox = new Sandbox(tool, { hidden: [], roots: [], tmpBytes: 1024 * 1024 });
      const launch = await sandbox.command({
        bin: "/bin/sh",
        args: ["-c", "exec socat -t 5 - TCP:127.0.0.1:4999 </dev/null"],
        cwd: dir,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        reach: { gateway: { token: "abrun_test", socket, port: 4999 } },
      });
      const child = await spawnProcess(launch.bin, launch.args, {
        cwd: dir,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...launch.env },
        dirs: launch.dirs,
      });
      const [stdout, stderr] = [readAll(child.stdout), readAll(child.stderr)];
      return { ...(await child.exited), stdout: await stdout, stderr: await stderr };
    };
    try {
      expect(await run(testSandbox.tool)).toMatchObject({ code: 0, stdout: "from the gateway\n" });
      // socat that exits at once: the command never starts, and the run's stderr says why.
      expect(await run({ ...testSandbox.tool, socat: "/bin/false" })).toEqual({
        code: 126,
        signal: null,
        stdout: "",
        stderr: "agent-bridge: no way to the model gateway in the sandbox\n",
      });
    } finally {
      gateway.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a SIGTERM to the run's group reaches the command, which has its grace before the sandbox ends", async () => {
    const sandbox = testSandbox;
    if (!sandbox) throw new Error("bubblewrap does not work here (.ci/run installs it)");
    const dir = await realpath(await mkdtemp(join(tmpdir(), "agent-bridge-sandbox-")));
    try {
      const script = `trap 'sleep 0.3; echo graceful > ${dir}/done; exit 0' TERM; echo ready; while :; do sleep 0.05; done`;
      const {
        bin: file,
        args,
        dirs,
      } = await sandbox.command({
        bin: "/bin/sh",
        args: ["-c", script],
        cwd: dir,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      });
      const child = await spawnProcess(file, args, {
        cwd: dir,
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        dirs,
      });
      await new Promise((resolve) => child.stdout.once("data", resolve));
      await terminateGroup(child.pid, 5000);
      expect(await child.exited).toEqual({ code: 0, signal: null });
      expect(existsSync(join(dir, "done")) && readFileSync(join(dir, "done"), "utf8")).toBe(
        "graceful\n",
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
