import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/pglite-template.js";
import { freePort, runServerToExit, startServer } from "../support/server.js";

// The embedded database's data dir belongs to one server process at a time, and the lock goes
// with its holder however it ends: nothing a dead holder left behind stops the next start.

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
const dataDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "agent-bridge-lock-"));
  dirs.push(dir);
  return dir;
};

describe("the embedded database's lock", () => {
  const env = { AGENT_BRIDGE_DATA_DIR: dataDir() };
  // Not a first start's initdb: what is under test is the lock.
  beforeAll(() => seedDataDir(env.AGENT_BRIDGE_DATA_DIR));

  it("ignores an older version's pid file, refuses a second server while held, and is free at once after SIGKILL", async () => {
    // The old lock named a pid; after a reboot that pid can be any live process, as this one.
    const bystander = spawn(process.execPath, ["-e", "process.stdin.resume()"], {
      stdio: ["pipe", "ignore", "ignore"],
    });
    await once(bystander, "spawn");
    writeFileSync(path.join(env.AGENT_BRIDGE_DATA_DIR, "pglite.lock"), String(bystander.pid));
    const holder = await startServer(env).finally(() => bystander.kill("SIGKILL"));
    try {
      const second = await runServerToExit({
        ...env,
        AGENT_BRIDGE_AUTH: "none",
        PORT: String(await freePort()),
      });
      expect(second.code).toBe(1);
      expect(second.stderr).toBe(
        `agent-bridge: the embedded database in ${env.AGENT_BRIDGE_DATA_DIR} is in use by process ${holder.child.pid} (a running agent-bridge?); stop it first, or use another AGENT_BRIDGE_DATA_DIR\n`,
      );
      // The refused start took nothing from the holder.
      expect((await fetch(`${holder.url}/readyz`)).status).toBe(200);
    } finally {
      await holder.stop("SIGKILL");
    }

    const next = await startServer(env);
    expect(await next.stop()).toBe(0);
  });
});
