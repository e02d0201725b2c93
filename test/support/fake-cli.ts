import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { RunnerConfig } from "../../src/agents/claude/runner.js";
import { type AgentStep, type Dialect, type DialectStep, dialectSteps } from "./fake-dialects.js";

// The typed side of the scripted fake CLI (fake-cli.mjs): write a scenario, get a `bin` the
// runner can spawn and a way to read back what the fake saw. The fake speaks one dialect, claude's
// or codex's: its agent steps (fake-dialects.ts) become that dialect's lines.

const FAKE_CLI_SCRIPT = resolve(import.meta.dirname, "fake-cli.mjs");

/**
 * What runs the fake: Bun (a devDependency), the runtime the real claude binary is built on. The
 * suite starts the fake about 500 times, and a run of it costs half the CPU on Bun that it does on
 * Node (docs/development.md).
 */
const FAKE_CLI_RUNTIME = resolve(import.meta.dirname, "../../node_modules/.bin/bun");

/** The model of the codex fake's sessions, priced at $1 per million uncached input tokens. */
export const FAKE_CODEX_MODEL = "gpt-fake";

export type FakeStep =
  | AgentStep
  | DialectStep
  /** Writes the object as one JSON line on stdout. */
  /** Writes text on stdout as it is (no newline added). */
  | { text: string }
  /** Writes raw bytes on stdout (e.g. half of a multibyte character). */
  | { bytes: number[] }
  /**
   * Writes a `tool_result` line for the tool use `toolu_big` whose content, and its copy in
   * `tool_use_result` (as the CLI writes them), hold `bigToolResult` "x" characters.
   */
  | { bigToolResult: number }
  | { stderr: string }
  | { sleep: number }
  /** Exits at once with this code. */
  | { exit: number }
  /** From now on SIGTERM is recorded and otherwise ignored. */
  | { ignoreSigterm: true }
  /**
   * Spawns a grandchild (same process group) that holds stdout open and sleeps; the next step
   * plays once it runs (and ignores SIGTERM, if asked).
   */
  | { grandchild: { seconds?: number; ignoreSigterm?: boolean } }
  /** Waits until a stdin line of this `type` arrives (or stdin ends). */
  | { waitStdin: string }
  /** Waits until a file exists at this path: the test says when to go on. */
  | { waitFile: string }
  /** Records that the scenario got this far (see FakeCli.waitForMark). */
  | { mark: string }
  /** Appends `text` to the file at `path`, its directories made: a transcript the CLI keeps. */
  | { appendFile: { path: string; text: string } };

export interface FakeScenario {
  steps: FakeStep[];
  /** After the steps: "stdin" (default) exits with `exitCode` once stdin closes; "hang" never exits. */
  end?: "stdin" | "hang";
  exitCode?: number;
  /**
   * Like a hung CLI, it never answers the bridge's `interrupt` control request; otherwise (the
   * claude dialect) it ends its turn at one as the real CLI does: an interrupted result, then exit.
   */
  ignoreInterrupt?: boolean;
  /** What its interrupted result says the turn cost (`total_cost_usd`); 0 unless set. */
  interruptedCostUsd?: number;
}

export interface FakeRecord {
  pid: number;
  args: string[];
  cwd: string;
  /** The environment it was started with. */
  env: Record<string, string>;
  /** stdin lines in order (without `\n`). */
  stdin: string[];
  stdinEnded: boolean;
  signals: string[];
  grandchildren: number[];
}

export interface FakeStart {
  pid: number;
  args: string[];
  stdin: string[];
}

export interface FakeCli {
  /** Spawnable path: a shell shim that execs Bun on fake-cli.mjs (same pid). */
  bin: string;
  /** The child environment to give the runner. */
  env: Record<string, string>;
  /** The bridge's configuration that makes it run this fake (for createTestApp / startServer). */
  bridgeEnv: Record<string, string>;
  dir: string;
  /** What the fake saw (of its last start, when it was started several times). */
  record(): Promise<FakeRecord>;
  /** Resolves once a `mark` step with this name has been played. */
  waitForMark(name: string, timeoutMs?: number): Promise<void>;
  /** Plays `next` from the next start on (a server already configured with it keeps it). */
  setScenario(next: FakeScenario): Promise<void>;
  /** Every start of the fake so far, in order, with its pid, arguments and stdin lines. */
  invocations(): Promise<FakeStart[]>;
  /**
   * The starts whose arguments or stdin name `marker`: claude's arguments name the bridge's
   * session, codex's stdin is the prompt.
   */
  startsFor(marker: string): Promise<FakeStart[]>;
  cleanup(): Promise<void>;
}

