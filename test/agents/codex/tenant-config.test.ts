import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chown, link, lstat, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codexUpstream } from "../../../src/agents/codex/credentials.js";
import { seedTenantCodexHome } from "../../../src/agents/codex/tenant-config.js";
import { agentFiles } from "../../../src/process/agent-files.js";
import type { RunAs } from "../../../src/process/agent-user.js";
import { ensureAgentUser, isRoot } from "../../support/agent-user.js";

// Before each codex run the operator's config.toml is copied into the tenant's CODEX_HOME, which
// is the agent's to change: the copy is written as the agent, in place of whatever it left there,
// and never through it. The operator's auth.json is never copied (the gateway holds its key), and
// whatever is at that name is removed, the same way. Needs root, as the agent user does.

describe.skipIf(!isRoot)("the operator's codex configuration in a tenant's CODEX_HOME", () => {
  let runAs: RunAs;
  let operatorHome: string;
  let tenantHome: string;
  let rootOnly: string;
  beforeAll(async () => {
    const agent = ensureAgentUser();
    runAs = { uid: agent.uid, gid: agent.gid, groups: [] };
    operatorHome = await mkdtemp(join(tmpdir(), "operator-codex-"));
    await writeFile(join(operatorHome, "config.toml"), 'model = "gpt-test"\n');
    await writeFile(join(operatorHome, "auth.json"), '{"OPENAI_API_KEY":"sk-test"}\n');
    tenantHome = await mkdtemp(join(tmpdir(), "tenant-codex-"));
    await chown(tenantHome, agent.uid, agent.gid);
    rootOnly = await mkdtemp(join(tmpdir(), "root-only-"));
  });
  afterAll(async () => {
    for (const dir of [operatorHome, tenantHome, rootOnly]) {
      await rm(dir, { recursive: true, force: true });
    }
  });

  const asAgent = (command: string) =>
    execFileSync("setpriv", [
      `--reuid=${runAs.uid}`,
      `--regid=${runAs.gid}`,
      "--clear-groups",
      "sh",
      "-ec",
      command,
    ]);
  const rootFile = async (name: string) => {
    const path = join(rootOnly, name);
    await writeFile(path, "ROOT-SECRET\n", { mode: 0o600 });
    return path;
  };
  const state = async (path: string) => {
    const { uid, gid, mode, nlink } = await stat(path);
    return { uid, gid, mode, nlink, content: await readFile(path, "utf8") };
  };
  const seed = () =>
    seedTenantCodexHome(
      operatorHome,
      tenantHome,
      agentFiles({ PATH: process.env.PATH ?? "" }, runAs),
    );

  /** The copy is a file of the agent's own, with the operator's content; no login is there. */
  const expectCopies = async () => {
    expect(await readFile(join(tenantHome, "config.toml"), "utf8")).toBe(
      await readFile(join(operatorHome, "config.toml"), "utf8"),
    );
    expect(await lstat(join(tenantHome, "config.toml"))).toMatchObject({
      uid: runAs.uid,
      nlink: 1,
    });
    expect((await lstat(join(tenantHome, "config.toml"))).isFile()).toBe(true);
    expect(existsSync(join(tenantHome, "auth.json"))).toBe(false);
  };

  it("copies the settings and never the login: a copy an earlier version left is removed", async () => {
    await seed();
    await expectCopies();
    await writeFile(join(tenantHome, "auth.json"), await readFile(join(operatorHome, "auth.json")));
    await seed();
    await expectCopies();
  });

  it("replaces a link and a hard link to root's files, which stay as they were", async () => {
    const [linked, hardLinked] = [await rootFile("linked"), await rootFile("hard-linked")];
    const before = [await state(linked), await state(hardLinked)];
    asAgent(`ln -sf ${linked} ${join(tenantHome, "config.toml")}`);
    await link(hardLinked, join(tenantHome, "auth.json"));

    await seed();
    expect([await state(linked), await state(hardLinked)]).toEqual(before);
    await expectCopies();
  });

  it("replaces FIFOs without waiting on them", async () => {
    asAgent(`cd ${tenantHome}; rm -f config.toml auth.json; mkfifo config.toml auth.json`);
    await seed();
    await expectCopies();
  });
});

// The operator's saved key is read at start-up from their CODEX_HOME, which runs share when there
// is no agent user: a link or a FIFO an agent left there is not followed, nor waited on.
describe("the operator's saved codex key", () => {
  const baseUrl = "https://api.example/v1";
  it("is read from a regular auth.json, and not through a link nor from a FIFO", async () => {
    const home = await mkdtemp(join(tmpdir(), "operator-login-"));
    try {
      const env = { CODEX_HOME: home };
      await writeFile(join(home, "elsewhere.json"), '{"OPENAI_API_KEY":"sk-planted"}');
      execFileSync("ln", ["-s", join(home, "elsewhere.json"), join(home, "auth.json")]);
      expect(codexUpstream(env, baseUrl)).toBeInstanceOf(Error);
      await rm(join(home, "auth.json"));
      execFileSync("mkfifo", [join(home, "auth.json")]);
      expect(codexUpstream(env, baseUrl)).toBeInstanceOf(Error);
      await rm(join(home, "auth.json"));
      await writeFile(join(home, "auth.json"), '{"OPENAI_API_KEY":"sk-saved"}');
      expect(codexUpstream(env, baseUrl)).toMatchObject({
        credential: { authorization: "Bearer sk-saved" },
        source: "auth.json",
      });
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
