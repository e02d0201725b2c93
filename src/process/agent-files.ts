import { dirname, relative } from "node:path";
import { commandAs, type RunAs } from "./agent-user.js";
import { runProcess } from "./spawner.js";

// The server's file work where an agent can write (a tenant's HOME: the CLI's transcripts, its
// TMPDIR, its CODEX_HOME) is done by a short shell process running as that agent, never by the
// server itself. The agent can swap any path there, or any directory on the way to it, for a
// symbolic link, a hard link or a FIFO at any moment; the server, as root, following one would
// read a file of root's into a stored transcript, write over one and hand it to the agent, chown
// one of root's directories, or block for ever. Checking a path and then opening it would need
// openat() to be sound (Node has none: the agent can swap a directory between the check and the
// open), and the HOME cannot be root's with only some directories the agent's (the CLIs write
// their files in it). Run as the agent, a planted link leads only where the agent could go
// itself: it can only hurt its own tenant.
//
// What is left is keeping the server from waiting on the agent, or holding what it made: a read
// is bounded in bytes, each process in time (its group killed), a file that is a link or not a
// regular file is refused before it is opened (so a planted FIFO blocks nothing; one swapped in
// just after the check blocks that process until its time is up), and a write goes to a fresh
// file renamed into place, which replaces whatever was there without opening it.
//
// The tools are POSIX sh, mkdir, mktemp, cat, tail, mv, rm and find, as on every Unix, also run as
// the server's own user when the agents are (AGENT_BRIDGE_AGENT_USER unset): one way to do the work.
// A listing is find's alone, without a shell around it: every run looks for its CLI's transcript,
// and a shell that forks find was a process more at each run's end.

/** How long one file process may take before it is killed: far more than its work needs. */
const TIME_LIMIT_MS = 30_000;
/** What is kept of a file process's stderr, for the error that names why it failed. */
const STDERR_BYTES = 2048;
/** The bound on what a listing or a made path prints. */
const LISTING_BYTES = 1024 * 1024;

/** The file process refused (a link, a FIFO, a file over the bound), or failed at, its work. */
export class AgentFileError extends Error {}

/** File work under a directory the agent can write to, done as the agent. */
export interface AgentFiles {
  /**
   * The regular file at `file`, from byte `from` (default 0) on, when it is at most `maxBytes`
   * long in all; undefined when nothing is there. Only the bytes from `from` on are read.
   */
  read(file: string, maxBytes: number, from?: number): Promise<Buffer | undefined>;
  /** Paths relative to `dir` of what is named `pattern` (a glob) `depth` levels below, but directories. */
  find(dir: string, depth: number, pattern: string): Promise<string[]>;
  /** Puts `content` at `file` (mode 0600), making its directory (0700) if missing. */
  write(file: string, content: string | Buffer): Promise<void>;
  /**
   * Makes the directories (mode 0700: the tenant's alone) where missing; one that a link
   * or a file stands in for is replaced. Resolves with the paths it replaced.
   */
  makeDirs(dirs: string[]): Promise<string[]>;
  /** A new directory (0700) in `parent`, its name `prefix` and random characters. */
  makeTempDir(parent: string, prefix: string): Promise<string>;
  /** Removes `path`, and everything under it. */
  remove(path: string): Promise<void>;
}

// Each script takes its paths as arguments ($1…), never in its text. Exit 3: nothing there;
// exit 4: refused, the reason on stderr.
const SCRIPTS = {
  read: `
    if [ -h "$1" ]; then echo "is a symbolic link" >&2; exit 4; fi
    if [ ! -e "$1" ]; then exit 3; fi
    if [ ! -f "$1" ]; then echo "is not a regular file" >&2; exit 4; fi
    exec tail -c "+$(($2 + 1))" -- "$1"`,
  // mv onto a directory would move the file into it.
  write: `
    umask 077
    mkdir -p -- "$1" || exit
    if [ -d "$2" ]; then echo "is a directory" >&2; exit 4; fi
    tmp=$(mktemp "$1/.agent-bridge-XXXXXX") || exit
    if cat > "$tmp" && mv -f -- "$tmp" "$2"; then exit 0; fi
    rm -f -- "$tmp"; exit 1`,
  makeDirs: `
    for dir; do
      if [ -h "$dir" ] || { [ -e "$dir" ] && [ ! -d "$dir" ]; }; then
        rm -f -- "$dir" || exit
        echo "$dir"
      fi
      mkdir -p -m 0700 -- "$dir" || exit
    done`,
  makeTempDir: `umask 077; exec mktemp -d "$1/$2XXXXXX"`,
  remove: `exec rm -rf -- "$1"`,
};

/** `dir` as find's starting point: a path starting with "-" would be read as an option. */
const startAt = (dir: string) => (dir.startsWith("-") ? `./${dir}` : dir);

