import { realpath, stat } from "node:fs/promises";
import path from "node:path";

export class WorkDirNotAllowedError extends Error {}

/** Whether the real path is one of the roots or lies below one. */
export function isWithin(real: string, roots: string[]): boolean {
  return roots.some((root) => {
    const rel = path.relative(root, real);
    return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
  });
}

/**
 * The real path of a requested work dir, when it is a directory inside one of the allowed roots
 * (both compared after following symlinks, so neither `..` nor a link inside a root can lead
 * out). A file would be taken by nobody but the CLI's spawn, which fails with ENOTDIR.
 */
export async function resolveWorkDir(requested: string, allowedRoots: string[]): Promise<string> {
  const refuse = (why: string) =>
    new WorkDirNotAllowedError(
      `work_dir ${JSON.stringify(requested)} ${why}; allowed roots: ${allowedRoots.join(", ")}`,
    );
  let real: string;
  try {
    real = await realpath(path.resolve(allowedRoots[0] ?? "/", requested));
  } catch {
    throw refuse("does not exist");
  }
  if (!isWithin(real, allowedRoots)) throw refuse("is outside the allowed roots");
  const found = await stat(real).catch(() => undefined);
  if (!found) throw refuse("does not exist");
  if (!found.isDirectory()) throw refuse("is not a directory");
  return real;
}
