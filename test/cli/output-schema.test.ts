import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/exit-codes.js";
import { createClient } from "../../src/client/index.js";
import { type LiveServer, liveServer } from "../client/live.js";
import { result } from "../support/stream-json-lines.js";
import { cli } from "./run-cli.js";

// `agent-bridge send --output-schema FILE` against a live server with the fake CLI: the answer the
// schema asked for is printed as JSON on stdout after the text, and `runs show` and
// `runs retry --output-schema` carry it.

const VERDICT = {
  type: "object",
  properties: { verdict: { type: "string" } },
  required: ["verdict"],
};

describe("the agent-bridge command with an output schema", () => {
  let server: LiveServer;
  let dir: string;
  let schemaFile: string;

  beforeAll(async () => {
    server = await liveServer("pglite", {
      steps: [
        { init: true },
        { reply: { parts: ["Reviewed."] } },
        {
          emit: result({
            result: '{"verdict":"approve"}',
            structured_output: { verdict: "approve" },
          }),
        },
      ],
    });
    dir = await mkdtemp(join(tmpdir(), "cli-schema-"));
    schemaFile = join(dir, "verdict.json");
    await writeFile(schemaFile, JSON.stringify(VERDICT));
  });
  afterAll(async () => {
    await server?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const on = (...args: string[]) => cli("--url", server.url, ...args);

  it("send --output-schema prints the text, then the structured output as JSON, on stdout; runs show carries schema and answer", async () => {
    const res = await on("send", "review it", "--output-schema", schemaFile);
    expect(res.code).toBe(EXIT.ok);
    expect(res.stdout).toBe(`Reviewed.\n${JSON.stringify({ verdict: "approve" }, null, 2)}\n`);
    const runId = /run ([0-9a-f-]{36})$/m.exec(res.stderr)?.[1] ?? "";
    const shown = await on("runs", "show", runId);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      output_schema: VERDICT,
      structured_output: { verdict: "approve" },
    });

    const score = { type: "object", properties: { score: { type: "integer" } } };
    const scoreFile = join(dir, "score.json");
    await writeFile(scoreFile, JSON.stringify(score));
    // The fake answers a verdict: a schema that allows it, in place of the run's own.
    const retried = await on("runs", "retry", runId, "--output-schema", scoreFile, "--json");
    expect(retried.code).toBe(EXIT.ok);
    expect(JSON.parse(retried.stdout)).toMatchObject({
      run: { output_schema: score, structured_output: { verdict: "approve" } },
    });
  });

  it("send --output-schema with a file that is not a JSON object is bad usage; nothing is sent", async () => {
    const notObject = join(dir, "list.json");
    await writeFile(notObject, "[1]");
    const client = createClient({ baseUrl: server.url });
    const runsBefore = (await client.listRuns({ limit: 100 })).data.length;
    for (const file of [notObject, join(dir, "missing.json")]) {
      const res = await on("send", "review it", "--output-schema", file);
      expect(res.code).toBe(EXIT.usage);
      expect(res.stderr).toMatch(/--output-schema/);
      expect(res.stdout).toBe("");
    }
    expect((await client.listRuns({ limit: 100 })).data).toHaveLength(runsBefore);
  });
});
