import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentFiles } from "../../src/process/agent-files.js";

// What a file process lists where an agent can write: the CLIs' transcripts are looked for this
// way at every run's end (src/runs/transcripts.ts), by find alone, as the agent.

describe("a listing of an agent's directory", () => {
  const files = agentFiles({ PATH: process.env.PATH ?? "/usr/bin:/bin" });
  let dir: string;
  /** Outside the listed directory: what a link planted in it points at. */
  let elsewhere: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agent-files-"));
    elsewhere = await mkdtemp(join(tmpdir(), "agent-files-elsewhere-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await rm(elsewhere, { recursive: true, force: true });
  });

  it("lists what is named so at its depth, links and FIFOs by their names, never a directory", async () => {
    const root = join(dir, "projects");
    await mkdir(join(root, "-work", "s.jsonl"), { recursive: true });
    await mkdir(join(root, "other"), { recursive: true });
    await writeFile(join(root, "other", "s.jsonl"), "{}\n");
    await writeFile(join(elsewhere, "target"), "{}\n");
    await mkdir(join(root, "linked"));
    await symlink(join(elsewhere, "target"), join(root, "linked", "s.jsonl"));
    await mkdir(join(root, "fifo"));
    execFileSync("mkfifo", [join(root, "fifo", "s.jsonl")]);
    // Too shallow and too deep.
    await writeFile(join(root, "s.jsonl"), "{}\n");
    await mkdir(join(root, "deep", "er"), { recursive: true });
    await writeFile(join(root, "deep", "er", "s.jsonl"), "{}\n");

    expect((await files.find(root, 2, "s.jsonl")).sort()).toEqual([
      join("fifo", "s.jsonl"),
      join("linked", "s.jsonl"),
      join("other", "s.jsonl"),
    ]);
  });

  it("goes through no link below the directory, to a directory elsewhere holding the name", async () => {
    const root = join(dir, "through-links");
    await mkdir(root);
    await mkdir(join(elsewhere, "project"));
    await writeFile(join(elsewhere, "project", "t.jsonl"), "{}\n");
    await symlink(join(elsewhere, "project"), join(root, "planted"));
    expect(await files.find(root, 2, "t.jsonl")).toEqual([]);
  });

  it("lists nothing where the directory is not made yet, or is a file", async () => {
    expect(await files.find(join(dir, "missing", "projects"), 2, "s.jsonl")).toEqual([]);
    await writeFile(join(dir, "a-file"), "");
    expect(await files.find(join(dir, "a-file"), 2, "s.jsonl")).toEqual([]);
  });

  it("gives back a name with a newline in it as it is", async () => {
    const root = join(dir, "newlines");
    await mkdir(join(root, "line\nbreak"), { recursive: true });
    await writeFile(join(root, "line\nbreak", "u.jsonl"), "{}\n");
    expect(await files.find(root, 2, "u.jsonl")).toEqual([join("line\nbreak", "u.jsonl")]);
  });
});
