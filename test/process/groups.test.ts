import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import {
  ByteTail,
  groupAlive,
  liveGroupMembers,
  terminateGroup,
} from "../../src/process/groups.js";

describe("ByteTail", () => {
  it("keeps the last maxBytes bytes across many small chunks", () => {
    const tail = new ByteTail(10);
    for (let i = 0; i < 1000; i++) tail.push(Buffer.from(String(i % 10)));
    expect(tail.text()).toBe("0123456789");
  });

  it("keeps the end of one chunk larger than the bound", () => {
    const tail = new ByteTail(4);
    tail.push(Buffer.from("abcdefgh"));
    expect(tail.text()).toBe("efgh");
  });

  it("drops the remains of a multibyte character cut by the bound", () => {
    const tail = new ByteTail(5);
    tail.push(Buffer.from("xx漢字")); // 2 + 3 + 3 bytes: the cut falls inside 漢
    expect(tail.text()).toBe("字");
  });

  it("keeps nothing with a bound of 0", () => {
    const tail = new ByteTail(0);
    tail.push(Buffer.from("abc"));
    expect(tail.text()).toBe("");
  });
});

describe("process group helpers", () => {
  it("terminateGroup kills a detached group and its children; groupAlive then says so", async () => {
    // It says so once its child runs.
    const child = spawn("sh", ["-c", "sleep 300 & echo ready; exec sleep 300"], {
      detached: true,
      stdio: ["ignore", "pipe", "ignore"],
    });
    const pgid = child.pid ?? 0;
    await once(child.stdout, "data");
    expect(await groupAlive(pgid)).toBe(true);
    expect((await liveGroupMembers(pgid))?.length).toBeGreaterThanOrEqual(2);
    await terminateGroup(pgid, 500);
    expect(await groupAlive(pgid)).toBe(false);
  });

  it("groupAlive counts the members of a group whose leader is gone, and only the live ones", async () => {
    // The leader starts a member and exits; its child lives on in the group until killed.
    const child = spawn("sh", ["-c", "sleep 300 & echo $!"], {
      detached: true,
      stdio: ["ignore", "pipe", "ignore"],
    });
    const pgid = child.pid ?? 0;
    const exited = once(child, "exit");
    const [out] = await once(child.stdout, "data");
    const member = Number(String(out).trim());
    await exited;
    expect(await groupAlive(pgid)).toBe(true);
    expect(await liveGroupMembers(pgid)).toEqual([member]);
    process.kill(member, "SIGKILL");
    await expect.poll(() => groupAlive(pgid), { timeout: 10_000 }).toBe(false);
  });

  it("terminateGroup returns at once for a group that no longer exists", async () => {
    const child = spawn("true", [], { detached: true, stdio: "ignore" });
    await new Promise((r) => child.once("exit", r));
    const started = performance.now();
    await terminateGroup(child.pid ?? 0, 60_000);
    // Not the grace: no process to wait for.
    expect(performance.now() - started).toBeLessThan(30_000);
  });
});
