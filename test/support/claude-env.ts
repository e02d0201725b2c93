import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

// An isolated environment for one run of the real `claude` binary against a mock Messages API:
// a fresh HOME (the CLI keeps its config and transcripts under ~/.claude and ~/.claude.json),
// a fresh work dir, and an env holding only what the CLI needs to run offline and quickly.

/** The real CLI binary installed with the project. */
export const CLAUDE_BIN = resolve(import.meta.dirname, "../../node_modules/.bin/claude");

/** What the CLI gets as its API key in tests that give it none of their own (the fake CLI never uses it). */
export const TEST_CLI_KEY = "sk-ant-test-unused";

export interface ClaudeEnv {
  /** Fresh temp HOME. */
  home: string;
  /** Fresh temp work dir (use as the child's cwd). */
  cwd: string;
  /** Complete environment for the child (not merged with process.env). */
  env: Record<string, string>;
  /** Removes home and cwd. */
  cleanup(): Promise<void>;
}

/**
 * The variables the CLI needs to run against `baseUrl` without touching the network otherwise.
 * Exported separately so that tests of the runner can hand it the same env.
 */
export function claudeEnvVars(baseUrl: string, home: string): Record<string, string> {
  return {
    HOME: home,
    // The CLI keeps per-project scratch dirs, fswatch probes and a messaging socket under
    // $TMPDIR (else /tmp/claude-<uid>, /tmp/cc-socks), and leaves them behind: keep them in HOME.
    TMPDIR: join(home, "tmp"),
    CLAUDE_CODE_TMPDIR: join(home, "tmp"),
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    // A UTF-8 locale, so tools and the CLI behave the same everywhere.
    LANG: "C.UTF-8",
    ANTHROPIC_BASE_URL: baseUrl,
    ANTHROPIC_API_KEY: "any",
    // No telemetry, error reporting, feature-flag fetches, auto-update or release-note checks:
    // nothing but ANTHROPIC_BASE_URL is contacted.
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    DISABLE_TELEMETRY: "1",
    DISABLE_ERROR_REPORTING: "1",
    // We run as root; the CLI refuses bypass modes as root unless it is told it is sandboxed.
    IS_SANDBOX: "1",
  };
}

export async function makeClaudeEnv(baseUrl: string): Promise<ClaudeEnv> {
  // realpath: on some systems tmpdir is a symlink and the CLI reports the resolved cwd.
  const home = await realpath(await mkdtemp(join(tmpdir(), "claude-home-")));
  const cwd = await realpath(await mkdtemp(join(tmpdir(), "claude-work-")));
  await mkdir(join(home, "tmp"));
  return {
    home,
    cwd,
    env: claudeEnvVars(baseUrl, home),
    cleanup: async () => {
      await rm(home, { recursive: true, force: true });
      await rm(cwd, { recursive: true, force: true });
    },
  };
}

/** The flags the bridge runs the CLI with (before the session and permission flags). */
export const BRIDGE_FLAGS = [
  "-p",
  "--input-format",
  "stream-json",
  "--output-format",
  "stream-json",
  "--verbose",
  "--include-partial-messages",
  "--permission-prompt-tool",
  "stdio",
] as const;

/** The one stdin line that carries a prompt. */
export function userMessageLine(text: string): string {
  return `${JSON.stringify({
    type: "user",
    message: { role: "user", content: [{ type: "text", text }] },
    parent_tool_use_id: null,
    session_id: "",
  })}\n`;
}

/** One parsed stdout line of stream-json (loosely typed for assertions). */
export interface StreamLine {
  type: string;
  subtype?: string;
  [k: string]: unknown;
}

export interface ControlRequestLine {
  type: "control_request";
  request_id: string;
  request: {
    subtype: string;
    tool_name?: string;
    input?: Record<string, unknown>;
    tool_use_id?: string;
    [k: string]: unknown;
  };
}

/** What to answer to a can_use_tool request: the inner `response`, or undefined for no answer. */
export type ControlAnswerer = (
  req: ControlRequestLine,
) =>
  | { behavior: "allow"; updatedInput: Record<string, unknown> }
  | { behavior: "deny"; message: string }
  | undefined;

export const denyAll: ControlAnswerer = () => ({ behavior: "deny", message: "Denied by test" });

export interface CliRunOptions {
  args: string[];
  prompt: string;
  /** Answers control requests (default: deny every one). */
  answer?: ControlAnswerer;
  /** "after-result" (default, as the bridge does) or "immediately" after the prompt line. */
  closeStdin?: "after-result" | "immediately";
  /** Kill the process group after this long (default 30 s). */
  timeoutMs?: number;
}

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  lines: StreamLine[];
  /** Milliseconds from spawn to the `result` line (undefined when none came). */
  msToResult: number | undefined;
  msToExit: number;
}

/** Spawns the real CLI in `ce`, writes the prompt on stdin, answers control requests. */
export function runCli(ce: ClaudeEnv, opts: CliRunOptions): Promise<CliRun> {
  const answer = opts.answer ?? denyAll;
  const t0 = Date.now();
  const child = spawn(CLAUDE_BIN, opts.args, {
    cwd: ce.cwd,
    env: ce.env,
    stdio: ["pipe", "pipe", "pipe"],
    detached: true,
  });
  child.stdin.on("error", () => {});
  child.stdin.write(userMessageLine(opts.prompt));
  if (opts.closeStdin === "immediately") child.stdin.end();
  let stdout = "";
  let stderr = "";
  let pending = "";
  let msToResult: number | undefined;
  const lines: StreamLine[] = [];
  const onLine = (text: string) => {
    if (text.trim() === "") return;
    const line = JSON.parse(text) as StreamLine;
    lines.push(line);
    if (line.type === "control_request") {
      const req = line as unknown as ControlRequestLine;
      if (req.request.subtype !== "can_use_tool") return;
      const response = answer(req);
      if (response && child.stdin.writable) {
        child.stdin.write(
          `${JSON.stringify({
            type: "control_response",
            response: { subtype: "success", request_id: req.request_id, response },
          })}\n`,
        );
      }
    } else if (line.type === "result") {
      msToResult ??= Date.now() - t0;
      child.stdin.end();
    }
  };
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (d: string) => {
    stdout += d;
    pending += d;
    for (let i = pending.indexOf("\n"); i >= 0; i = pending.indexOf("\n")) {
      onLine(pending.slice(0, i));
      pending = pending.slice(i + 1);
    }
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => {
    stderr += d;
  });
  const timer = setTimeout(() => {
    try {
      if (child.pid) process.kill(-child.pid, "SIGKILL");
    } catch {}
  }, opts.timeoutMs ?? 30_000);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      onLine(pending);
      resolve({ code, signal, stdout, stderr, lines, msToResult, msToExit: Date.now() - t0 });
    });
  });
}

/** Whether the CLI kept a transcript of the session (under HOME) that holds `text`. */
export async function transcriptHolds(ce: ClaudeEnv, sessionId: string, text: string) {
  const projects = join(ce.home, ".claude", "projects");
  const dirs = await readdir(projects).catch(() => []);
  for (const dir of dirs) {
    const content = await readFile(join(projects, dir, `${sessionId}.jsonl`), "utf8").catch(
      () => "",
    );
    if (content.includes(text)) return true;
  }
  return false;
}
