import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { printRuns } from "../../src/cli/print.js";
import type { Run } from "../../src/client/index.js";

// `agent-bridge runs ls`: a hook's replies get a column of their own, only when a run has some.

function printed(runs: Run[]): string[] {
  const stdout = new PassThrough();
  printRuns({ stdout, stderr: new PassThrough() }, runs);
  return String(stdout.read() ?? "")
    .trimEnd()
    .split("\n");
}

const run = (id: string, replies: Run["replies"]) =>
  ({
    id,
    session_id: "s",
    status: "succeeded",
    trigger: "webhook",
    cost_usd: null,
    created_at: "2026-12-06T00:00:00.000Z",
    replies,
  }) as Run;

const reply = (kind: string, state: string) =>
  ({ kind, state }) as unknown as Run["replies"][number];

describe("the runs table", () => {
  it("has no REPLIES column when no run listed has replies", () => {
    expect(printed([run("a", [])])[0]).toMatch(
      /^ID\s+SESSION\s+STATUS\s+TRIGGER\s+COST\s+CREATED$/,
    );
  });

  it("shows each run's replies as kind:state, and - for a run without", () => {
    const lines = printed([
      run("a", [reply("comment", "posted"), reply("check", "failed")]),
      run("b", []),
    ]);
    expect(lines[0]).toMatch(/\s+REPLIES$/);
    expect(lines[1]).toMatch(/\s+comment:posted,check:failed$/);
    expect(lines[2]).toMatch(/\s+-$/);
  });
});
