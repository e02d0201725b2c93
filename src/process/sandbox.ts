import { execFileSync } from "node:child_process";
import { accessSync, closeSync, constants, openSync } from "node:fs";
import { lstat, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { DomainError } from "../errors.js";
import type { Logger } from "../log.js";
import { type AgentUserConfig, commandAs, type RunAs } from "./agent-user.js";
import type { LimitsConfig } from "./run-limits.js";

// Each run's CLI, and everything it starts, runs in a sandbox of its own made with bubblewrap
// (`bwrap`, Debian's `bubblewrap`): its own mount namespace (the system read-only; writable only
// the run's work dir, its HOME and the state dirs its back-end names; a private, size-capped /tmp
// and /dev/shm; the server's data dir, secrets, homes and other work dirs hidden under empty
// read-only tmpfs), and its own PID, IPC and UTS namespaces. `--die-with-parent` and the PID
// namespace end everything in it with the run: once the CLI exits, bwrap exits, its namespace's
// init dies with it and the kernel kills what is left, `setsid` or not.
//
// The network: a run whose CLI calls its model API through the bridge's gateway has a network
// namespace of its own, with loopback alone. The run's Unix socket to the gateway is bound in, and socat,
// started inside before the CLI, serves it on the gateway's own port number at 127.0.0.1, so the
// CLI's base URL is the same inside as out. The agent's other connections go through the same
// port, which is also an HTTP proxy that lets through what the run's key allows
// (src/gateway/egress.ts): HTTP(S)_PROXY name it, with the run's token. The host's /run (its
// services' sockets: the database's, the container engine's) is hidden too. A CLI that reaches its
// API by itself (its own login, no gateway) keeps the host's network.
//
// Why not @anthropic-ai/sandbox-runtime, which wraps the same bubblewrap for Claude Code: it wraps
// one shell command string for the Bash tool, and brings HTTP and SOCKS proxies with socat bridges,
// a ripgrep scan of the work dir and seccomp helpers on every command; the bridge wraps a whole CLI
// (an argv, no shell) with a mount plan of its own (the data dir, tenants' homes, other roots). What
// is taken from it: `--die-with-parent`, `--unshare-pid` with `--proc /proc` after the binds,
// `--dev /dev`, a read-only `/` with the writable dirs bound over it, and files hidden under
// /dev/null. Not `--new-session`: the spawner already made bwrap a session leader without a
// terminal (nothing to inject keystrokes into), and a new session would take the CLI out of the
// process group that the driver signals.
//
// Signals: the driver stops a run with SIGTERM to its process group, then SIGKILL after a grace.
// bwrap dies of SIGTERM, and with it (through --die-with-parent) everything in the sandbox at once,
// so it is started with SIGTERM ignored (`env --ignore-signal`, inherited across exec) and the
// command inside with it restored (`env --default-signal`): the CLI gets its grace, and SIGKILL
// (or the CLI's exit) still ends the whole sandbox.

/** `AGENT_BRIDGE_SANDBOX`: on when bubblewrap works (`auto`), required (`on`), or not at all. */
export const SANDBOX_MODES = ["auto", "on", "off"] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];

/** Each run in a sandbox of its own: its configuration section. */
export interface SandboxConfig {
  mode: SandboxMode;
  /** Size of each run's private /tmp and /dev/shm. */
  tmpBytes: number;
  /** Each sandboxed run's memory and process limits; 0: none (src/process/run-limits.ts). */
  limits: LimitsConfig;
  /** Where bubblewrap is looked for: the server's PATH. */
  searchPath: string;
  /**
   * What is the server's and no run may see: its data dir, the agents' homes, the debug
   * capture, the files its secrets and MCP servers were read from, its HOME.
   */
  hidden: string[];
}

/** What `/readyz` shows of the sandbox. */
export type SandboxStatus =
  | { enabled: true; mechanism: "bubblewrap"; version: string }
  | { enabled: false; reason: string };

/**
 * Why the server cannot start with the sandbox it was asked for; one line for the operator. A run
 * (or a key) that would need the sandbox is refused with it too.
 */
export class SandboxError extends DomainError {
  constructor(message: string) {
    super("sandbox_required", message);
  }
}

