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
 * The work dir, which is stored as its real path: when it no longer is one, another session's
 * agent (whose work dir holds this one) has put a link on its path, and the run does not start.
 */
export async function realWorkDir(cwd: string): Promise<string> {
  const real = await realpath(cwd);
  if (real !== path.resolve(cwd)) throw linked(cwd);
  return real;
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
