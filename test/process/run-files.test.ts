import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BridgeEvent, bareCompletion } from "../../src/events.js";
import { runFiles, withRunFiles } from "../../src/process/run-files.js";
import type { AgentIdentity } from "../../src/process/tenant-homes.js";

// The files a run hands its CLI by path: private to the CLI's user (or, run as the agent user,
// to its tenant's group), and gone once the run is over, however it ends.

describe("run files", () => {
  let tenantTmp: string;
  beforeAll(async () => {
    tenantTmp = await mkdtemp(join(tmpdir(), "tenant-tmp-"));
  });
  afterAll(() => rm(tenantTmp, { recursive: true, force: true }));

  const tenant = (): AgentIdentity => ({
    runAs: { uid: 1, gid: 1 },
    env: { HOME: tenantTmp, TMPDIR: tenantTmp },
  });
  const mode = async (path: string) => (await stat(path)).mode & 0o777;

  it("writes into a directory of the run's that only the server's user can read", async () => {
    const files = runFiles();
    const file = await files.write("mcp.json", "{}");
    expect(await readFile(file, "utf8")).toBe("{}");
    expect(await mode(file)).toBe(0o600);
    expect(await mode(dirname(file))).toBe(0o700);
    await files.remove();
    expect(existsSync(dirname(file))).toBe(false);
  });

  it("under the tenant's TMPDIR, readable through its group, for an agent run as another user", async () => {
    const files = runFiles(tenant());
    const file = await files.write("image-1.png", Buffer.from([0x89, 0x50]));
    expect(dirname(dirname(file))).toBe(tenantTmp);
    expect(await mode(dirname(file))).toBe(0o750);
    expect(await mode(file)).toBe(0o640);
    await files.remove();
    expect(await readdir(tenantTmp)).toEqual([]);
  });

  it("makes nothing for a run without files", async () => {
    await runFiles(tenant()).remove();
    expect(await readdir(tenantTmp)).toEqual([]);
  });

  const text = (t: string): BridgeEvent[] => [{ type: "text_delta", text: t }];
  const completed: BridgeEvent[] = [bareCompletion("failed", "the CLI exited")];

  it("removes them before the completion goes out, so its reader finds them gone", async () => {
    const written: string[] = [];
    const run = withRunFiles(tenant(), async function* (files) {
      written.push(await files.write("mcp.json", "{}"));
      yield text("working");
      yield completed;
    });
    expect((await run.next()).value).toEqual(text("working"));
    expect(existsSync(written[0] ?? "")).toBe(true);
    expect((await run.next()).value).toEqual(completed);
    expect(await readdir(tenantTmp)).toEqual([]);
  });

  it("removes them when the run ends early or fails", async () => {
    const written: string[] = [];
    const run = withRunFiles(tenant(), async function* (files) {
      written.push(await files.write("a", "1"));
      yield text("1");
      yield text("2");
    });
    expect((await run.next()).value).toEqual(text("1"));
    expect(existsSync(written[0] ?? "")).toBe(true);
    // A consumer that stops early (a cancel) returns the generator.
    await run.return(undefined);
    expect(await readdir(tenantTmp)).toEqual([]);

    const failing = withRunFiles(tenant(), async function* (files) {
      await files.write("b", "2");
      yield text("1");
      throw new Error("the CLI could not start");
    });
    await expect(async () => {
      for await (const _ of failing);
    }).rejects.toThrow("the CLI could not start");
    expect(await readdir(tenantTmp)).toEqual([]);
  });
});
