import { describe, expect, it } from "vitest";
import { buildClaudeArgs } from "../../src/agents/claude/command.js";
import { sandboxMounts } from "../../src/process/sandbox-mounts.js";
import { ToolRule } from "../../src/session-settings.js";

// A session's disallowed tools and extra directories on the CLI's command line, and in the mount
// plan of its sandbox.

const base = { claudeSessionId: "s-1", resume: false, permissionMode: "default" } as const;

describe("disallowed tools and extra directories", () => {
  it("go to the CLI one per flag, as --flag=value, so that no value is read as a flag", () => {
    const args = buildClaudeArgs({
      ...base,
      disallowedTools: ["Write", "Bash(curl *)"],
      addDirs: ["/srv/roots/lib", "/srv/roots/-odd"],
    });
    expect(args).toContain("--disallowedTools=Write");
    expect(args).toContain("--disallowedTools=Bash(curl *)");
    expect(args).toContain("--add-dir=/srv/roots/lib");
    expect(args).toContain("--add-dir=/srv/roots/-odd");
    expect(() => buildClaudeArgs({ ...base, addDirs: ["-x"] })).toThrow(/add_dir/);
  });

  it("a tool rule is a tool's name with an optional rule in parentheses, no separators or flags", () => {
    for (const ok of ["Write", "Bash(npm test:*)", "mcp__github__get_issue", "Read(./src/**)"]) {
      expect(ToolRule.safeParse(ok).success, ok).toBe(true);
    }
    for (const bad of ["--add-dir=/", "Bash,Write", "Bash Write", "Bash(\n)", "", "(x)"]) {
      expect(ToolRule.safeParse(bad).success, bad).toBe(false);
    }
  });

  it("an extra directory is bound writable over a hidden root, but never re-opens what the server hides", () => {
    const mounts = sandboxMounts({
      cwd: "/roots/a/work",
      workDirWritable: true,
      writable: ["/home/agent"],
      extra: ["/roots/b/shared", "/data", "/data/homes/other", "/roots/b/holds-data"],
      readOnly: [],
      hiddenDirs: ["/data", "/roots/b/holds-data/secret"],
      hiddenFiles: [],
      roots: ["/roots/a", "/roots/b"],
      tmpBytes: 1024,
    });
    const at = (path: string) => mounts.filter((m) => m.path === path);
    expect(at("/roots/b/shared")).toEqual([
      { kind: "bind", path: "/roots/b/shared", writable: true },
    ]);
    // The root around it stays hidden, and the bind comes after its tmpfs.
    expect(at("/roots/b")).toEqual([{ kind: "hide", path: "/roots/b" }]);
    const order = mounts.map((m) => m.path);
    expect(order.indexOf("/roots/b")).toBeLessThan(order.indexOf("/roots/b/shared"));
    // The server's data dir, or a place in it, is never bound.
    expect(at("/data")).toEqual([{ kind: "hide", path: "/data" }]);
    expect(at("/data/homes/other")).toEqual([]);
    // A hidden dir inside an extra one stays hidden, on top of it.
    expect(at("/roots/b/holds-data/secret")).toEqual([
      { kind: "hide", path: "/roots/b/holds-data/secret" },
    ]);
    expect(order.indexOf("/roots/b/holds-data")).toBeLessThan(
      order.indexOf("/roots/b/holds-data/secret"),
    );
  });

  it("an extra directory is read-only when the work dir is", () => {
    const mounts = sandboxMounts({
      cwd: "/roots/a",
      workDirWritable: false,
      writable: [],
      extra: ["/roots/b"],
      readOnly: [],
      hiddenDirs: [],
      hiddenFiles: [],
      roots: ["/roots/a", "/roots/b"],
      tmpBytes: 1024,
    });
    expect(mounts).toContainEqual({ kind: "bind", path: "/roots/b", writable: false });
  });
});
