import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, realpath, rm, symlink } from "node:fs/promises";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finished } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { groupAlive, liveGroupMembers, terminateGroup } from "../../src/process/groups.js";
import { runProcess, spawnProcess, type WholeBounds } from "../../src/process/spawner.js";
import { waitUntil } from "../support/process.js";

// CLIs are started by a small helper process, which hands their stdio pipes to the server.

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };

function readAll(stream: Socket): Promise<string> {
  let text = "";
  stream.on("data", (d: Buffer) => {
    text += d.toString();
  });
  // The pipe may have ended before the caller got it (nothing on it): finished() knows.
  return finished(stream).then(() => text);
}

const root = fileURLToPath(new URL("../..", import.meta.url));
const spawnerModule = fileURLToPath(new URL("../../src/process/spawner.ts", import.meta.url));

// Each started process writes its pid to $PID_DIR/<name> once it runs (and ignores SIGTERM, if it
// should). Blocking the event loop after the second request leaves its stdio pipes sent but never
// acknowledged: Node then never reports the IPC channel's end to the spawner.
const serverScript = `
const { spawnProcess } = await import(process.env.SPAWNER);
const env = { PATH: process.env.PATH };
const start = (name, trap) => spawnProcess("/bin/sh",
  ["-c", trap + "echo $$ > " + process.env.PID_DIR + "/" + name + "; exec sleep 300"],
  { cwd: "/", env });
await start("obeying", "");
void start("ignoring", "trap '' TERM; ");
setImmediate(() => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0));
`;

/** The pid of the spawner this process forked. */
function spawnerPid(): number {
  return Number(
    execFileSync("pgrep", ["-P", String(process.pid), "-f", "spawner-child"])
      .toString()
      .trim(),
  );
}

/** The pid of a process the spawner has running (the one a test started through it), or 0. */
function spawnerChild(): number {
  try {
    return Number(
      execFileSync("pgrep", ["-P", String(spawnerPid())])
        .toString()
        .trim(),
    );
  } catch {
    return 0;
  }
}