/**
 * find's arguments listing what is named `pattern` `depth` levels below `start`, but directories:
 * depth-bound, and never through a link below `start` (-H follows `start` alone, as a `cd` into it
 * did). What is not a directory is listed, links and FIFOs too, for the read to refuse by name.
 */
const listing = (start: string, depth: number, pattern: string): string[] => {
  const level = String(depth);
  return [
    "-H",
    start,
    "-mindepth",
    level,
    "-maxdepth",
    level,
    "-name",
    pattern,
    "!",
    "-type",
    "d",
    "-print0",
  ];
};

interface Outcome {
  code: number;
  stdout: Buffer;
}

/**
 * File work as `runAs` (undefined: as the server's own user), with the tools found on `env.PATH`.
 */
export function agentFiles(env: Record<string, string>, runAs?: RunAs): AgentFiles {
  const processEnv: Record<string, string> = {
    LC_ALL: "C",
    ...(env.PATH ? { PATH: env.PATH } : {}),
  };

  /**
   * Runs `command` (a script of SCRIPTS with its arguments, or find's listing) on `path`: its
   * outcome when it exits 0 or with one of `also`, else an AgentFileError naming the path and why.
   */
  async function run(
    path: string,
    command: { script: keyof typeof SCRIPTS; args: string[] } | { find: string[] },
    options: {
      input?: string | Buffer;
      maxOutput?: number;
      /** Why output over `maxOutput` is refused (default: "is larger than <maxOutput> bytes"). */
      tooLarge?: string;
      also?: number[];
    } = {},
  ): Promise<Outcome> {
    const maxOutput = options.maxOutput ?? LISTING_BYTES;
    const what = "find" in command ? "find" : command.script;
    const line: [string, string[]] =
      "find" in command
        ? ["find", command.find]
        : ["sh", ["-c", SCRIPTS[command.script], "sh", ...command.args]];
    const [bin, argv] = runAs ? commandAs(runAs, ...line) : line;
    const ran = await runProcess(
      bin,
      argv,
      { cwd: "/", env: processEnv, input: options.input },
      {
        timeLimitMs: TIME_LIMIT_MS,
        stdout: { maxBytes: maxOutput, over: "stop" },
        stderr: { maxBytes: STDERR_BYTES, over: "tail" },
      },
    ).catch((err: Error) => {
      throw new AgentFileError(`${path}: ${err.message}`);
    });
    if (ran.late) throw new AgentFileError(`${path}: took longer than ${TIME_LIMIT_MS / 1000} s`);
    if (!ran.stdout) {
      throw new AgentFileError(
        `${path}: ${options.tooLarge ?? `is larger than ${maxOutput} bytes`}`,
      );
    }
    const { code } = ran.exit;
    if (code !== null && [0, ...(options.also ?? [])].includes(code)) {
      return { code, stdout: ran.stdout };
    }
    const stderr = ran.stderr?.toString("utf8").trim();
    throw new AgentFileError(`${path}: ${stderr || `${what} exited with ${code}`}`);
  }

  const lines = (bytes: Buffer, separator: string) =>
    bytes
      .toString("utf8")
      .split(separator)
      .filter((line) => line !== "");

  return {
    async read(file, maxBytes, from = 0) {
      // tail seeks a regular file to `from`: what is before it is never read.
      const done = await run(
        file,
        { script: "read", args: [file, String(from)] },
        {
          maxOutput: maxBytes - from,
          tooLarge: `is larger than ${maxBytes} bytes`,
          also: [3],
        },
      );
      return done.code === 3 ? undefined : done.stdout;
    },
    async find(dir, depth, pattern) {
      // find exits 1 when it could not read something, the directory itself above all (the CLI
      // has not made it yet): what it listed stands, nothing included.
      const start = startAt(dir);
      const { stdout } = await run(dir, { find: listing(start, depth, pattern) }, { also: [1] });
      return lines(stdout, "\0").map((found) => relative(start, found));
    },
    async write(file, content) {
      await run(file, { script: "write", args: [dirname(file), file] }, { input: content });
    },
    async makeDirs(dirs) {
      const { stdout } = await run(dirs.join(", "), { script: "makeDirs", args: dirs });
      return lines(stdout, "\n");
    },
    async makeTempDir(parent, prefix) {
      const { stdout } = await run(parent, { script: "makeTempDir", args: [parent, prefix] });
      return stdout.toString("utf8").trim();
    },
    async remove(path) {
      await run(path, { script: "remove", args: [path] });
    },
  };
}

/** `text` as a find -name pattern that matches it alone. */
export function globLiteral(text: string): string {
  return text.replace(/[\\*?[]/g, "\\$&");
}