export async function fakeCli(
  scenario: FakeScenario,
  dialect: Dialect = "claude",
): Promise<FakeCli> {
  const dir = await mkdtemp(join(tmpdir(), "fake-cli-"));
  const scenarioPath = join(dir, "scenario.json");
  const recordPath = join(dir, "record.ndjson");
  const bin = join(dir, dialect);
  const setScenario = (next: FakeScenario) =>
    writeFile(
      scenarioPath,
      JSON.stringify({
        ...next,
        steps: dialectSteps(dialect, next.steps),
        dialect,
        record: recordPath,
      }),
    );
  await setScenario(scenario);
  await writeFile(recordPath, "");
  // Like the real CLIs, it answers `--version` at once (the readiness probe asks it); the shell
  // does, as servers start by the hundred.
  const version = dialect === "codex" ? "codex-cli 0.0.0 (fake)" : "0.0.0 (fake Claude Code)";
  await writeFile(
    bin,
    [
      "#!/bin/sh",
      `if [ "$#" = 1 ] && [ "$1" = --version ]; then echo '${version}'; exit 0; fi`,
      `exec ${JSON.stringify(FAKE_CLI_RUNTIME)} ${JSON.stringify(FAKE_CLI_SCRIPT)} "$@"`,
      "",
    ].join("\n"),
  );
  await chmod(bin, 0o755);
  const invocations = async () => startsOf(await readFile(recordPath, "utf8"));
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", FAKE_CLI_SCENARIO: scenarioPath };
  // Without the bridge's sandbox: the fake writes its records beside its scenario in the test's
  // temp dir, which a run's sandbox hides (a /tmp and /dev/shm of its own), and tests look at its
  // pids from the host. The sandbox is tested with the real CLIs (test/process/sandbox.real.test.ts).
  const unsandboxed = { ...env, AGENT_BRIDGE_SANDBOX: "off" };
  return {
    bin,
    env,
    bridgeEnv:
      dialect === "claude"
        ? {
            ...unsandboxed,
            AGENT_BRIDGE_CLAUDE_BIN: bin,
            AGENT_BRIDGE_CLAUDE_ENV_ALLOW: "FAKE_CLI_SCENARIO",
          }
        : {
            ...unsandboxed,
            AGENT_BRIDGE_AGENT: "codex",
            AGENT_BRIDGE_CODEX_BIN: bin,
            AGENT_BRIDGE_CODEX_ENV_ALLOW: "FAKE_CLI_SCENARIO",
            // A credential, so that the app is ready (the fake never uses it).
            OPENAI_API_KEY: "sk-test-fake-cli",
            // A priced model, so that runs cost: $1 per million uncached input tokens.
            AGENT_BRIDGE_CODEX_MODEL: FAKE_CODEX_MODEL,
            AGENT_BRIDGE_CODEX_PRICES: JSON.stringify({
              [FAKE_CODEX_MODEL]: { input: 1, cached_input: 0, output: 0 },
            }),
          },
    dir,
    setScenario,
    record: async () => parseRecord(await readFile(recordPath, "utf8")),
    waitForMark: async (name, timeoutMs = 60_000) => {
      const line = JSON.stringify({ mark: name });
      const until = Date.now() + timeoutMs;
      while (!(await readFile(recordPath, "utf8")).split("\n").includes(line)) {
        if (Date.now() > until) throw new Error(`the fake CLI never reached mark ${name}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    invocations,
    startsFor: async (marker) =>
      (await invocations()).filter((start) =>
        [...start.args, ...start.stdin].some((s) => s.includes(marker)),
      ),
    cleanup: async () => {
      // A server its test killed leaves its runs' fakes running (a held one waits for its file
      // for good), and one that then sees its stdin end writes its record again while the
      // directory is being removed (ENOTEMPTY). So those still running are stopped first.
      await stopLeftRunning(scenarioPath, await invocations().catch(() => []));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * SIGKILLs the process group of each start still running: only a process whose environment names
 * this fake's scenario, so that a pid used again since by another process is left alone.
 */
async function stopLeftRunning(scenarioPath: string, starts: FakeStart[]): Promise<void> {
  for (const { pid } of starts) {
    const environ = await readFile(`/proc/${pid}/environ`, "utf8").catch(() => "");
    if (!environ.split("\0").includes(`FAKE_CLI_SCENARIO=${scenarioPath}`)) continue;
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, "SIGKILL");
        break;
      } catch {
        // Not a group's leader (then the process alone), or gone meanwhile.
      }
    }
  }
}

function startsOf(text: string): FakeStart[] {
  const starts = new Map<number, FakeStart>();
  for (const line of text.split("\n")) {
    if (!line) continue;
    const entry = JSON.parse(line) as Record<string, unknown>;
    if (typeof entry.pid === "number" && Array.isArray(entry.args)) {
      starts.set(entry.pid, { pid: entry.pid, args: entry.args as string[], stdin: [] });
    }
    if (typeof entry.from === "number" && typeof entry.stdin === "string") {
      starts.get(entry.from)?.stdin.push(entry.stdin);
    }
  }
  return [...starts.values()];
}

function parseRecord(text: string): FakeRecord {
  const rec: FakeRecord = {
    pid: 0,
    args: [],
    cwd: "",
    env: {},
    stdin: [],
    stdinEnded: false,
    signals: [],
    grandchildren: [],
  };
  for (const line of text.split("\n")) {
    if (!line) continue;
    const entry = JSON.parse(line) as Record<string, unknown>;
    if (typeof entry.pid === "number") {
      rec.pid = entry.pid;
      rec.args = entry.args as string[];
      rec.cwd = entry.cwd as string;
      rec.env = entry.env as Record<string, string>;
    }
    if (typeof entry.stdin === "string") rec.stdin.push(entry.stdin);
    if (entry.stdinEnd === true) rec.stdinEnded = true;
    if (typeof entry.signal === "string") rec.signals.push(entry.signal);
    if (typeof entry.grandchild === "number") rec.grandchildren.push(entry.grandchild);
  }
  return rec;
}

/** A RunnerConfig for the fake with short limits; override what a test needs. */
export function fakeRunnerConfig(
  fake: FakeCli,
  overrides: Partial<RunnerConfig> = {},
): RunnerConfig {
  return {
    bin: fake.bin,
    env: fake.env,
    timeoutMs: 20_000,
    idleTimeoutMs: 10_000,
    maxLineBytes: 16 * 1024 * 1024,
    stderrTailBytes: 4096,
    killGraceMs: 300,
    ...overrides,
  };
}
