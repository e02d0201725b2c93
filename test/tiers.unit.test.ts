import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createFilter } from "vite";
import { describe, expect, it } from "vitest";
import config from "../vitest.config.js";

// The suite's tiers are vitest projects that pick their files by name (vitest.config.ts): a file
// that no project picks would never run, one that two pick would run twice, and a unit test that
// opens the test databases would fail run alone, without the set-up that makes them.

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

  it("keep the unit tier's files off the test databases and the app, whose set-up it has not", () => {
    const unit = picker(projects[0]?.test.include ?? []);
    const offending = testFiles
      .filter((file) => unit(file))
      .filter((file) =>
        /from "\.\.?\/(\.\.\/)*support\/(db|app)\.js"/.test(readFileSync(file, "utf8")),
      )
      .map((file) => path.relative(root, file));
    expect(offending).toEqual([]);
  });
});
