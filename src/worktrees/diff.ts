import type { Git } from "./git.js";

// What a session's agent changed in its worktree, against the commit the worktree was made from:
// what it committed, what it left uncommitted and the files it made that git does not track yet
// (ignored files left out). Every read is git's, run as the session's agent would run it (git.ts:
// its tenant, its sandbox, no network); the server itself never opens a path in the worktree, so
// a link the agent planted there is shown as a link, never followed. A repository's config can
// change what git prints (an external diff, textconv, prefixes, colour): each command says what
// it wants instead.

export type DiffStatus = "added" | "modified" | "deleted" | "renamed";

export interface DiffFile {
  path: string;
  /** A renamed file's path at the base commit. */
  oldPath?: string;
  status: DiffStatus;
  /** Lines added and removed; null when not counted (the diff was cut before the file). */
  additions: number | null;
  deletions: number | null;
  binary: boolean;
}

export interface WorktreeDiff {
  files: DiffFile[];
  /** The unified diff, tracked files first, then the untracked ones; cut at the bound. */
  diff: string;
  /** The diff (or the list of files) was cut at its bound. */
  truncated: boolean;
}

export interface DiffBounds {
  /** The most bytes of diff text. */
  maxBytes: number;
  /** The most untracked files whose content is diffed (one git command each). */
  maxUntracked: number;
  /**
   * How long the untracked files' diffs may take in all: each git command has its own time
   * limit, and a repository's filters (its .gitattributes and config) run inside them.
   */
  untrackedMs: number;
}

export const DIFF_BOUNDS: DiffBounds = {
  maxBytes: 1024 * 1024,
  maxUntracked: 200,
  untrackedMs: 20_000,
};

/** The most bytes of git's file lists read. */
const MAX_LIST_BYTES = 8 * 1024 * 1024;

/** Options that keep a repository's own config from changing what git prints or runs. */
const PLAIN = [
  "-c",
  "core.fsmonitor=false",
  "-c",
  "core.quotePath=false",
  "-c",
  "diff.noprefix=false",
  "-c",
  "diff.mnemonicPrefix=false",
  "-c",
  "color.ui=false",
];
const DIFF_FLAGS = ["--no-color", "--no-ext-diff", "--no-textconv", "--no-relative"];

const STATUS: Record<string, DiffStatus> = {
  A: "added",
  M: "modified",
  T: "modified",
  D: "deleted",
  R: "renamed",
};

/** The diff of the worktree at `worktreePath` against `base`. */
export async function worktreeDiff(
  git: Git,
  worktreePath: string,
  base: string,
  bounds: DiffBounds = DIFF_BOUNDS,
): Promise<WorktreeDiff> {
  // `--end-of-options`: the base, from the database, is a commit, never an option.
  const against = ["-M", "--end-of-options", base, "--"];
  const list = await git.read(
    [...PLAIN, "diff", ...DIFF_FLAGS, "--raw", "--numstat", "-z", ...against],
    worktreePath,
    { maxBytes: MAX_LIST_BYTES },
  );
  const files = parseRawNumstat(list.text, list.cut);
  let truncated = list.cut;
  const patch = await git.read(
    [...PLAIN, "diff", ...DIFF_FLAGS, "--src-prefix=a/", "--dst-prefix=b/", ...against],
    worktreePath,
    { maxBytes: bounds.maxBytes },
  );
  let diff = patch.text;
  truncated ||= patch.cut;
  const untracked = await git.read(
    [...PLAIN, "ls-files", "--others", "--exclude-standard", "-z"],
    worktreePath,
    { maxBytes: MAX_LIST_BYTES },
  );
  truncated ||= untracked.cut;
  const paths = untracked.text.split("\0").filter(Boolean);
  if (untracked.cut) paths.pop();
  const until = performance.now() + bounds.untrackedMs;
  for (const [i, path] of paths.entries()) {
    const room = bounds.maxBytes - Buffer.byteLength(diff);
    if (room <= 0 || i >= bounds.maxUntracked || performance.now() > until) {
      truncated = true;
      files.push({ path, status: "added", additions: null, deletions: null, binary: false });
      continue;
    }
    // With --no-index git shows a link as a link (mode 120000, its target as its text).
    const one = await git.read(
      [
        ...PLAIN,
        "diff",
        ...DIFF_FLAGS,
        "--no-index",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        "--",
        "/dev/null",
        path,
      ],
      worktreePath,
      { maxBytes: room, exitCodes: [0, 1] },
    );
    diff += one.text;
    truncated ||= one.cut;
    files.push({ path, status: "added", ...countAdded(one.text, one.cut) });
  }
  return { files, diff, truncated };
}

/** Lines added by a new file's patch, as `--numstat` would count them. */
function countAdded(patch: string, cut: boolean): Omit<DiffFile, "path" | "status"> {
  if (/^Binary files /m.test(patch)) return { additions: 0, deletions: 0, binary: true };
  if (cut) return { additions: null, deletions: null, binary: false };
  const hunk = patch.indexOf("\n@@");
  if (hunk < 0) return { additions: 0, deletions: 0, binary: false };
  const lines = patch.slice(hunk + 1).split("\n");
  return {
    additions: lines.filter((line) => line.startsWith("+")).length,
    deletions: 0,
    binary: false,
  };
}

/**
 * `git diff --raw --numstat -z`: first a raw record per file (`:modes shas STATUS\0path\0`, or
 * `\0old\0new\0` for a rename), then a numstat one (`added\tdeleted\tpath\0`, or
 * `added\tdeleted\t\0old\0new\0`; `-` for a binary file's counts). A list cut short loses its
 * last, partial record.
 */
export function parseRawNumstat(text: string, cut: boolean): DiffFile[] {
  const tokens = text.split("\0");
  // The text ends with a NUL: the last token is empty, or what the cut left of one.
  tokens.pop();
  const files = new Map<string, DiffFile>();
  let i = 0;
  const take = () => tokens[i++];
  while (i < tokens.length) {
    const token = take() ?? "";
    if (token.startsWith(":")) {
      const code = token.split(" ").at(-1) ?? "";
      const status = STATUS[code.charAt(0)] ?? "modified";
      const first = take();
      const second = code.startsWith("R") || code.startsWith("C") ? take() : undefined;
      if (first === undefined || (second === undefined && /^[RC]/.test(code))) break;
      const path = second ?? first;
      const file: DiffFile = {
        path,
        status: code.startsWith("C") ? "added" : status,
        additions: null,
        deletions: null,
        binary: false,
      };
      if (second !== undefined && code.startsWith("R")) file.oldPath = first;
      files.set(path, file);
      continue;
    }
    const [added, deleted, inline] = token.split("\t");
    let path = inline;
    if (path === "") {
      take();
      path = take();
    }
    if (path === undefined) break;
    const file = files.get(path);
    if (!file) continue;
    file.binary = added === "-";
    file.additions = added === "-" ? 0 : Number(added);
    file.deletions = deleted === "-" ? 0 : Number(deleted);
  }
  const list = [...files.values()];
  if (cut) list.pop();
  return list;
}
