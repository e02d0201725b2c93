import { afterAll, describe, expect, it } from "vitest";
import { serverDatabases } from "../support/db.js";
import { startServer } from "../support/server.js";
import { cliWithEnv, ROOT } from "./run-cli.js";

// `agent-bridge keys …` works on the server's own database, with the server's configuration.
// The commands run in-process (test/cli/cli.test.ts runs the bin itself); the servers are processes.

const databases = serverDatabases();
afterAll(() => databases.cleanup());

describe("agent-bridge keys next to a running server", () => {
  it("refuses to open the embedded database the server holds, and says why", async () => {
    const env = await databases.embedded();
    const server = await startServer({ ...env, AGENT_BRIDGE_AUTH: "keys" });
    try {
      const res = await cliWithEnv(["keys", "list"], env);
      expect(res.code).toBe(1);
      expect(res.stderr).toContain(`in use by process ${server.child.pid}`);
    } finally {
      await server.stop();
    }
  });
});

describe.each(databases.targets)("agent-bridge keys on %s", (_name, database) => {
  // Two server processes start one after the other.
  it("creates a key the server accepts, lists it without its secret, and revokes it", {
    timeout: 180_000,
  }, async () => {
    const env = await database();
    const created = await cliWithEnv(["keys", "create", "--name", "ci", "--admin"], env);
    expect(created.code).toBe(0);
    const key = created.stdout.trim();
    expect(key).toMatch(/^ab_[A-Za-z0-9_-]{43}$/);
    expect(created.stderr).toContain("admin key");

    const listed = await cliWithEnv(["keys", "list"], env);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain("ci");
    expect(listed.stdout).toContain(`${key.slice(0, 9)}…`);
    expect(listed.stdout).not.toContain(key);
    const id = /^([0-9a-f-]{36})\s+ci\s/m.exec(listed.stdout)?.[1];
    expect(id).toBeDefined();

    const auth = { headers: { Authorization: `Bearer ${key}` } };
    const before = await startServer({ ...env, AGENT_BRIDGE_AUTH: "keys" });
    try {
      expect((await fetch(`${before.url}/v1/keys`, auth)).status).toBe(200);
    } finally {
      await before.stop();
    }
    const revoked = await cliWithEnv(["keys", "revoke", id ?? ""], env);
    expect(revoked.code).toBe(0);
    const after = await startServer({ ...env, AGENT_BRIDGE_AUTH: "keys" });
    try {
      expect((await fetch(`${after.url}/v1/keys`, auth)).status).toBe(401);
    } finally {
      await after.stop();
    }
    expect((await cliWithEnv(["keys", "list"], env)).stdout).toMatch(
      /ci .*\d{4}-\d\d-\d\dT[\d:.]+Z\s*$/m,
    );
  });

  it("creates a key with a policy, lists it, and changes it with keys update", {
    timeout: 120_000,
  }, async () => {
    const env = {
      ...(await database()),
      AGENT_BRIDGE_ALLOWED_ROOTS: ROOT,
    };
    const created = await cliWithEnv(
      [
        "keys",
        "create",
        "--name",
        "tenant",
        "--permission-modes",
        "plan,default",
        "--work-roots",
        ROOT,
        "--max-budget-usd",
        "25",
        "--no-worktrees",
        "--models",
        "claude-opus-5-5, claude-haiku-4-5",
        "--json",
      ],
      env,
    );
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const { id } = JSON.parse(created.stdout) as { id: string };
    const row = async () =>
      (await cliWithEnv(["keys", "list"], env)).stdout.split("\n").find((l) => l.startsWith(id));
    expect(await row()).toMatch(
      new RegExp(
        `tenant .* user +default,plan +${ROOT.replace(/\/$/, "")} +\\$25 +no +- +claude-opus-5-5,claude-haiku-4-5 `,
      ),
    );

    const updated = await cliWithEnv(
      [
        "keys",
        "update",
        id,
        "--permission-modes",
        "default",
        "--max-budget-usd",
        "none",
        "--worktrees",
        "--models",
        "any",
      ],
      env,
    );
    expect(updated.code).toBe(0);
    expect(updated.stderr).toContain(`updated key ${id}`);
    expect(await row()).toMatch(
      / user +default,acceptEdits,auto,plan,dontAsk +\S+ +- +yes +- +any /,
    );

    const outside = await cliWithEnv(["keys", "update", id, "--work-roots", "/"], env);
    expect(outside.code).toBe(1);
    expect(outside.stderr).toContain("outside the allowed roots");
    const badMode = await cliWithEnv(["keys", "update", id, "--permission-modes", "sudo"], env);
    expect(badMode.code).toBe(1);
    expect(badMode.stderr).toContain("--permission-modes: sudo is not one of");

    // What its sandboxed agents may reach, as the README's Keys block sets it.
    const egress = await cliWithEnv(
      ["keys", "update", id, "--egress", "github.com,*.npmjs.org"],
      env,
    );
    expect(egress.code).toBe(0);
    expect(await row()).toMatch(/ yes +github\.com,\*\.npmjs\.org /);
    const badHost = await cliWithEnv(["keys", "update", id, "--egress", "http://x.com"], env);
    expect(badHost.code).toBe(1);
    expect(badHost.stderr).toContain('"http://x.com" is not an egress entry');
    expect((await cliWithEnv(["keys", "update", id, "--egress", "none"], env)).code).toBe(0);
    expect(await row()).toMatch(/ yes +- /);

    // Tool rules, as JSON (docs/api.md#tool-rules); unfit ones name what is wrong.
    const rules = await cliWithEnv(
      ["keys", "update", id, "--tool-rules", '[{"tool":"Bash","command":"rm *","decision":"ask"}]'],
      env,
    );
    expect(rules.code).toBe(0);
    const badRule = await cliWithEnv(
      ["keys", "update", id, "--tool-rules", '[{"tool":"Read","command":"x","decision":"ask"}]'],
      env,
    );
    expect(badRule.code).toBe(1);
    expect(badRule.stderr).toContain(
      "--tool-rules: 0.command: command applies to the shell tool only",
    );
  });
});
