import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { generateKey } from "../../src/auth/keys.js";
import { ROOT } from "../cli/run-cli.js";
import { seedDataDir } from "../support/pglite-template.js";
import { runServerToExit, startServer } from "../support/server.js";

// How a server with API keys on lets its operator in: a first-start key, or AGENT_BRIDGE_API_KEY.

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
// Seeded: these tests are about keys, not about a first start's initdb and migrations.
const dataDir = async () => {
  const dir = mkdtempSync(join(tmpdir(), "agent-bridge-keys-"));
  dirs.push(dir);
  await seedDataDir(dir);
  return dir;
};

describe("start-up with API keys on", () => {
  it("prints an admin key once when none exists; it works, and a restart prints none", async () => {
    const env = { AGENT_BRIDGE_AUTH: "keys", AGENT_BRIDGE_DATA_DIR: await dataDir() };
    const first = await startServer(env);
    const key = (await first.waitForOutput(/\n {2}(ab_[A-Za-z0-9_-]{43})\n/))[1];
    // The listening line says where the agent works: the default is the server's own directory.
    expect(first.output()).toContain(
      `The agent works in ${resolve(ROOT)} (AGENT_BRIDGE_WORK_DIR).`,
    );
    expect(key).toBeDefined();
    expect(first.output()).toContain(
      `curl -H 'Authorization: Bearer ${key}' ${first.url}/v1/sessions`,
    );
    expect(
      (await fetch(`${first.url}/v1/keys`, { headers: { Authorization: `Bearer ${key}` } })).status,
    ).toBe(200);
    expect((await fetch(`${first.url}/v1/sessions`)).status).toBe(401);
    await first.stop();

    const second = await startServer(env);
    try {
      expect(second.output()).not.toMatch(/ab_[A-Za-z0-9_-]{43}/);
      expect(
        (await fetch(`${second.url}/v1/sessions`, { headers: { Authorization: `Bearer ${key}` } }))
          .status,
      ).toBe(200);
    } finally {
      await second.stop();
    }
  });

  it("makes AGENT_BRIDGE_API_KEY an admin key, and then prints none", async () => {
    const key = generateKey();
    const server = await startServer({
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_DATA_DIR: await dataDir(),
      AGENT_BRIDGE_API_KEY: key,
    });
    try {
      expect(server.output()).not.toMatch(/ab_[A-Za-z0-9_-]{43}/);
      const res = await fetch(`${server.url}/v1/keys`, {
        headers: { Authorization: `Bearer ${key}` },
      });
      expect(res.status).toBe(200);
      expect((await res.json()).data).toMatchObject([
        { name: "AGENT_BRIDGE_API_KEY", admin: true },
      ]);
    } finally {
      await server.stop();
    }
  });

  it("refuses AGENT_BRIDGE_AUTH=none on an address other machines can reach", async () => {
    const { code, output } = await runServerToExit({ AGENT_BRIDGE_AUTH: "none", HOST: "0.0.0.0" });
    expect(code).toBe(1);
    expect(output).toContain('AGENT_BRIDGE_AUTH: "none" is only allowed on a loopback address');
  });
});
