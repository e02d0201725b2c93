import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runCommand } from "./support/process.js";

// A rejection nobody handled is logged with its stack, and the process goes on: one run's bug
// must not end every other run and stream. Tried in a child process, since Node's default for
// it is to end the process.

/** A process that leaves a rejection unhandled, then says whether it lived to its next turn. */
const script = (guarded: boolean) => `
  import { createLogger } from "./src/log.ts";
  import { installProcessGuards } from "./src/process-guards.ts";
  if (${guarded}) installProcessGuards(createLogger("info"));
  Promise.reject(new Error("lost in a run's bookkeeping"));
  // Runs after Node has dealt with the rejection, if the process is still there.
  setImmediate(() => process.stdout.write("still up\\n"));
`;

const run = (guarded: boolean) =>
  runCommand(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script(guarded)], {
    cwd: fileURLToPath(new URL("..", import.meta.url)),
    env: { PATH: process.env.PATH },
  });

describe("the process guards", () => {
  it("log an unhandled rejection with its message and stack, and the process goes on", async () => {
    const { code, stdout, stderr } = await run(true);
    expect(stdout).toBe("still up\n");
    expect(code).toBe(0);
    const lines = stderr.trimEnd().split("\n");
    expect(lines).toHaveLength(1);
    const entry = JSON.parse(lines[0] ?? "");
    expect(entry).toMatchObject({
      level: "error",
      msg: "unhandled rejection; the server goes on",
      error: "lost in a run's bookkeeping",
    });
    expect(entry.stack).toMatch(/^Error: lost in a run's bookkeeping\n\s+at /);
  });

  it("are what keeps the process up: without them Node ends it", async () => {
    const { code, stdout } = await run(false);
    expect(stdout).toBe("");
    expect(code).toBe(1);
  });
});
