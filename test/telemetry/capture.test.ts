import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../support/app.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { SseReader } from "../support/sse.js";

// AGENT_BRIDGE_DEBUG_CAPTURE: a run's raw CLI lines and its events, as two JSONL files.

describe("the debug capture (AGENT_BRIDGE_DEBUG_CAPTURE)", () => {
  let fake: FakeCli;
  let dir: string;
  let t: TestApp;

  beforeAll(async () => {
    const scenario = streamedReply(["Captured ", "for ", "debugging."]);
    // A line that is not JSON is captured too, as the CLI wrote it.
    scenario.steps.splice(1, 0, { text: "not json at all\n" });
    fake = await fakeCli(scenario);
    dir = join(await mkdtemp(join(tmpdir(), "capture-")), "runs");
    t = await createTestApp("pglite", { ...fake.bridgeEnv, AGENT_BRIDGE_DEBUG_CAPTURE: dir });
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
    await rm(join(dir, ".."), { recursive: true, force: true });
  });

  it("writes the CLI's stdout lines and the run's events of each run, for the server's user alone", async () => {
    const post = (path: string, body: unknown) =>
      t.app.request(path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    const session = (await (await post("/v1/sessions", {})).json()) as { id: string };
    const frames = await SseReader.of(
      await post(`/v1/sessions/${session.id}/messages`, { text: "hi" }),
    ).events();
    const runId = (frames[0]?.data as { run_id?: string } | undefined)?.run_id;
    expect(frames.at(-1)?.data).toMatchObject({
      status: "succeeded",
      result: "Captured for debugging.",
    });
    await t.deps.capture?.flushed();

    expect((await readdir(dir)).sort()).toEqual([`${runId}.events.jsonl`, `${runId}.raw.jsonl`]);
    const raw = await readFile(join(dir, `${runId}.raw.jsonl`), "utf8");
    const written = (await fakeScenarioLines()).join("");
    expect(raw).toBe(written);

    // Every event of the log (`?events=full`), in its order, the completion last.
    const full = await SseReader.of(
      await t.app.request(`/v1/runs/${runId}/events?events=full`),
    ).events();
    const events = (await readFile(join(dir, `${runId}.events.jsonl`), "utf8"))
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(events).toEqual(full.map((f) => f.data));
    expect(events.map((e) => e.type)).toContain("text_delta");
    expect(events.at(-1)).toMatchObject({ type: "completion", status: "succeeded" });

    for (const name of await readdir(dir)) {
      expect((await stat(join(dir, name))).mode & 0o777).toBe(0o600);
    }
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
  });

  /** What the fake CLI wrote on stdout, line by line with its newline. */
  async function fakeScenarioLines(): Promise<string[]> {
    const scenario = JSON.parse(await readFile(fake.env.FAKE_CLI_SCENARIO as string, "utf8")) as {
      steps: ({ emit: unknown } | { text: string } | Record<string, unknown>)[];
    };
    return scenario.steps.flatMap((step) =>
      "emit" in step
        ? [`${JSON.stringify(step.emit)}\n`]
        : "text" in step
          ? [String(step.text)]
          : [],
    );
  }
});