describe("the process spawner", () => {
  it("hands over every byte, even what the process writes before it reads stdin", async () => {
    // 200 000 bytes at once: more than a pipe holds, so most of it is written after the handover.
    const script = "head -c 200000 /dev/zero | tr '\\0' x; printf err >&2; cat";
    const child = await spawnProcess("/bin/sh", ["-c", script], { cwd: "/", env });
    const out = readAll(child.stdout);
    const err = readAll(child.stderr);
    child.stdin.end("and back");
    expect(await out).toBe(`${"x".repeat(200_000)}and back`);
    expect(await err).toBe("err");
    expect(await child.exited).toEqual({ code: 0, signal: null });
  });

  it("hands over the pipes of many processes started at once that exit at once, their output whole", async () => {
    // Handle sends wait in line; before the fix, Node's own exit handling closed the pipes of a
    // process that was gone before its turn came, and its start never completed.
    const runs = Array.from({ length: 40 }, async (_, i) => {
      const script = `head -c ${i * 1000} /dev/zero | tr '\\0' x >&2; printf 'out ${i}'; exit 3`;
      const child = await spawnProcess("/bin/sh", ["-c", script], { cwd: "/", env });
      const [out, err, exited] = await Promise.all([
        readAll(child.stdout),
        readAll(child.stderr),
        child.exited,
      ]);
      child.stdin.destroy();
      return { out, errBytes: err.length, exited };
    });
    const results = await Promise.all(runs);
    results.forEach((r, i) => {
      expect(r).toEqual({ out: `out ${i}`, errBytes: i * 1000, exited: { code: 3, signal: null } });
    });
  });

  it("starts the process in its own group, and reports how it ended", async () => {
    const child = await spawnProcess("/bin/sh", ["-c", "sleep 30"], { cwd: "/", env });
    expect(await groupAlive(child.pid)).toBe(true);
    process.kill(-child.pid, "SIGTERM");
    expect(await child.exited).toEqual({ code: null, signal: "SIGTERM" });
  });

  it("fails with the spawn error's code: a missing binary, a missing directory", async () => {
    await expect(spawnProcess("/nonexistent/claude", [], { cwd: "/", env })).rejects.toMatchObject({
      code: "ENOENT",
    });
    await expect(
      spawnProcess("/bin/sh", ["-c", "true"], { cwd: "/nonexistent-dir", env }),
    ).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("hands over the directories asked for as fds 3, 4, …, and starts nothing when a link stands anywhere on their paths", async () => {
    const dir = await realpath(await mkdtemp(join(tmpdir(), "agent-bridge-spawner-")));
    try {
      await mkdir(join(dir, "a", "work"), { recursive: true });
      await mkdir(join(dir, "b"));
      const child = await spawnProcess(
        "/bin/sh",
        ["-c", "readlink /proc/self/fd/3 /proc/self/fd/4"],
        { cwd: "/", env, dirs: [join(dir, "a", "work"), join(dir, "b")] },
      );
      const out = readAll(child.stdout);
      expect(await child.exited).toEqual({ code: 0, signal: null });
      expect(await out).toBe(`${join(dir, "a", "work")}\n${join(dir, "b")}\n`);

      // The last part a link, or one before it: what the path now leads to is not opened.
      await symlink(join(dir, "a"), join(dir, "link"));
      await symlink("/etc", join(dir, "a", "etc"));
      for (const linked of [join(dir, "a", "etc"), join(dir, "link", "work")]) {
        await expect(
          spawnProcess("/bin/true", [], { cwd: "/", env, dirs: [linked] }),
          linked,
        ).rejects.toMatchObject({ code: "ELOOP" });
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  describe("a short command run to its end there", () => {
    const sh = (script: string, bounds: Partial<WholeBounds> = {}, input?: string | Buffer) =>
      runProcess(
        "/bin/sh",
        ["-c", script],
        { cwd: "/", env, input },
        {
          timeLimitMs: 30_000,
          stdout: { maxBytes: 1 << 20, over: "stop" },
          stderr: { maxBytes: 1 << 20, over: "stop" },
          ...bounds,
        },
      );

    it("comes back whole in one answer: its input read, its output byte for byte, how it exited", async () => {
      // Every byte value, 8 MiB of it: more than a pipe holds, in many chunks.
      const bytes = Buffer.alloc(8 << 20, Buffer.from(Array.from({ length: 256 }, (_, i) => i)));
      const ran = await sh(
        "cat; printf err >&2; exit 3",
        { stdout: { maxBytes: 8 << 20, over: "stop" } },
        bytes,
      );
      expect(ran.stdout?.equals(bytes)).toBe(true);
      expect(ran).toMatchObject({
        stderr: Buffer.from("err"),
        exit: { code: 3, signal: null },
        cut: false,
        late: false,
      });
    });

    it("past a stop bound, its output is null and its group stopped; past a head bound, cut there; past a tail bound, its last bytes kept", async () => {
      const endless = "printf 0123456789abcdef >&2; yes x";
      const stopped = await sh(endless, {
        stdout: { maxBytes: 1000, over: "stop" },
        stderr: { maxBytes: 10, over: "tail" },
      });
      expect(stopped).toMatchObject({ stdout: null, exit: { signal: "SIGKILL" }, late: false });
      expect(stopped.stderr?.toString()).toBe("6789abcdef");

      const cut = await sh(endless, { stdout: { maxBytes: 1000, over: "head" } });
      expect(cut).toMatchObject({ cut: true, exit: { signal: "SIGKILL" } });
      expect(cut.stdout?.toString()).toBe("x\n".repeat(500));
    });

    it("is stopped at its time limit, though a process that left its group holds its output open", async () => {
      const dir = await mkdtemp(join(tmpdir(), "spawner-whole-"));
      const escaped = join(dir, "pid");
      try {
        // The command ends once the escaped process runs, holding its pipes; the limit comes after.
        const script = `setsid sh -c 'echo $$ > ${escaped}; exec sleep 60' &
          until [ -s ${escaped} ]; do sleep 0.01; done`;
        const ran = await sh(script, { timeLimitMs: 2000 });
        expect(ran).toMatchObject({ stdout: Buffer.alloc(0), exit: { code: 0 }, late: true });
      } finally {
        if (existsSync(escaped)) process.kill(Number(await readFile(escaped, "utf8")), "SIGKILL");
        await rm(dir, { recursive: true, force: true });
      }
    });

    it("fails with the spawn error's code; with the spawner's loss, and its command is stopped", async () => {
      await expect(
        runProcess(
          "/nonexistent/git",
          [],
          { cwd: "/", env },
          {
            timeLimitMs: 1000,
            stdout: { maxBytes: 10, over: "stop" },
            stderr: { maxBytes: 10, over: "stop" },
          },
        ),
      ).rejects.toMatchObject({ code: "ENOENT" });
      // Longer than the wait below: only its stop ends it in time.
      const running = sh("exec sleep 300");
      await waitUntil(() => spawnerChild() !== 0, "the spawner's sleep");
      const sleeper = spawnerChild();
      process.kill(spawnerPid(), "SIGKILL");
      await expect(running).rejects.toThrow("the process spawner exited");
      await waitUntil(async () => !(await groupAlive(sleeper)), "the sleep is stopped");
      expect((await sh("echo again")).stdout?.toString()).toBe("again\n");
    });

    it("forks the spawner again after a fork that failed for want of file descriptors", () => {
      // In a process of its own, its descriptors used up but one: the fork's pipes cannot be made.
      const script = `
        import { closeSync, openSync } from "node:fs";
        const { runProcess } = await import(process.env.SPAWNER);
        const bounds = { timeLimitMs: 5000, stdout: { maxBytes: 100, over: "stop" }, stderr: { maxBytes: 100, over: "stop" } };
        const echo = (word) => runProcess("/bin/echo", [word], { cwd: "/", env: {} }, bounds)
          .then((ran) => ran.stdout.toString().trim(), (err) => "failed");
        const fds = [];
        try { for (;;) fds.push(openSync("/dev/null", "r")); } catch {}
        closeSync(fds.pop());
        const first = await echo("first");
        for (const fd of fds) closeSync(fd);
        console.log(first, await echo("second"));
        process.exit(0);
      `;
      const out = execFileSync(
        process.execPath,
        ["--import", "tsx", "--input-type=module", "-e", script],
        { cwd: root, env: { PATH: env.PATH, SPAWNER: spawnerModule }, timeout: 60_000 },
      );
      expect(out.toString().trim()).toBe("failed second");
    });
  });

  it("when the spawner dies, its processes count as ended and the next start forks a new one", async () => {
    const child = await spawnProcess("/bin/sh", ["-c", "sleep 30"], { cwd: "/", env });
    process.kill(spawnerPid(), "SIGKILL");
    expect(await child.exited).toEqual({ code: null, signal: null });
    process.kill(-child.pid, "SIGKILL");
    const next = await spawnProcess("/bin/sh", ["-c", "echo again"], { cwd: "/", env });
    expect(await readAll(next.stdout)).toBe("again\n");
    expect(await next.exited).toEqual({ code: 0, signal: null });
  });

  it("a signal for the server's whole process group (Ctrl-C, a service manager's stop) does not end it", async () => {
    const child = await spawnProcess("/bin/sh", ["-c", "read line; echo got $line"], {
      cwd: "/",
      env,
    });
    const helper = spawnerPid();
    for (const signal of ["SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM"] as const)
      process.kill(helper, signal);
    // It answers after the signals: they did not end it.
    const next = await spawnProcess("/bin/sh", ["-c", "echo again"], { cwd: "/", env });
    expect(await readAll(next.stdout)).toBe("again\n");
    expect(spawnerPid()).toBe(helper);
    // And a process started before them is still reported on.
    const out = readAll(child.stdout);
    child.stdin.end("x\n");
    expect(await out).toBe("got x\n");
    expect(await child.exited).toEqual({ code: 0, signal: null });
  });

  it("when the server dies, even while handing a process over, it stops every group it started (SIGTERM, then SIGKILL for what stays), then exits", async () => {
    const dir = await mkdtemp(join(tmpdir(), "spawner-"));
    const pidFile = (name: string) => join(dir, name);
    // A stand-in for the server in a process group of its own: it starts one process, then asks
    // for a second (ignoring SIGTERM) and stops reading before the handover is done.
    const server = spawn(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", serverScript],
      {
        cwd: root,
        detached: true,
        stdio: "ignore",
        env: { PATH: env.PATH, PID_DIR: dir, SPAWNER: spawnerModule },
      },
    );
    const pids: number[] = [];
    try {
      for (const name of ["obeying", "ignoring"]) {
        await waitUntil(() => existsSync(pidFile(name)), `the ${name} process has started`);
        pids.push(Number(await readFile(pidFile(name), "utf8")));
      }
      process.kill(server.pid ?? 0, "SIGKILL");
      await waitUntil(
        async () => !(await groupAlive(pids[0] ?? 0)) && !(await groupAlive(pids[1] ?? 0)),
        "the groups the spawner started are gone",
      );
      // The server's group (it and its spawner) is empty: the spawner has exited.
      await waitUntil(
        async () => (await liveGroupMembers(server.pid ?? 0))?.length === 0,
        "the spawner has exited",
      );
    } finally {
      for (const pid of [server.pid ?? 0, ...pids]) await terminateGroup(pid, 100);
      await rm(dir, { recursive: true, force: true });
    }
  });
});
