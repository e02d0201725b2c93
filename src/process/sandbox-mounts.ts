import { GATEWAY_SOCKET } from "./sandbox-gateway.js";

// A run's sandbox as a plan of mounts over the read-only root (src/process/sandbox.ts): what is
// writable, what is hidden under an empty tmpfs or /dev/null, what is shown again inside what is
// hidden, and the order bwrap must make them in. Pure: paths in, mounts out.

/** One mount of the sandbox, in the order made (see `mountOrder`). */
export type Mount =
  | { kind: "dev"; path: string }
  /** A private, size-capped tmpfs anyone may write (sticky): /tmp, /dev/shm. */
  | { kind: "scratch"; path: string; bytes: number }
  /** An empty tmpfs over a directory, made read-only once everything in it is mounted. */
  | { kind: "hide"; path: string }
  /** /dev/null over a file. */
  | { kind: "hide-file"; path: string }
  /** `from` (default: the same path) at `path`. */
  | { kind: "bind"; path: string; writable: boolean; from?: string };

/** Paths as the sandbox's plan takes them: real paths, of things that exist. */
export interface MountInput {
  cwd: string;
  workDirWritable: boolean;
  /** HOME and the other writable directories. */
  writable: string[];
  /**
   * More directories writable as the work dir is (a session's `add_dirs`), unless hidden: one
   * that is, or lies in, a hidden directory is left out, and one that holds a hidden directory
   * leaves it hidden.
   */
  extra?: string[];
  readOnly: string[];
  hiddenDirs: string[];
  hiddenFiles: string[];
  /** Allowed roots (directories): hidden unless inside the work dir. */
  roots: string[];
  tmpBytes: number;
  /** Set: the network is the sandbox's own, and this socket of the gateway's is bound in. */
  gatewaySocket?: string;
}

/** Whether `p` is `dir` or lies inside it. */
export const within = (p: string, dir: string) =>
  p === dir || p.startsWith(dir === "/" ? "/" : `${dir}/`);

const depth = (p: string) => (p === "/" ? 0 : p.split("/").length - 1);
/** The tmpfs and bind mounts over the read-only root, in the order bwrap must make them. */
export function sandboxMounts(input: MountInput): Mount[] {
  const writable = [...new Set(input.writable)];
  const extra = [...new Set(input.extra ?? [])].filter(
    (dir) =>
      dir !== input.cwd &&
      !writable.includes(dir) &&
      !input.hiddenDirs.some((hidden) => within(dir, hidden)),
  );
  const mounts: Mount[] = [
    { kind: "dev", path: "/dev" },
    { kind: "scratch", path: "/tmp", bytes: input.tmpBytes },
    { kind: "scratch", path: "/dev/shm", bytes: input.tmpBytes },
    { kind: "bind", path: input.cwd, writable: input.workDirWritable },
    ...writable
      .filter((dir) => dir !== input.cwd)
      .map((dir): Mount => ({ kind: "bind", path: dir, writable: true })),
    ...extra.map((dir): Mount => ({ kind: "bind", path: dir, writable: input.workDirWritable })),
  ];
  if (input.gatewaySocket) {
    mounts.push(
      { kind: "hide", path: "/run" },
      { kind: "bind", path: GATEWAY_SOCKET, from: input.gatewaySocket, writable: false },
    );
  }
  const bound = new Set([input.cwd, ...writable]);
  // The server's own paths are hidden wherever they are, even inside the work dir or HOME (a data
  // dir in the work dir the server was started in); only the one that *is* the CLI's HOME is not.
  // Another work dir is hidden unless it lies in this run's (then it is part of it); "/" as a root
  // would hide the system itself, and allows everything anyway.
  const hide = [
    ...input.hiddenDirs.filter((dir) => !bound.has(dir)),
    ...input.roots.filter((root) => root !== "/" && !within(root, input.cwd)),
  ];
  const hidden = (p: string) => {
    const cover = covering(mounts, p);
    return cover !== undefined && cover.kind !== "bind" && cover.kind !== "dev";
  };
  // Outermost first; one a tmpfs hides already (the agents' homes in the data dir, anything in
  // the host's /tmp) costs a mount for nothing.
  for (const dir of [...new Set(hide)].sort((a, b) => depth(a) - depth(b))) {
    if (!hidden(dir)) mounts.push({ kind: "hide", path: dir });
  }
  // Shown again where a tmpfs hides them (the CLI installed under a hidden root, the run's files
  // in the server's temp dir); elsewhere they are visible already, or writable, as they are.
  for (const dir of new Set(input.readOnly)) {
    if (!bound.has(dir) && hidden(dir)) mounts.push({ kind: "bind", path: dir, writable: false });
  }
  for (const file of new Set(input.hiddenFiles)) {
    if (!hidden(file)) mounts.push({ kind: "hide-file", path: file });
  }
  return mountOrder(mounts);
}

/** The deepest planned mount at or above `p` (undefined: the read-only root). */
export function covering(mounts: Mount[], p: string): Mount | undefined {
  let best: Mount | undefined;
  for (const m of mounts) {
    if (within(p, m.path) && (!best || depth(m.path) >= depth(best.path))) best = m;
  }
  return best;
}

/** Whether the CLI can write `p` in the sandbox: under a writable bind or a scratch tmpfs. */
export function writableIn(mounts: Mount[], p: string): boolean {
  const cover = covering(mounts, p);
  return cover?.kind === "scratch" || (cover?.kind === "bind" && cover.writable);
}

/**
 * Shallower first, so that a deeper mount lands on top of the one that holds it: a work dir bound
 * into the tmpfs that hides its root, a data dir hidden inside the work dir. At one path, a tmpfs
 * before what is bound onto it.
 */
function mountOrder(mounts: Mount[]): Mount[] {
  const rank = (m: Mount) => (m.kind === "bind" || m.kind === "hide-file" ? 1 : 0);
  return [...mounts].sort((a, b) => depth(a.path) - depth(b.path) || rank(a) - rank(b));
}
