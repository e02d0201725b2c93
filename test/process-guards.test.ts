import type { LookupAddress } from "node:dns";
import { connect, type LookupFunction } from "node:net";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { errorText } from "../src/log.js";
import { runCommand } from "./support/process.js";
import { freePort } from "./support/server.js";

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

describe("an error in the log", () => {
  // Drizzle's "Failed query: …" names the statement; only its cause says why it failed.
  it("carries each of its causes, with the driver's code", () => {
    const driver = Object.assign(new Error("terminating connection due to administrator command"), {
      name: "PostgresError",
      code: "57P01",
    });
    const query = new Error("Failed query: select 1\nparams: ", { cause: driver });
    expect(errorText(query)).toBe(
      "Failed query: select 1\nparams: : PostgresError: terminating connection due to administrator command [57P01]",
    );
    expect(errorText("a string")).toBe("a string");
  });

  it("carries each address's error of a connection that failed on every address", async () => {
    const port = await freePort();
    // A name with two addresses, nothing listening on the port at either.
    const lookup: LookupFunction = (_host, _options, callback) =>
      (callback as (err: null, addresses: LookupAddress[]) => void)(null, [
        { address: "127.0.0.1", family: 4 },
        { address: "127.0.0.2", family: 4 },
      ]);
    const refused = await new Promise<unknown>((resolve) => {
      connect({ host: "db.internal", port, autoSelectFamily: true, lookup }).once("error", resolve);
    });
    expect(errorText(refused)).toBe(
      `AggregateError [ECONNREFUSED] (connect ECONNREFUSED 127.0.0.1:${port}; connect ECONNREFUSED 127.0.0.2:${port})`,
    );
  });

  it("ends for an error that holds itself among its errors and as its cause", () => {
    const loop = new AggregateError([], "again");
    loop.errors.push(loop, loop, loop, loop, loop);
    Object.assign(loop, { cause: loop });
    // Eight causes; at each, the first four errors, each with eight causes of its own.
    const inner = Array(8).fill("AggregateError: again").join(": ");
    const outer = `AggregateError: again (${Array(4).fill(inner).join("; ")})`;
    expect(errorText(loop)).toBe(Array(8).fill(outer).join(": "));
  });
});
