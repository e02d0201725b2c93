import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Sandbox, SandboxReach } from "../../src/process/sandbox.js";
import { spawnProcess } from "../../src/process/spawner.js";

// An isolated environment for one run of the real `codex` binary against a mock Responses API
// (mock-openai.ts): a fresh CODEX_HOME whose config.toml points codex at the mock, a fresh HOME
// and work dir, and an env holding only what codex needs to run offline.

/** The real CLI launcher installed with the project (a Node script over the native binary). */
export const CODEX_BIN = resolve(import.meta.dirname, "../../node_modules/.bin/codex");

/** A model slug from codex's bundled catalog (`codex debug models`): codex refuses unknown ones. */
export const CODEX_TEST_MODEL = "gpt-5.5";

/** What codex sends the mock as its bearer key. */
export const CODEX_TEST_KEY = "sk-test-codex-unused";

export interface CodexEnv {
  /** Fresh temp CODEX_HOME (config.toml, sessions/ with the thread rollouts). */
  codexHome: string;
  /** Fresh temp work dir (use as the child's cwd); not a git repository. */
  cwd: string;
  /** Complete environment for the child (not merged with process.env), or for the bridge's. */
  env: Record<string, string>;
  /** Removes every directory it made. */
  cleanup(): Promise<void>;
}

/**
 * The config.toml that sends every model request to `baseUrl` and turns off what would reach
 * other hosts: the update check, plugins, apps and model discovery (each would call out to
 * github.com or chatgpt.com on every run). Errors are not retried, so an error turn fails at once.
 */
export function codexConfig(baseUrl: string): string {
  return `model = "${CODEX_TEST_MODEL}"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "${baseUrl}/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
remote_plugin = false
apps = false

[analytics]
enabled = false
`;
}

/** The variables codex needs to run against the config in `codexHome`. */
export function codexEnvVars(codexHome: string, home: string): Record<string, string> {
  return {
    CODEX_HOME: codexHome,
    HOME: home,
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    // A UTF-8 locale, so the commands codex runs behave the same everywhere.
    LANG: "C.UTF-8",
    OPENAI_API_KEY: CODEX_TEST_KEY,
    // codex leaves /tmp/codex-bwrap-synthetic-mount-targets-<uid> behind, else under TMPDIR
    // (it makes an empty /tmp/codex-daemon-<uid> whatever TMPDIR says).
    TMPDIR: join(home, "tmp"),
  };
}

export async function makeCodexEnv(mockUrl: string): Promise<CodexEnv> {
  // realpath: codex reports the resolved cwd. (Under a temp dir codex warns on stderr that it
  // will not make its PATH helper links there; that changes nothing for these runs.)
  const root = await realpath(await mkdtemp(join(tmpdir(), "codex-test-")));
  const home = join(root, "home");
  const codexHome = join(home, ".codex");
  const cwd = join(root, "work");
  await mkdir(codexHome, { recursive: true });
  await mkdir(join(home, "tmp"));
  await mkdir(cwd);
  await writeFile(join(codexHome, "config.toml"), codexConfig(mockUrl));
  return {
    codexHome,
    cwd,
    // For the bridge run with this env: where its model gateway forwards codex's calls (codex
    // itself ignores the variable).
    env: { ...codexEnvVars(codexHome, home), AGENT_BRIDGE_CODEX_BASE_URL: `${mockUrl}/v1` },
    cleanup: () => rm(root, { recursive: true, force: true }),
  };
}

/** One parsed stdout line of `codex exec --json` (loosely typed for assertions). */
export interface CodexLine {
  type: string;
  [k: string]: unknown;
}

export interface CodexRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  lines: CodexLine[];
}

export interface CodexRunOptions {
  args: string[];
  prompt: string;
  /** Called once the child is spawned, with its pid (= its process group id). */
  onSpawn?: (pid: number) => void;
  /** Kill the process group after this long (default 30 s). */
  timeoutMs?: number;
  /** Set: codex runs in this sandbox of the bridge's, reaching what `reach` says. */
  sandbox?: { sandbox: Sandbox; reach: SandboxReach };
}

/**
 * Spawns the real codex in `ce` (in a sandbox of the bridge's, when given) in a process group of its own, writes the prompt on stdin and
 * closes it, and collects its output until it exits.
 */
export async function runCodex(ce: CodexEnv, opts: CodexRunOptions): Promise<CodexRun> {
  const launch = opts.sandbox
    ? await opts.sandbox.sandbox.command({
        bin: CODEX_BIN,
        args: opts.args,
        cwd: ce.cwd,
        env: ce.env,
        reach: opts.sandbox.reach,
      })
    : { bin: CODEX_BIN, args: opts.args, dirs: [], env: {} };
  // Through the server's spawner, which opens the directories a sandbox binds by fd.
  const child = await spawnProcess(launch.bin, launch.args, {
    cwd: ce.cwd,
    env: { ...ce.env, ...launch.env },
    dirs: launch.dirs,
  });
  opts.onSpawn?.(child.pid);
  child.stdin.on("error", () => {});
  child.stdin.end(opts.prompt);
  const text = (stream: NodeJS.ReadableStream) =>
    new Promise<string>((resolve) => {
      let all = "";
      stream.setEncoding("utf8");
      stream.on("data", (d: string) => {
        all += d;
      });
      stream.on("close", () => resolve(all));
    });
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {}
  }, opts.timeoutMs ?? 30_000);
  const [stdout, stderr, { code, signal }] = await Promise.all([
    text(child.stdout),
    text(child.stderr),
    child.exited,
  ]);
  clearTimeout(timer);
  const lines = stdout
    .split("\n")
    .filter((l: string) => l.trim() !== "")
    .map((l: string) => JSON.parse(l) as CodexLine);
  return { code, signal, stdout, stderr, lines };
}