/** The programs a sandbox is made with, found once at start-up. */
export interface Bubblewrap {
  bwrap: string;
  env: string;
  /** Serves the gateway's socket on a port inside a sandbox's network namespace. */
  socat: string;
  version: string;
}

/** What one run's sandbox lets its CLI reach besides the system, read-only. */
export interface SandboxReach {
  /** More directories it writes: its back-end's state dirs, a worktree's repository's `.git`. */
  writable?: string[];
  /** Directories it reads that may lie where the sandbox hides things: the run's own files. */
  readOnly?: string[];
  /** Its work dir is read-only too (codex's `read-only` sandbox mode, see agents/codex). */
  workDirReadOnly?: boolean;
  /**
   * Set: the CLI calls its API through the gateway; the run then has a network of its own, where
   * the gateway is all there is. Unset: the host's network (unless `offline`).
   */
  gateway?: SandboxGateway;
  /** No network at all (a namespace of its own, loopback alone): the server's git needs none. */
  offline?: boolean;
}

/** The model gateway as one run's sandbox reaches it (src/gateway/). */
export interface SandboxGateway {
  /** The run's token: the password of the gateway's proxy. */
  token: string;
  /** The run's own Unix socket to the gateway, bound into the sandbox. */
  socket: string;
  /** The gateway's port: the CLI's base URL names it, so it is served on it inside too. */
  port: number;
}

/** One run's command, as it would start without the sandbox. */
export interface SandboxedCommand {
  /** Path (or PATH name) of the binary. */
  bin: string;
  args: string[];
  cwd: string;
  /** The child's complete environment. */
  env: Record<string, string>;
  /** Set: the CLI runs as another user (src/process/agent-user.ts). */
  runAs?: RunAs;
  /** What the run's sandbox lets the CLI reach besides its work dir and HOME (when sandboxed). */
  reach?: SandboxReach;
}

/** A sandboxed command as the spawner starts it. */
export interface Launch {
  bin: string;
  args: string[];
  /** Directories the spawner opens as the command's fds 3, 4, … (SpawnOptions.dirs). */
  dirs: string[];
  /** Variables to add to the command's environment. */
  env: Record<string, string>;
}

/** The server's side of every sandbox: what stays hidden, and how big its scratch space is. */
export interface SandboxPolicy {
  /** The server's own paths (data dir, homes, secret files, its HOME): hidden from every run. */
  hidden: string[];
  /** The allowed roots: each hidden from a run, except the part that is its work dir. */
  roots: string[];
  /** Size of each of the run's /tmp and /dev/shm. */
  tmpBytes: number;
}

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
  readOnly: string[];
  hiddenDirs: string[];
  hiddenFiles: string[];
  /** Allowed roots (directories): hidden unless inside the work dir. */
  roots: string[];
  tmpBytes: number;
  /** Set: the network is the sandbox's own, and this socket of the gateway's is bound in. */
  gatewaySocket?: string;
}

/** Where a sandbox finds the gateway's socket. */
export const GATEWAY_SOCKET = "/run/agent-bridge/gateway.sock";

const within = (p: string, dir: string) => p === dir || p.startsWith(dir === "/" ? "/" : `${dir}/`);

const depth = (p: string) => (p === "/" ? 0 : p.split("/").length - 1);

