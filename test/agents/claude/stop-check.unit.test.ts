import { describe, expect, it } from "vitest";
import { initializeRequestLine } from "../../../src/agents/claude/hooks.js";
import { blockReason, porcelainEntries } from "../../../src/agents/claude/stop-check.js";

describe("the clean-stop check's parts", () => {
  it("reads git status --porcelain -z: a rename's source path is no entry of its own, names keep spaces", () => {
    const out = "R  new name.txt\0old.txt\0?? a b.txt\0 M src/x.ts\0";
    expect(porcelainEntries(out)).toEqual([
      { status: "R ", path: "new name.txt" },
      { status: "??", path: "a b.txt" },
      { status: " M", path: "src/x.ts" },
    ]);
    expect(porcelainEntries("")).toEqual([]);
  });

  it("tells the agent the files, how many more there are, and what to do", () => {
    const reason = blockReason([{ status: "??", path: "a.txt" }], 3);
    expect(reason.split("\n")).toEqual([
      "The work dir has uncommitted changes (git status --porcelain):",
      "?? a.txt",
      "… and 3 more",
      "Commit them, or say why they are left uncommitted, before you finish.",
    ]);
  });

  it("registers the Stop hook beside the tool rules' PreToolUse hook, and neither when unasked", () => {
    const hooks = (line: string) => JSON.parse(line).request.hooks;
    expect(hooks(initializeRequestLine(undefined, "clean_work_dir"))).toEqual({
      Stop: [{ hookCallbackIds: ["clean_work_dir"] }],
    });
    expect(hooks(initializeRequestLine(undefined))).toEqual({});
  });
});
