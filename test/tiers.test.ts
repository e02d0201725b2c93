import { readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createFilter } from "vite";
import { describe, expect, it } from "vitest";
import config, { integrationFiles, unitFiles } from "../vitest.config.js";

// The suite's tiers are vitest projects that pick their files by glob (vitest.config.ts): a file
// that no project picks would never run, one that two pick would run twice, and a name left
// behind by a rename would send the renamed file to another tier unseen.

const root = fileURLToPath(new URL("..", import.meta.url));
const testFiles = readdirSync(path.join(root, "test"), { recursive: true, encoding: "utf8" })
  .filter((file) => file.endsWith(".test.ts"))
  .map((file) => path.join(root, "test", file));

interface Project {
  test: { name: string; include: string[]; exclude?: string[] };
}
const projects = (config.test?.projects ?? []) as Project[];

/** Whether `include` and `exclude` pick a file, matched as vitest matches them (picomatch). */
const picker = (include: string | string[], exclude?: string[]) =>
  createFilter(include, exclude, { resolve: root });

/** Each file a glob names with `{a,b}`, one pattern per alternative. */
function alternatives(glob: string): string[] {
  const braces = /\{([^}]*)\}/.exec(glob);
  if (!braces) return [glob];
  return (braces[1] ?? "").split(",").flatMap((one) => alternatives(glob.replace(braces[0], one)));
}

describe("the test tiers", () => {
  it("are unit, integration and system", () => {
    expect(projects.map(({ test }) => test.name)).toEqual(["unit", "integration", "system"]);
  });

  it("put each test file in exactly one tier", () => {
    const tiers = projects.map(({ test }) => ({
      name: test.name,
      picks: picker(test.include, test.exclude),
    }));
    expect(testFiles.length).toBeGreaterThan(100);
    const misplaced = testFiles
      .map((file) => ({
        file: path.relative(root, file),
        tiers: tiers.filter(({ picks }) => picks(file)).map(({ name }) => name),
      }))
      .filter(({ tiers }) => tiers.length !== 1);
    expect(misplaced).toEqual([]);
  });

  it("name no file that is not there", () => {
    const stale = [...unitFiles, ...integrationFiles].flatMap(alternatives).filter((glob) => {
      const names = picker(glob);
      return !testFiles.some((file) => names(file));
    });
    expect(stale).toEqual([]);
  });
});