/** The tmpfs and bind mounts over the read-only root, in the order bwrap must make them. */
export function sandboxMounts(input: MountInput): Mount[] {
  const writable = [...new Set(input.writable)];
  const mounts: Mount[] = [
    { kind: "dev", path: "/dev" },
    { kind: "scratch", path: "/tmp", bytes: input.tmpBytes },
    { kind: "scratch", path: "/dev/shm", bytes: input.tmpBytes },
    { kind: "bind", path: input.cwd, writable: input.workDirWritable },
    ...writable
      .filter((dir) => dir !== input.cwd)
      .map((dir): Mount => ({ kind: "bind", path: dir, writable: true })),
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
function covering(mounts: Mount[], p: string): Mount | undefined {
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
function wrapped(
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

/** Temp-dir variables a CLI writes to: pointed at the sandbox's /tmp when not writable there. */
const TEMP_VARIABLES = ["TMPDIR", "CLAUDE_CODE_TMPDIR"];

/** The variables that name a proxy, as curl, git, npm, pip and Node's fetch read them. */
const PROXY_VARIABLES = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];
const NO_PROXY_VARIABLES = ["NO_PROXY", "no_proxy"];

/**
 * `bin` started once socat serves the gateway's socket on `port` inside the sandbox (a CLI that
 * called before would find nothing there); socat dies with the sandbox.
 */
function behindGateway(
  socat: string,
  port: number,
  bin: string,
  args: string[],
): [string, string[]] {
  // A listening socket on 127.0.0.1:port, as the namespace's /proc/net/tcp lists it: looked for
  // with the shell's builtins alone (no process per look), while socat starts.
  const listening = `0100007F:${port.toString(16).toUpperCase().padStart(4, "0")} 0A`;
  const script = [
    // SIGTERM left to the CLI: its grace after one may still call its API (socat dies with the
    // sandbox all the same).
    `(trap '' TERM; exec '${socat}' TCP-LISTEN:${port},bind=127.0.0.1,fork,reuseaddr UNIX-CONNECT:${GATEWAY_SOCKET}) &`,
    "listening() {",
    `  while read -r _ address _ state _; do [ "$address $state" = "${listening}" ] && return 0; done </proc/net/tcp`,
    "  return 1",
    "}",
    "until listening; do",
    `  kill -0 $! 2>/dev/null || { echo "agent-bridge: no way to the model gateway in the sandbox" >&2; exit 126; }`,
    "done",
    'exec "$@"',
  ].join("\n");
  return ["/bin/sh", ["-c", script, "sh", bin, ...args]];
}

export class Sandbox {
  constructor(
    readonly tool: Bubblewrap,
    private readonly policy: SandboxPolicy,
  ) {}

  /**
   * The command that runs `command` in a sandbox of its own. Rejects with ENOENT when its binary
   * or its work dir does not exist (the driver names which), as spawning it directly would.
   */
  async command(command: SandboxedCommand): Promise<Launch> {
    const reach = command.reach ?? {};
    const cwd = await realWorkDir(command.cwd);
    const bin = await realBinary(command.bin, command.env.PATH);
    const { gateway } = reach;
    const dirs = async (paths: (string | undefined)[]) =>
      (await Promise.all(paths.map((p) => existing(p, "dir")))).filter((p) => p !== undefined);
    // HOME itself is made by the server, where the agents cannot change it (the homes' directory).
    const home = await existing(command.env.HOME, "dir");
    const anchors: [string, string][] = [[cwd, cwd]];
    if (home && command.env.HOME) anchors.push([path.resolve(command.env.HOME), home]);
    const bound = async (paths: (string | undefined)[]) =>
      (await Promise.all(paths.map((p) => boundDir(p, anchors)))).filter((p) => p !== undefined);
    const [writable, readOnly, hiddenDirs, hiddenFiles, roots] = await Promise.all([
      bound([command.env.HOME, ...(reach.writable ?? [])]),
      bound([installDir(bin), ...(reach.readOnly ?? [])]),
      dirs(this.policy.hidden),
      Promise.all(this.policy.hidden.map((p) => existing(p, "file"))),
      dirs(this.policy.roots),
    ]);
    const mounts = sandboxMounts({
      cwd,
      workDirWritable: !reach.workDirReadOnly,
      writable,
      readOnly,
      // The server's HOME stays visible when it is the CLI's own (no agent user).
      hiddenDirs: hiddenDirs.filter((dir) => dir !== home),
      hiddenFiles: hiddenFiles.filter((file) => file !== undefined),
      roots,
      tmpBytes: this.policy.tmpBytes,
      ...(gateway ? { gatewaySocket: gateway.socket } : {}),
    });
    const setenv: Record<string, string> = {};
    for (const name of TEMP_VARIABLES) {
      const dir = command.env[name];
      if (dir && !writableIn(mounts, path.resolve(dir))) setenv[name] = "/tmp";
    }
    let [inner, innerArgs] = [bin, command.args];
    // In bwrap's environment, which it passes on, not in its arguments: any user on the host
    // reads a process's command line, only its own user its environment.
    const env: Record<string, string> = {};
    if (gateway) {
      const proxy = `http://run:${gateway.token}@127.0.0.1:${gateway.port}`;
      for (const name of PROXY_VARIABLES) env[name] = proxy;
      for (const name of NO_PROXY_VARIABLES) env[name] = "127.0.0.1,localhost,::1";
      [inner, innerArgs] = behindGateway(this.tool.socat, gateway.port, inner, innerArgs);
    }
    if (command.runAs) [inner, innerArgs] = commandAs(command.runAs, inner, innerArgs);
    const { args, dirs: opened } = bwrapArgs(mounts, {
      cwd,
      switchesUser: command.runAs !== undefined,
      setenv,
      ownNetwork: gateway !== undefined || reach.offline === true,
    });
    const [file, all] = wrapped(this.tool, args, inner, innerArgs);
    return { bin: file, args: all, dirs: opened, env };
  }
}

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
async function realWorkDir(cwd: string): Promise<string> {
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
async function boundDir(
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
async function existing(p: string | undefined, kind: "dir" | "file"): Promise<string | undefined> {
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
async function realBinary(bin: string, searchPath: string | undefined): Promise<string> {
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
function installDir(bin: string): string {
  const parts = bin.split(path.sep);
  const at = parts.lastIndexOf("node_modules");
  return at > 0 ? parts.slice(0, at + 1).join(path.sep) : path.dirname(bin);
}

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

/** What to do where the sandbox cannot be made. */
const INSTALL = "install them (Debian: apt-get install bubblewrap socat)";

/**
 * Why agents of `keys` API keys (several tenants) must not run here: `auto` found no sandbox, and
 * without one each tenant's agent can reach the others' work. Undefined when they may: a sandbox,
 * one key (a set-up of one user), or AGENT_BRIDGE_SANDBOX=off (the operator accepts it).
 */
export function tenantsUnsandboxed(
  status: SandboxStatus,
  mode: SandboxMode,
  keys: number,
): SandboxError | undefined {
  if (status.enabled || mode === "off" || keys <= 1) return undefined;
  return new SandboxError(
    `${keys} API keys could run agents here, but runs cannot be sandboxed: ${status.reason}; ${INSTALL}, or set AGENT_BRIDGE_SANDBOX=off to run the agents of several tenants without one`,
  );
}

/**
 * The sandbox this server runs its agents in, as AGENT_BRIDGE_SANDBOX asks: none when off, or when
 * `auto` finds bubblewrap unusable on a set-up of one user. Throws SandboxError when it must not
 * start without one: `on`, or `auto` with an agent user (agents of several tenants on one machine).
 */
export function startSandbox(
  config: {
    sandbox: SandboxConfig;
    /** Set: agents of several tenants run on this machine. */
    agentUser: AgentUserConfig | undefined;
    /** Real paths a session's work_dir must lie in. */
    allowedRoots: string[];
  },
  logger: Logger,
): { sandbox?: Sandbox; status: SandboxStatus } {
  const { mode, searchPath, tmpBytes, hidden } = config.sandbox;
  if (mode === "off") return { status: { enabled: false, reason: "AGENT_BRIDGE_SANDBOX=off" } };
  const found = findBubblewrap(searchPath);
  if (typeof found === "string") {
    if (mode === "on") {
      throw new SandboxError(
        `AGENT_BRIDGE_SANDBOX=on, but runs cannot be sandboxed: ${found}; ${INSTALL}, or set AGENT_BRIDGE_SANDBOX=auto to run without one where it is missing`,
      );
    }
    if (config.agentUser) {
      throw new SandboxError(
        `AGENT_BRIDGE_AGENT_USER is set (agents of several tenants on this machine), but runs cannot be sandboxed: ${found}; ${INSTALL}, or set AGENT_BRIDGE_SANDBOX=off to run them without a sandbox`,
      );
    }
    logger.warn("runs are not sandboxed", { reason: found });
    return { status: { enabled: false, reason: found } };
  }
  return {
    sandbox: new Sandbox(found, { hidden, roots: config.allowedRoots, tmpBytes }),
    status: { enabled: true, mechanism: "bubblewrap", version: found.version },
  };
}
