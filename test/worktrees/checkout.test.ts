import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { git } from "./repo.js";

// With the default work dir (this checkout) and worktree mode on, Claude Code makes each
// session's worktree under `.claude/worktrees/` of the checkout: that must not show as a change,
// nor be read by the project's own checks (a worktree holds a second biome.json, which made
// `npm run check` fail).

const root = fileURLToPath(new URL("../..", import.meta.url));

describe("a session worktree inside this checkout", () => {
  it("is ignored by git and by the project's lint", () => {
    const id = `probe-${randomUUID()}`;
    const path = join(root, ".claude", "worktrees", id);
    git(root, "worktree", "add", "--detach", path, "HEAD");
    try {
      expect(git(root, "status", "--porcelain", "--", ".claude")).toBe("");
      // What `npm run check` runs for lint; it exits non-zero on a nested configuration.
      execFileSync("npx", ["biome", "check", "."], { cwd: root, stdio: "pipe" });
    } finally {
      git(root, "worktree", "remove", "--force", path);
    }
  });
});
