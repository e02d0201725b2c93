import path from "node:path";
import { commandAs, type RunAs } from "./agent-user.js";
import { type Bubblewrap, bwrapArgs, wrapped } from "./bwrap-args.js";
import { behindGateway, gatewayProxyEnv, type SandboxGateway } from "./sandbox-gateway.js";
import { sandboxMounts, writableIn } from "./sandbox-mounts.js";
import {
  boundDir,
  existing,
  installDir,
  realBinary,
  realExtraDirs,
  realStoredDir,
} from "./sandbox-paths.js";

// Each run's CLI, and everything it starts, runs in a sandbox of its own made with bubblewrap
// (`bwrap`, Debian's `bubblewrap`): its own mount namespace (the system read-only; writable only
// the run's work dir, its HOME and the state dirs its back-end names; a private, size-capped /tmp
// and /dev/shm; the server's data dir, secrets, homes and other work dirs hidden under empty
// read-only tmpfs), and its own PID, IPC and UTS namespaces. `--die-with-parent` and the PID
// namespace end everything in it with the run: once the CLI exits, bwrap exits, its namespace's
// init dies with it and the kernel kills what is left, `setsid` or not. A run whose CLI calls its
// API through the bridge's gateway has a network of its own (sandbox-gateway.ts).
//
// This module turns a run's command into the command that starts it so; the parts are the mount
// plan (sandbox-mounts.ts), the real paths it binds (sandbox-paths.ts), bwrap's arguments
// (bwrap-args.ts), and finding bubblewrap at start-up (bubblewrap.ts, sandbox-start.ts).
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

/** What one run's sandbox lets its CLI reach besides the system, read-only. */
export interface SandboxReach {
  /** More directories it writes: its back-end's state dirs, a worktree's repository's `.git`. */
  writable?: string[];
  /** Directories it reads that may lie where the sandbox hides things: the run's own files. */
  readOnly?: string[];
  /**
   * Directories it may use besides its work dir (a session's `add_dirs`): writable as the work
   * dir is, but never a path the server hides (its data dir, homes, secrets) nor inside one.
   */
  extraDirs?: string[];
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

/** Temp-dir variables a CLI writes to: pointed at the sandbox's /tmp when not writable there. */
const TEMP_VARIABLES = ["TMPDIR", "CLAUDE_CODE_TMPDIR"];

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
    const cwd = await realStoredDir(command.cwd);
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
    const [writable, extra, readOnly, hiddenDirs, hiddenFiles, roots] = await Promise.all([
      bound([command.env.HOME, ...(reach.writable ?? [])]),
      realExtraDirs(reach.extraDirs ?? []),
      bound([installDir(bin), ...(reach.readOnly ?? [])]),
      dirs(this.policy.hidden),
      Promise.all(this.policy.hidden.map((p) => existing(p, "file"))),
      dirs(this.policy.roots),
    ]);
    const mounts = sandboxMounts({
      cwd,
      workDirWritable: !reach.workDirReadOnly,
      writable,
      ...(extra.length > 0 ? { extra } : {}),
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
    let env: Record<string, string> = {};
    if (gateway) {
      env = gatewayProxyEnv(gateway);
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
