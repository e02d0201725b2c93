import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toolThenReply } from "../client/live.js";
import type { FakeScenario } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { runCommand } from "../support/process.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { type UserServer, userServer } from "../support/user-server.js";

// The curl walk-throughs (the README's short one, docs/api.md's whole one), run as a user runs
// them: top to bottom against a server started as `npm start` starts it, with the key it printed,
// each command in bash with the variables set so far. Its comment lines right after a command
// are that command's output, compared loosely: `…` is anything, `6f1c…` is some id (the same one
// wherever the page abbreviates it alike), numbers and timestamps in JSON are any. A line
// `S=6f1c…` takes the id the output showed.

/** The message whose run is still working when the walk-through looks at it, then cancels it. */
const WORKING = "Write a summary to SUMMARY.md";

/** What the fake CLI answers to each message the walk-through sends (by its text). */
const ANSWERS: Record<string, FakeScenario> = {
  "List the files here and say which is largest.": toolThenReply(["The largest is ", "README.md."]),
  "And the smallest?": streamedReply(["The smallest is package.json."]),
  // Works until it is cancelled.
  [WORKING]: {
    steps: [{ mark: "working" }],
    end: "hang",
  },
  "Write a short summary to SUMMARY.md": streamedReply(["Wrote SUMMARY.md."]),
  "Run the tests": streamedReply(["All tests pass."]),
};

interface Step {
  command: string;
  /** The comment lines right after it, without their `# `. */
  output: string[];
}

function walkthrough(block: string): Step[] {
  const steps: Step[] = [];
  let afterCommand = false;
  for (const line of block.replaceAll("\\\n", "").split("\n")) {
    if (line.trim() === "") afterCommand = false;
    else if (!line.startsWith("#")) {
      steps.push({ command: line, output: [] });
      afterCommand = true;
    } else if (afterCommand) steps.at(-1)?.output.push(line.replace(/^# ?/, ""));
  }
  return steps;
}

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
/** An abbreviated id, anything, a number in JSON, a timestamp. */
const LOOSE = /([0-9a-f]{4}…|…|(?<=":)-?\d+(?:\.\d+)?(?=[,}\]])|\d{4}-\d\d-\d\dT[\d:.]+Z)/;

/**
 * The README's output as a pattern over the real output. `ids` maps each abbreviated id to the
 * real one it stood for in an earlier output; a new one is captured under its abbreviation.
 */
function outputPattern(
  lines: string[],
  ids: Map<string, string>,
): { pattern: RegExp; captured: Map<string, string> } {
  // A line indented past `# ` continues the JSON of the line before.
  const text = lines.map((line, i) => (i > 0 && /^\s/.test(line) ? line.trim() : `\n${line}`));
  const groups = new Map<string, string>();
  const source = text
    .join("")
    .slice(1)
    .split(LOOSE)
    .map((part, i) => {
      if (i % 2 === 0) return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      if (part === "…") return "[\\s\\S]*?";
      if (part.endsWith("Z")) return "\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z";
      if (!part.endsWith("…")) return "-?\\d+(?:\\.\\d+)?";
      const known = ids.get(part);
      if (known) return known;
      const group = groups.get(part);
      if (group) return `\\k<${group}>`;
      const name = `id${groups.size}`;
      groups.set(part, name);
      return `(?<${name}>${UUID})`;
    })
    .join("");
  return { pattern: new RegExp(`^${source}\\s*$`), captured: groups };
}

/** Numbered without gaps; from the start, it opens with run_started; one completion, last. */
function expectWholeStream(stream: string): void {
  const events = [...stream.matchAll(/^id: (\d+)\nevent: (\w+)\n/gm)].map(([, id, type]) => ({
    id: Number(id),
    type,
  }));
  const first = events[0]?.id ?? 0;
  expect(events.map((e) => e.id)).toEqual(events.map((_, i) => first + i));
  if (first === 1) expect(events[0]?.type).toBe("run_started");
  expect(events.filter((e) => e.type === "completion")).toHaveLength(1);
  expect(events.at(-1)?.type).toBe("completion");
}

describe("the README's curl walk-through", () => {
  let server: UserServer;
  let home: string;

  beforeAll(async () => {
    // Each message sets the fake's answer before it is sent: this first one never plays.
    server = await userServer({ steps: [] }, {}, "npm-start");
    // Every curl gives up after 20 s: a hang fails the test, not the suite's timeout.
    home = await mkdtemp(join(tmpdir(), "agent-bridge-curl-"));
    await writeFile(join(home, ".curlrc"), "max-time = 20\n");
  });
  afterAll(async () => {
    await server?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it("the problem the README shows is the server's answer to the request it names", async () => {
    const section = await docSection("docs/api.md", "Using the API");
    const body = /`POST \/v1\/sessions`\s+with `(\{[^`]*\})`/.exec(section)?.[1];
    const [block] = codeBlocks(section, "json");
    if (!body || !block)
      throw new Error("docs/api.md shows no request and problem under Using the API");
    const res = await fetch(`${server.url}/v1/sessions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${server.key}`, "Content-Type": "application/json" },
      body,
    });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/problem+json");
    const problem = await res.json();
    const shown = JSON.parse(block);
    expect(shown.request_id).toBe("…");
    expect(problem).toEqual({ ...shown, request_id: res.headers.get("x-request-id") });
  });

  // The README's short one, then the whole one in docs/api.md.
  it.each([
    ["README.md", "Try it with curl"],
    ["docs/api.md", "Using the API"],
  ])("%s: runs top to bottom and prints what it shows", async (page, title) => {
    const [block] = codeBlocks(await docSection(page, title), "sh");
    if (!block) throw new Error(`${page} has no sh block under ${title}`);
    const ids = new Map<string, string>();
    const assignments: string[] = [];
    for (const { command, output } of walkthrough(block)) {
      const assignment = /^([A-Z])=(\S*)/.exec(command);
      if (assignment) {
        const [, name, value = ""] = assignment;
        if (name === "B") assignments.push(`B=${server.url}`);
        else if (name === "K") assignments.push(`K=${server.key}`);
        else if (ids.has(value)) assignments.push(`${name}=${ids.get(value)}`);
        else assignments.push(command);
        continue;
      }
      const text = /"text":"([^"]*)"/.exec(command)?.[1];
      const answer = text === undefined ? undefined : ANSWERS[text];
      if (answer) await server.fake.setScenario(answer);
      const res = await runCommand("bash", ["-c", [...assignments, command].join("\n")], {
        // HOME: curl reads its .curlrc, bash no .bashrc.
        env: { PATH: process.env.PATH, HOME: home },
      });
      // As a user looks a moment later: the CLI has started.
      if (text === WORKING) await server.fake.waitForMark("working");
      expect(res, command).toMatchObject({ code: 0, stderr: "" });
      const { pattern, captured } = outputPattern(output, ids);
      const match = pattern.exec(res.stdout.replaceAll("\r\n", "\n"));
      if (!match)
        expect.fail(
          `${command}\nprinted\n${res.stdout}\nnot as the page shows:\n${output.join("\n")}`,
        );
      for (const [abbreviation, group] of captured)
        ids.set(abbreviation, match.groups?.[group] ?? "");
      if (command.startsWith("curl -sN ")) expectWholeStream(res.stdout);
    }
  });
});
