import { z } from "@hono/zod-openapi";
import type { WorktreeDiff } from "../../../worktrees/diff.js";

export const DiffFile = z
  .object({
    path: z.string().openapi({ description: "Relative to the worktree." }),
    old_path: z
      .string()
      .optional()
      .openapi({ description: "A renamed file's path at the base commit." }),
    status: z.enum(["added", "modified", "deleted", "renamed"]),
    additions: z.number().int().nullable().openapi({
      description: "Lines added; null when not counted (the diff was cut before the file).",
    }),
    deletions: z.number().int().nullable(),
    binary: z.boolean(),
  })
  .openapi("DiffFile");

export const SessionDiff = z
  .object({
    base_commit: z.string().openapi({ description: "The commit the worktree was made from." }),
    files: z.array(DiffFile).openapi({
      description:
        "Every file changed since the base commit: committed, uncommitted, and untracked (not ignored) ones.",
    }),
    diff: z.string().openapi({
      description:
        "The unified diff (git's), tracked files first, then the untracked ones; a link shows as a link (mode 120000, its target as its text).",
    }),
    truncated: z.boolean().openapi({
      description:
        "The diff was cut at its bound (1 MiB), or not every untracked file was diffed; `files` still lists them all.",
    }),
  })
  .openapi("SessionDiff");
export type SessionDiff = z.infer<typeof SessionDiff>;

export function toSessionDiff(base: string, found: WorktreeDiff): SessionDiff {
  return {
    base_commit: base,
    files: found.files.map((f) => ({
      path: f.path,
      ...(f.oldPath !== undefined ? { old_path: f.oldPath } : {}),
      status: f.status,
      additions: f.additions,
      deletions: f.deletions,
      binary: f.binary,
    })),
    diff: found.diff,
    truncated: found.truncated,
  };
}
