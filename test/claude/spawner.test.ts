import { execFileSync } from "node:child_process";
import type { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { groupAlive } from "../../src/claude/process.js";
import { spawnProcess } from "../../src/claude/spawner.js";

// CLIs are started by a small helper process, which hands their stdio pipes to the server.

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };

function readAll(stream: Socket): Promise<string> {
  let text = "";
  stream.on("data", (d: Buffer) => {
    text += d.toString();
  });
  return new Promise((resolve) => stream.once("close", () => resolve(text)));
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

  it("when the spawner dies, its processes count as ended and the next start forks a new one", async () => {
    const child = await spawnProcess("/bin/sh", ["-c", "sleep 30"], { cwd: "/", env });
    const helper = execFileSync("pgrep", ["-P", String(process.pid), "-f", "spawner-child"])
      .toString()
      .trim();
    process.kill(Number(helper), "SIGKILL");
    expect(await child.exited).toEqual({ code: null, signal: null });
    process.kill(-child.pid, "SIGKILL");
    const next = await spawnProcess("/bin/sh", ["-c", "echo again"], { cwd: "/", env });
    expect(await readAll(next.stdout)).toBe("again\n");
    expect(await next.exited).toEqual({ code: 0, signal: null });
  });
});
