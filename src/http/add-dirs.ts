import { resolveWorkDir, WorkDirNotAllowedError } from "../auth/work-dir.js";
import { DomainError } from "../errors.js";

// A session's extra directories (`add_dirs`), as a request names them: each must resolve, as its
// `work_dir` must, to a directory inside AGENT_BRIDGE_ALLOWED_ROOTS; stored as real paths.

/** The real paths of the directories, once each; 400 `work_dir_not_allowed` naming the entry. */
export async function resolveAddDirs(
  requested: readonly string[],
  allowedRoots: string[],
): Promise<string[]> {
  const real: string[] = [];
  for (const [i, dir] of requested.entries()) {
    try {
      real.push(await resolveWorkDir(dir, allowedRoots));
    } catch (err) {
      if (!(err instanceof WorkDirNotAllowedError)) throw err;
      const message = err.message.replace(/^work_dir/, "add_dir");
      throw new DomainError("work_dir_not_allowed", message, {
        errors: [{ location: "body", path: `add_dirs.${i}`, message }],
      });
    }
  }
  return [...new Set(real)];
}
