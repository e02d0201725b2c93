import path from "node:path";
import { covering, type Mount } from "./sandbox-mounts.js";

// bwrap's command line for a run's mount plan (sandbox-mounts.ts): its namespaces, the mounts in
// order, the directories bound by fd, the capabilities left to the command.
//
// Signals: the driver stops a run with SIGTERM to its process group, then SIGKILL after a grace.
// bwrap dies of SIGTERM, and with it (through --die-with-parent) everything in the sandbox at once,
// so it is started with SIGTERM ignored (`env --ignore-signal`, inherited across exec) and the
// command inside with it restored (`env --default-signal`): the CLI gets its grace, and SIGKILL
// (or the CLI's exit) still ends the whole sandbox.

/** The programs a sandbox is made with, found once at start-up (bubblewrap.ts). */
export interface Bubblewrap {
  bwrap: string;
  env: string;
  /** Serves the gateway's socket on a port inside a sandbox's network namespace. */
  socat: string;
  version: string;
}

/**
 * bwrap's arguments for `mounts`, before `--` and the command, and the directories the spawner
 * must open for them, in the order of their fds.
 */
export function bwrapArgs(
  mounts: Mount[],
  options: {
    cwd: string;
    switchesUser: boolean;
    setenv: Record<string, string>;
    ownNetwork: boolean;
  },
): { args: string[]; dirs: string[] } {
  const dirs: string[] = [];
  const args = [
    "--die-with-parent",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(options.ownNetwork ? ["--unshare-net"] : []),
    "--ro-bind",
    "/",
    "/",
  ];
  const made = new Set<string>();
  for (const [i, m] of mounts.entries()) {
    for (const dir of missingParents(mounts.slice(0, i), made, m)) {
      args.push("--perms", "0755", "--dir", dir);
      made.add(dir);
    }
    made.add(m.path);
    if (m.kind === "dev") args.push("--dev", m.path);
    else if (m.kind === "scratch")
      args.push("--perms", "01777", "--size", String(m.bytes), "--tmpfs", m.path);
    else if (m.kind === "hide") args.push("--tmpfs", m.path);
    else if (m.kind === "hide-file") args.push("--ro-bind", "/dev/null", m.path);
    else if (m.from !== undefined) args.push(m.writable ? "--bind" : "--ro-bind", m.from, m.path);
    else {
      // By an fd the spawner opens (src/process/spawner.ts): bwrap itself would follow a link
      // put on the path after it was planned.
      args.push(m.writable ? "--bind-fd" : "--ro-bind-fd", String(FIRST_FD + dirs.length), m.path);
      dirs.push(m.path);
    }
  }
  // After the binds: a /proc of the sandbox's own PID namespace (the host's processes unseen).
  args.push("--proc", "/proc");
  // Last, once everything inside them is mounted: the hiding tmpfs and /dev are not writable
  // either (not recursive: what is bound inside them stays as bound).
  for (const m of mounts)
    if (m.kind === "hide" || m.kind === "dev") args.push("--remount-ro", m.path);
  // Run by root, bwrap leaves the command every capability (mount, umount: out of the sandbox)
  // unless told; with no_new_privs, which bwrap sets, none comes back at an exec. Switching to
  // the agent user needs these three, and setpriv drops them again (agent-user.ts).
  args.push("--cap-drop", "ALL");
  if (options.switchesUser) {
    args.push("--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP");
  }
  for (const [name, value] of Object.entries(options.setenv)) args.push("--setenv", name, value);
  args.push("--chdir", options.cwd);
  return { args, dirs };
}

/** The fd of the first directory the spawner opens for bwrap (after stdin, stdout, stderr). */
const FIRST_FD = 3;

/**
 * The directories between `m` and the tmpfs it lands in that are not there yet (`made`: what the
 * mounts before it made). bwrap makes them itself for a bind, but 0700, root's: the agent user
 * could not pass them to its own work dir.
 */
function missingParents(before: Mount[], made: Set<string>, m: Mount): string[] {
  const cover = covering(
    before.filter((b) => b.path !== m.path),
    m.path,
  );
  if (!cover || cover.kind === "bind" || cover.kind === "hide-file") return [];
  const dirs: string[] = [];
  for (let dir = path.dirname(m.path); dir !== cover.path; dir = path.dirname(dir)) {
    if (!made.has(dir)) dirs.unshift(dir);
  }
  return dirs;
}

/** The whole command line: bwrap with SIGTERM ignored, the command inside with it restored. */
export function wrapped(
  tool: Bubblewrap,
  args: string[],
  bin: string,
  argv: string[],
): [string, string[]] {
  return [
    tool.env,
    [
      "--ignore-signal=TERM",
      tool.bwrap,
      ...args,
      "--",
      tool.env,
      "--default-signal=TERM",
      bin,
      ...argv,
    ],
  ];
}
