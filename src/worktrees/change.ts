import type { Forge } from "../forges/delivery.js";
import type { Logger } from "../log.js";
import { type Cached, FETCH_TIME_LIMIT_MS, isId } from "./checkout-cache.js";
import { type Git, GitError } from "./git.js";
import {
  findSessionWorktree,
  removeSessionWorktree,
  type WorktreeLayout,
  worktreeBranch,
} from "./worktree.js";

// A session's worktree at a pull request's (GitHub) or merge request's (GitLab) head, fetched
// from the hook's pinned origin into the server's cache (checkout-cache.ts) and taken from there,
// offline: what a hook with `checkout: pull_request` runs in.
//
// One worktree per head: a run whose request's head is the one the session's worktree was made
// from continues in it, with whatever the agent left there; a run after the head moved (new
// commits pushed) gets a fresh worktree at the new head, and the old one is removed with its
// uncommitted changes and the commits the agent made on it. Keeping them would mean merging the
// agent's work into code it has not seen; a review of the new head must see the new head alone.

/** GitHub's and GitLab's numbers are 32-bit; anything above is no real request. */
export const MAX_CHANGE_NUMBER = 2_147_483_647;

/** The pull or merge request a run works on, as stored with the run. */
export interface ChangeCheckout {
  forge: Forge;
  number: number;
  /** The hook's id: whose origin, token and cache the fetch uses. */
  hook: string;
}

/** A request number that can name a ref: a whole number from 1 to MAX_CHANGE_NUMBER. */
export function isChangeNumber(value: unknown): value is number {
  return (
    typeof value === "number" &&
    Number.isSafeInteger(value) &&
    value >= 1 &&
    value <= MAX_CHANGE_NUMBER
  );
}

/**
 * The checkout stored with a run, read back and checked again: a row is data, and the ref name
 * is built from it. Undefined for anything that is not a valid one.
 */
export function readChangeCheckout(stored: unknown): ChangeCheckout | undefined {
  if (stored === null || typeof stored !== "object") return undefined;
  const { forge, number, hook } = stored as Record<string, unknown>;
  if ((forge !== "github" && forge !== "gitlab") || !isChangeNumber(number)) return undefined;
  if (typeof hook !== "string" || !isId(hook)) return undefined;
  return { forge, number, hook };
}

/**
 * The ref the forge keeps the request's head under. Built from a checked integer alone, so that
 * nothing a payload wrote (`../`, a leading `-`, U+0000) can reach a ref name or a git option.
 */
export function changeRef(change: Pick<ChangeCheckout, "forge" | "number">): string {
  if (!isChangeNumber(change.number))
    throw new RangeError(`not a request number: ${change.number}`);
  const n = change.number.toFixed(0);
  return change.forge === "github" ? `refs/pull/${n}/head` : `refs/merge-requests/${n}/head`;
}

/**
 * The tenant's fetch from the cache, over whatever its repository's config says (the agent can
 * write it): no hooks (a `reference-transaction` hook runs on fetch), and the local transport
 * alone. It runs offline anyway; what these keep it from is taking its head from elsewhere, which
 * the check of the head after it catches too.
 */
const FETCH_OVERRIDES = [
  ["core.hooksPath", "/dev/null"],
  ["protocol.allow", "never"],
  ["protocol.file.allow", "always"],
].flatMap(([key, value]) => ["-c", `${key}=${value}`]);

/** Where a fetched head waits for its worktree: one ref a session, so fetches never race. */
const fetchedRef = (sessionId: string) => `refs/agent-bridge/checkouts/${sessionId}`;

export interface CheckedOut {
  path: string;
  head: string;
  /** The session had a worktree at another head: it was removed for this one. */
  replaced: boolean;
}

/**
 * Takes the request's head from the server's checkout cache (`cached`, fetched there from the
 * hook's origin) into the session's repository, and makes the session's worktree at it (branch
 * `worktree-<id>`, where the agent's `layout` puts it, as any session worktree), or keeps the
 * session's worktree when it was made at that head. Throws a GitError when the head cannot be
 * taken or checked out, or when what the repository took is not the cache's head.
 */
export async function checkOutChange(
  git: Git,
  sessionId: string,
  cached: Cached,
  layout: WorktreeLayout,
  logger: Logger,
): Promise<CheckedOut> {
  const local = fetchedRef(sessionId);
  const fetch = [
    ...FETCH_OVERRIDES,
    "fetch",
    "--quiet",
    "--no-tags",
    "--no-recurse-submodules",
    "--no-write-fetch-head",
    "--",
    cached.dir,
    `+${cached.ref}:${local}`,
  ];
  await git.run(fetch, git.repo, { reads: [cached.dir], timeLimitMs: FETCH_TIME_LIMIT_MS });
  try {
    const { head } = cached;
    const taken = await git.maybe(["rev-parse", "--verify", "--quiet", `${local}^{commit}`]);
    if (taken !== head) {
      throw new GitError(fetch, null, `took ${taken ?? "nothing"}, not the cache's head ${head}`);
    }
    const found = await findSessionWorktree(git, sessionId);
    if (found && found.baseCommit === head) return { path: found.path, head, replaced: false };
    // Another head's worktree, or what is left of one (a branch, a registration).
    const removed = await removeSessionWorktree(git, sessionId, { force: true });
    const replaced = removed.outcome !== "absent";
    if (replaced) {
      logger.info("the request's head moved: the session's worktree is made afresh at it", {
        session_id: sessionId,
        head,
      });
    }
    const dir = layout.directory(git.repo, sessionId);
    await git.run(["worktree", "add", "--quiet", "-b", worktreeBranch(sessionId), dir, head]);
    return { path: dir, head, replaced };
  } finally {
    // The worktree's branch keeps the commit; the fetched ref has done its job.
    await git.maybe(["update-ref", "-d", local]);
  }
}
