import { lstat, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { within } from "./sandbox-mounts.js";

// The paths a run's sandbox binds, as the plan takes them: real paths of things that exist, found
// without following a link an agent may have put where a directory is bound.

/** Why a run does not start: a directory it would bind is reached through a link. */
function linked(p: string): Error {
  return Object.assign(new Error(`${p}: a link stands on the path of a directory the run binds`), {
    code: "ELOOP",
  });
}

/**
 * A directory a session stores as its real path (its work dir, its extra directories): when it no
 * longer is one, an agent that can write a directory on its path has put a link there, and the
 * run does not start. Resolving it again instead would bind wherever the link points, checked
 * against nothing: another tenant's root, or the host's `/etc`. The spawner then opens this very
 * path following no link, so a link planted after this look is refused there.
 */
export async function realStoredDir(dir: string): Promise<string> {
  const real = await realpath(dir);
  if (real !== path.resolve(dir)) throw linked(dir);
  return real;
}

/** The session's extra directories as realStoredDir checks them; those gone are left out. */
export async function realExtraDirs(dirs: string[]): Promise<string[]> {
  const found = await Promise.all(
    dirs.map((dir) =>
      realStoredDir(dir).then(
        async (real) => ((await stat(real)).isDirectory() ? real : undefined),
        (err: NodeJS.ErrnoException) => {
          if (err.code === "ENOENT" || err.code === "ENOTDIR") return undefined;
          throw err;
        },
      ),
    ),
  );
  return found.filter((dir) => dir !== undefined);
}

/**
 * The path at which the spawner opens a directory to bind (following no link there), when it
 * exists; ELOOP when its last part is a link. Inside the work dir or HOME (`anchors`: each as
 * given, and real), which the agents can change, nothing is resolved: their real path is joined
 * with the rest as given, and the spawner refuses the path when a link stands anywhere on it as
 * it opens it. Resolving a link there would let an agent that swaps `$HOME/.codex` or a
 * repository's `.git` between the look and the resolution choose what is bound. Elsewhere (the
 * operator's directories) its parent is resolved, its last part not.
 */
export async function boundDir(
  p: string | undefined,
  anchors: [given: string, real: string][],
): Promise<string | undefined> {
  if (!p) return undefined;
  const given = path.resolve(p);
  const anchor = anchors.find(([dir]) => within(given, dir));
  const planned = anchor
    ? path.join(anchor[1], path.relative(anchor[0], given))
    : await realpath(path.dirname(given)).then(
        (parent) => path.join(parent, path.basename(given)),
        () => undefined,
      );
  const found = planned === undefined ? undefined : await lstat(planned).catch(() => undefined);
  if (found?.isSymbolicLink()) throw linked(p);
  return found?.isDirectory() ? planned : undefined;
}

/** The real path of `p` when it exists as a `kind`; undefined otherwise. */
export async function existing(
  p: string | undefined,
  kind: "dir" | "file",
): Promise<string | undefined> {
  if (!p) return undefined;
  try {
    const real = await realpath(p);
    const s = await stat(real);
    return (kind === "dir" ? s.isDirectory() : s.isFile()) ? real : undefined;
  } catch {
    return undefined;
  }
}

/** `bin`'s real path, looked up on `searchPath` when it is a bare name; ENOENT when missing. */
export async function realBinary(bin: string, searchPath: string | undefined): Promise<string> {
  const candidates = bin.includes("/")
    ? [bin]
    : (searchPath ?? "")
        .split(":")
        .filter(Boolean)
        .map((dir) => path.join(dir, bin));
  for (const candidate of candidates) {
    const real = await existing(candidate, "file");
    if (real) return real;
  }
  throw Object.assign(new Error(`${bin}: not found`), { code: "ENOENT" });
}

/**
 * Where the CLI is installed: the `node_modules` that holds it (codex's launcher runs its platform
 * package, a sibling), else its own directory.
 */
export function installDir(bin: string): string {
  const parts = bin.split(path.sep);
  const at = parts.lastIndexOf("node_modules");
  return at > 0 ? parts.slice(0, at + 1).join(path.sep) : path.dirname(bin);
}
