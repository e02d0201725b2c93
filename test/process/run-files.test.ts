import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chown, mkdir, mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BridgeEvent, bareCompletion } from "../../src/events.js";
import { AgentFileError } from "../../src/process/agent-files.js";
import { runFiles, withRunFiles } from "../../src/process/run-files.js";
import type { AgentIdentity } from "../../src/process/tenant-homes.js";
import { ensureAgentUser, isRoot } from "../support/agent-user.js";

// The files a run hands its CLI by path: private to the CLI's user (run as the agent user, made
// by that user in its tenant's TMPDIR), and gone once the run is over, however it ends.

const ENV = { PATH: process.env.PATH ?? "/usr/bin:/bin" };

describe("run files", () => {
  const mode = async (path: string) => (await stat(path)).mode & 0o777;

  it("writes into a directory of the run's that only the server's user can read", async () => {
    const files = runFiles(ENV);
    const file = await files.write("mcp.json", "{}");
    expect(await readFile(file, "utf8")).toBe("{}");
    expect(await mode(file)).toBe(0o600);
    expect(await mode(dirname(file))).toBe(0o700);
    await files.remove();
    expect(existsSync(dirname(file))).toBe(false);
  });

  const text = (t: string): BridgeEvent[] => [{ type: "text_delta", text: t }];
  const completed: BridgeEvent[] = [bareCompletion("failed", "the CLI exited")];

  it("removes them before the completion goes out, so its reader finds them gone", async () => {
    const written: string[] = [];
    const run = withRunFiles(ENV, undefined, async function* (files) {
      written.push(await files.write("mcp.json", "{}"));
      yield text("working");
      yield completed;
    });
    expect((await run.next()).value).toEqual(text("working"));
    expect(existsSync(written[0] ?? "")).toBe(true);
    expect((await run.next()).value).toEqual(completed);
    expect(existsSync(dirname(written[0] ?? ""))).toBe(false);
  });

  it("removes them when the run ends early or fails", async () => {
    const written: string[] = [];
    const run = withRunFiles(ENV, undefined, async function* (files) {
      written.push(await files.write("a", "1"));
      yield text("1");
      yield text("2");
    });
    expect((await run.next()).value).toEqual(text("1"));
    expect(existsSync(written[0] ?? "")).toBe(true);
    // A consumer that stops early (a cancel) returns the generator.
    await run.return(undefined);
    expect(existsSync(dirname(written[0] ?? ""))).toBe(false);

    const failing = withRunFiles(ENV, undefined, async function* (files) {
      written.push(await files.write("b", "2"));
      yield text("1");
      throw new Error("the CLI could not start");
    });
    await expect(async () => {
      for await (const _ of failing);
    }).rejects.toThrow("the CLI could not start");
    expect(existsSync(dirname(written[1] ?? ""))).toBe(false);
  });

  describe.skipIf(!isRoot)("for an agent run as another user", () => {
    let tenantTmp: string;
    let tenant: AgentIdentity;
    beforeAll(async () => {
      const agent = ensureAgentUser();
      tenantTmp = await mkdtemp(join(tmpdir(), "tenant-tmp-"));
      await chown(tenantTmp, agent.uid, agent.gid);
      tenant = {
        runAs: { uid: agent.uid, gid: agent.gid, groups: [] },
        env: { HOME: tenantTmp, TMPDIR: tenantTmp },
      };
    });
    afterAll(() => rm(tenantTmp, { recursive: true, force: true }));

    it("makes, writes and removes them as the agent, under its TMPDIR", async () => {
      const files = runFiles(ENV, tenant);
      const file = await files.write("image-1.png", Buffer.from([0x89, 0x50]));
      expect(dirname(dirname(file))).toBe(tenantTmp);
      expect(await stat(dirname(file))).toMatchObject({ uid: tenant.runAs.uid, mode: 0o40700 });
      expect(await stat(file)).toMatchObject({ uid: tenant.runAs.uid, mode: 0o100600 });
      await files.remove();
      expect(await readdir(tenantTmp)).toEqual([]);
    });

    it("makes nothing for a run without files", async () => {
      await runFiles(ENV, tenant).remove();
      expect(await readdir(tenantTmp)).toEqual([]);
    });

    it("writes nothing into, and removes nothing of, a root directory the agent put in the run directory's place", async () => {
      const rootDir = await mkdtemp(join(tmpdir(), "root-only-"));
      await mkdir(join(rootDir, "kept"));
      const files = runFiles(ENV, tenant);
      const runDir = dirname(await files.write("a", "1"));
      execFileSync("setpriv", [
        `--reuid=${tenant.runAs.uid}`,
        `--regid=${tenant.runAs.gid}`,
        "--clear-groups",
        "sh",
        "-ec",
        `rm -r ${runDir}; ln -s ${rootDir} ${runDir}`,
      ]);
      await expect(files.write("b", "2")).rejects.toThrow(AgentFileError);
      await files.remove();
      expect(await readdir(rootDir)).toEqual(["kept"]);
      expect(await stat(rootDir)).toMatchObject({ uid: 0, mode: 0o40700 });
      expect(await readdir(tenantTmp)).toEqual([]);
      await rm(rootDir, { recursive: true });
    });
  });
});
