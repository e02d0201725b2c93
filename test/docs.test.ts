import { existsSync, readFileSync, statSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

// The documentation keeps its promises: each fenced block in it is run by a test that reads the
// section holding it (`<!-- run: test/… -->` on the line before the fence; the test names the page
// and the section together, `docSection("docs/api.md", "Using the API")`), or says why it is not
// (`<!-- not run: reason -->`); each relative link reaches a file, and the heading it names.

const ROOT = resolve(import.meta.dirname, "..");

async function pages(): Promise<string[]> {
  const inDir = async (dir: string) =>
    (await readdir(join(ROOT, dir))).filter((f) => f.endsWith(".md")).map((f) => `${dir}/${f}`);
  return ["README.md", ...(await inDir("docs")), ...(await inDir("bench/results"))];
}

interface Fence {
  line: number;
  /** The line before the fence, trimmed. */
  marker: string;
  /** The titles of the headings the fence is under, the page's own first. */
  headings: string[];
}

interface Page {
  fences: Fence[];
  /** `[text](target)` outside fences and code spans, with their line. */
  links: { line: number; target: string }[];
  /** Each heading's anchor, as GitHub makes them. */
  anchors: Set<string>;
}

/** A heading's anchor as GitHub makes it: its text, lower case, punctuation gone, `-` for spaces. */
function anchor(title: string): string {
  return title
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

function parse(text: string): Page {
  const page: Page = { fences: [], links: [], anchors: new Set() };
  const lines = text.split("\n");
  const stack: { level: number; title: string }[] = [];
  const seen = new Map<string, number>();
  let fenced = false;
  for (const [i, line] of lines.entries()) {
    if (line.trimStart().startsWith("```")) {
      if (!fenced) {
        const marker = (lines[i - 1] ?? "").trim();
        page.fences.push({ line: i + 1, marker, headings: stack.map((h) => h.title) });
      }
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    const heading = /^(#{1,6}) (.*)$/.exec(line);
    if (heading) {
      const level = heading[1]?.length ?? 0;
      const title = heading[2] ?? "";
      while ((stack.at(-1)?.level ?? 0) >= level) stack.pop();
      stack.push({ level, title });
      const base = anchor(title);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      page.anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const link of line.replace(/`[^`]*`/g, "").matchAll(/\]\(([^)\s]+)\)/g))
      page.links.push({ line: i + 1, target: link[1] ?? "" });
  }
  return page;
}

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** How the checks see the repository: a file's text, or undefined when there is none. */
type Files = (path: string) => string | undefined;

function fenceProblems(path: string, files: Files): string[] {
  const problems: string[] = [];
  for (const fence of parse(files(path) ?? "").fences) {
    const where = `${path}:${fence.line}`;
    const marker = /^<!-- (run|not run): (.*\S) -->$/.exec(fence.marker);
    if (!marker) {
      problems.push(`${where}: no <!-- run: test/… --> or <!-- not run: reason --> before it`);
      continue;
    }
    if (marker[1] === "not run") continue;
    const test = marker[2]?.split(/[\s,]/)[0] ?? "";
    const source = files(test);
    if (source === undefined) problems.push(`${where}: ${test} does not exist`);
    else if (
      !fence.headings.some((title) =>
        new RegExp(`"${literal(path)}",\\s*"${literal(title)}"`).test(source),
      )
    )
      problems.push(`${where}: ${test} reads none of its sections (${fence.headings.join(" > ")})`);
  }
  return problems;
}

function linkProblems(path: string, files: Files): string[] {
  const problems: string[] = [];
  for (const { line, target } of parse(files(path) ?? "").links) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    const [file = "", heading] = target.split("#");
    const to = file === "" ? path : relative(ROOT, resolve(ROOT, dirname(path), file));
    const text = to.startsWith("..") ? undefined : files(to);
    if (text === undefined) problems.push(`${path}:${line}: ${target}: no file ${to}`);
    else if (heading !== undefined && !(to.endsWith(".md") && parse(text).anchors.has(heading)))
      problems.push(`${path}:${line}: ${target}: no heading #${heading} in ${to}`);
  }
  return problems;
}

/** The repository as it is on disk (a directory counts as a file: a link may name one). */
const onDisk: Files = (path) => {
  const full = join(ROOT, path);
  if (!existsSync(full)) return undefined;
  return statSync(full).isDirectory() ? "" : readFileSync(full, "utf8");
};

describe("the documentation", () => {
  it("runs each fenced block in a test that reads its section, or says why not", async () => {
    const problems = (await pages()).flatMap((path) => fenceProblems(path, onDisk));
    expect(problems).toEqual([]);
  });

  it("links only to files that exist, and to headings they have", async () => {
    const problems = (await pages()).flatMap((path) => linkProblems(path, onDisk));
    expect(problems).toEqual([]);
  });

  it("the checks find a block without a marker, a test that reads another section, and broken links", () => {
    const files: Record<string, string> = {
      "docs/page.md": [
        "# Page",
        "## A section",
        "```sh",
        "echo unmarked",
        "```",
        "## Another",
        "<!-- run: test/x.test.ts -->",
        "```sh",
        "echo run",
        "```",
        "<!-- not run: sample output -->",
        "```text",
        "[inside a fence](nowhere.md)",
        "```",
        "See [`it`](other.md#a-heading), [this](#a-section), [gone](#gone) and [none](none.md).",
      ].join("\n"),
      "docs/other.md": "# Other\n## A heading\n",
      "test/x.test.ts": 'docSection("docs/page.md", "A section")',
    };
    const fake: Files = (path) => files[path];
    expect(fenceProblems("docs/page.md", fake)).toEqual([
      "docs/page.md:3: no <!-- run: test/… --> or <!-- not run: reason --> before it",
      "docs/page.md:8: test/x.test.ts reads none of its sections (Page > Another)",
    ]);
    expect(linkProblems("docs/page.md", fake)).toEqual([
      "docs/page.md:15: #gone: no heading #gone in docs/page.md",
      "docs/page.md:15: none.md: no file docs/none.md",
    ]);
    expect(anchor("The test suite's time")).toBe("the-test-suites-time");
    expect(anchor("Instances, leases, and runs `followed`")).toBe(
      "instances-leases-and-runs-followed",
    );
  });
});
