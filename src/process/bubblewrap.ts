import { execFileSync } from "node:child_process";
import { accessSync, closeSync, constants, openSync } from "node:fs";
import path from "node:path";
import { type Bubblewrap, bwrapArgs, wrapped } from "./bwrap-args.js";
import { sandboxMounts } from "./sandbox-mounts.js";

// Finding the programs a sandbox is made with (bwrap, env, socat) on a search path, and trying
// them: the server counts on bubblewrap only once it has made a sandbox like a run's here.

/** `name` on `searchPath`, executable; undefined when there is none. */
function onPath(name: string, searchPath: string): string | undefined {
  for (const dir of searchPath.split(":").filter(Boolean)) {
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

const probes = new Map<string, Bubblewrap | string>();

/**
 * bubblewrap as found on `searchPath`, once it has made a sandbox like a run's and run `true` in
 * it; else why not (one line). Asked once per process and search path.
 */
export function findBubblewrap(searchPath: string): Bubblewrap | string {
  let found = probes.get(searchPath);
  if (found === undefined) {
    found = probe(searchPath);
    probes.set(searchPath, found);
  }
  return found;
}

function probe(searchPath: string): Bubblewrap | string {
  const bwrap = onPath("bwrap", searchPath);
  if (!bwrap) return "bubblewrap (bwrap) is not installed";
  const env = onPath("env", searchPath) ?? "/usr/bin/env";
  const socat = onPath("socat", searchPath);
  if (!socat) return "socat is not installed (it serves the model gateway inside each sandbox)";
  let version: string;
  try {
    version = execFileSync(bwrap, ["--version"], { encoding: "utf8", timeout: 10_000 })
      .trim()
      .replace(/^bubblewrap\s+/, "");
  } catch (err) {
    return `${bwrap} --version failed (${firstLine(err)})`;
  }
  const tool = { bwrap, env, socat, version };
  const mounts = sandboxMounts({
    cwd: "/",
    workDirWritable: false,
    writable: [],
    readOnly: [],
    hiddenDirs: [],
    hiddenFiles: [],
    roots: [],
    tmpBytes: 1024 * 1024,
  });
  const plan = bwrapArgs(mounts, { cwd: "/", switchesUser: false, setenv: {}, ownNetwork: true });
  const [file, args] = wrapped(tool, plan.args, "true", []);
  const fds = plan.dirs.map((dir) => openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY));
  try {
    execFileSync(file, args, { stdio: ["ignore", "ignore", "pipe", ...fds], timeout: 10_000 });
  } catch (err) {
    return `bubblewrap cannot make a sandbox here (${firstLine(err)})`;
  } finally {
    for (const fd of fds) closeSync(fd);
  }
  return tool;
}

function firstLine(err: unknown): string {
  const stderr = (err as { stderr?: Buffer | string }).stderr?.toString().trim();
  return (stderr || (err as Error).message).split("\n")[0] ?? "";
}
