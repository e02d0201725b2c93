import { spawn } from "node:child_process";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/exit-codes.js";
import { createClient } from "../../src/client/index.js";
import { crashBeforeResult, type LiveServer, liveServer, toolThenReply } from "../client/live.js";
import { createTestApp, listen } from "../support/app.js";
import { longRun } from "../support/fake-scenarios.js";
import { runCommand } from "../support/process.js";
import { freePort } from "../support/server.js";
import { controlRequest, result, systemInit } from "../support/stream-json-lines.js";
import { BIN, cli, ROOT, runCli } from "./run-cli.js";

// The `agent-bridge` command line against live servers (the app on loopback with the fake CLI):
// what it prints on stdout and stderr, and its exit codes. Most cases run it in-process; what
// only a process shows (stdin, Ctrl-C, a closed pipe, AGENT_BRIDGE_URL) runs the bin as a child.

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
const PARTS = ["Hel", "lo", ", wor", "ld", "!"];

describe("the agent-bridge command", () => {
  let ok: LiveServer;
  let crashing: LiveServer;
  let slow: LiveServer;
  const env = (server: LiveServer) => ({ AGENT_BRIDGE_URL: server.url });
  const on =
    (server: LiveServer) =>
    (...args: string[]) =>
      cli("--url", server.url, ...args);

  beforeAll(async () => {
    [ok, crashing, slow] = await Promise.all([
      liveServer("pglite", toolThenReply(PARTS)),
      liveServer("pglite", crashBeforeResult()),
      liveServer("pglite", longRun(30)),
    ]);
  });
  afterAll(async () => {
    await Promise.all([ok?.close(), crashing?.close(), slow?.close()]);
  });

  it("send streams the text to stdout, tool status and a summary to stderr, and exits 0", async () => {
    const res = await on(ok)("send", "say hello");
    expect(res.stdout).toBe("Hello, world!\n");
    const lines = res.stderr.trimEnd().split("\n");
    expect(lines[0]).toMatch(new RegExp(`^session ${UUID}$`));
    expect(lines[1]).toBe("Using Bash…");
    expect(lines[2]).toMatch(
      new RegExp(`^succeeded in 1\\.5s · 100 in / 20 out tokens · \\$0\\.0123 · run ${UUID}$`),
    );
    expect(lines).toHaveLength(3);
    expect(res.code).toBe(EXIT.ok);
  });

  it("send --session continues a session; --json prints the finished run; - reads stdin", async () => {
    const session = await createClient({ baseUrl: ok.url }).createSession({ title: "cli" });
    const res = await runCli(["send", "-", "--session", session.id, "--json"], env(ok), "hello");
    expect(res.code).toBe(EXIT.ok);
    const finished = JSON.parse(res.stdout);
    expect(finished).toMatchObject({
      text: "Hello, world!",
      run: { session_id: session.id, prompt: "hello", status: "succeeded" },
      completion: { status: "succeeded" },
    });
    expect(res.stderr).toBe("");
  });

  it("send of a failed run shows the error and the summary, and exits with the failed code", async () => {
    const res = await on(crashing)("send", "hi");
    expect(res.code).toBe(EXIT.failed);
    expect(res.stdout).toBe("");
    expect(res.stderr).toMatch(/^error: .*exit.*3/m);
    expect(res.stderr).toMatch(
      new RegExp(`^failed in \\d+\\.\\ds · 0 in / 0 out tokens · .*run ${UUID}$`, "m"),
    );
  });

  it("send --async prints the run id; runs show, runs events and runs events --follow read it", async () => {
    const sent = await on(ok)("send", "hi", "--async");
    expect(sent.code).toBe(EXIT.ok);
    const runId = sent.stdout.trim();
    expect(runId).toMatch(new RegExp(`^${UUID}$`));

    const followed = await on(ok)("runs", "events", runId, "--follow");
    expect(followed.code).toBe(EXIT.ok);
    expect(followed.stdout).toBe("Hello, world!\n");
    expect(followed.stderr).toContain(`succeeded in 1.5s`);

    const shown = await on(ok)("runs", "show", runId);
    expect(JSON.parse(shown.stdout)).toMatchObject({ id: runId, status: "succeeded" });

    const listed = await on(ok)("runs", "events", runId);
    const events = listed.stdout
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    expect(events[0]).toMatchObject({ type: "run_started", run_id: runId });
    expect(events.at(-1)).toMatchObject({ type: "completion", status: "succeeded" });
  });

  it("runs events without --follow prints what a streaming run has stored so far and exits while the run goes on", async () => {
    // A delta every 50 ms for 100 s: the stream never falls quiet before the test is over.
    const streaming = await liveServer("pglite", {
      steps: [
        { init: true },
        { reply: { parts: Array.from({ length: 2000 }, () => "."), delayMs: 50 } },
        { succeed: {} },
      ],
    });
    try {
      const client = createClient({ baseUrl: streaming.url });
      const run = await client.sendAsync((await client.createSession()).id, "stream");
      for await (const event of client.follow(run.id)) if (event.type === "text_delta") break;

      const res = await runCli(["runs", "events", run.id], env(streaming));
      expect(res).toMatchObject({ code: EXIT.ok, stderr: "" });
      const events = res.stdout
        .trimEnd()
        .split("\n")
        .map((line) => JSON.parse(line));
      expect(events[0]).toMatchObject({ type: "run_started", run_id: run.id });
      expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
      expect(events.map((e) => e.type)).toContain("text_delta");
      expect(events.map((e) => e.type)).not.toContain("completion");
      expect((await client.getRun(run.id)).status).toBe("running");
    } finally {
      await streaming.close();
    }
  });

  it("runs retry runs a session's latest run again, shown as send shows it; --async prints the new run's id", async () => {
    const first = JSON.parse((await on(ok)("send", "say hello", "--json")).stdout);
    const retried = await on(ok)("runs", "retry", first.run.id);
    expect(retried.code).toBe(EXIT.ok);
    expect(retried.stdout).toBe("Hello, world!\n");
    const summary = retried.stderr.trimEnd().split("\n").at(-1) ?? "";
    expect(summary).toMatch(new RegExp(`^succeeded in .* · run ${UUID}$`));
    const retryId = summary.slice(summary.lastIndexOf(" ") + 1);
    expect(retryId).not.toBe(first.run.id);

    // Only the latest run can be retried: the server's refusal, as its detail and code.
    const stale = await on(ok)("runs", "retry", first.run.id);
    expect(stale.code).toBe(EXIT.error);
    expect(stale.stderr).toMatch(/only the latest run can be retried \(run_not_latest\)\n$/);

    const queued = await on(ok)("runs", "retry", retryId, "--async", "--text", "say it again");
    expect(queued.code).toBe(EXIT.ok);
    const again = queued.stdout.trim();
    expect(again).toMatch(new RegExp(`^${UUID}$`));
    const run = JSON.parse((await on(ok)("runs", "show", again)).stdout);
    expect(run).toMatchObject({ trigger: "retry", prompt: "say it again" });
  });

  it("runs approve answers a run's permission request; a second answer is refused", async () => {
    const asking = await liveServer("pglite", {
      steps: [
        { emit: systemInit() },
        { emit: controlRequest("req_cli", "Bash", { command: "make" }, "toolu_cli") },
        { waitStdin: "control_response" },
        { mark: "answered" },
        { emit: result({ result: "Made." }) },
      ],
    });
    try {
      const client = createClient({ baseUrl: asking.url });
      const session = await client.createSession({ approvals: "api" });
      const run = await client.sendAsync(session.id, "make it");
      const events = client.follow(run.id);
      for await (const event of events) if (event.type === "permission_request") break;
      const answered = await on(asking)("runs", "approve", run.id, "req_cli");
      expect(answered).toMatchObject({ code: EXIT.ok, stdout: "allowed req_cli\n" });
      const again = await on(asking)("runs", "approve", run.id, "req_cli", "--deny");
      expect(again.code).not.toBe(EXIT.ok);
      expect(again.stderr).toMatch(/no longer pending/);
      // The answer reaches the CLI after the route has answered (seen in CI: not yet there).
      await asking.fake.waitForMark("answered");
      const answer = (await asking.fake.record()).stdin.find((l) => l.includes("req_cli"));
      expect(JSON.parse(answer ?? "{}").response.response).toMatchObject({ behavior: "allow" });
    } finally {
      await asking.close();
    }
  });

  it("send --approvals ask puts each request to the terminal: a tool allowed with y, a question answered with an option's number", async () => {
    const questions = [
      {
        question: "Which database?",
        header: "DB",
        options: [{ label: "PGlite" }, { label: "Postgres", description: "a server" }],
        multiSelect: false,
      },
    ];
    const asking = await liveServer("pglite", {
      steps: [
        { emit: systemInit() },
        { emit: controlRequest("req_make", "Bash", { command: "make" }, "toolu_make") },
        { waitStdin: "control_response" },
        { emit: controlRequest("req_ask", "AskUserQuestion", { questions }, "toolu_ask") },
        { waitStdin: "control_response" },
        { emit: result({ result: "Done." }) },
      ],
    });
    try {
      const res = await runCli(
        ["send", "build it", "--approvals", "ask"],
        { AGENT_BRIDGE_URL: asking.url },
        "y\n2\n",
      );
      expect(res.code).toBe(EXIT.ok);
      expect(res.stderr).toContain("Allow Bash: make? [y/n/a] ");
      expect(res.stderr).toContain("Which database?\n  1. PGlite\n  2. Postgres (a server)\n");
      const answers = (await asking.fake.record()).stdin
        .filter((l) => l.includes("control_response"))
        .map((l) => JSON.parse(l).response.response);
      expect(answers).toEqual([
        expect.objectContaining({ behavior: "allow" }),
        expect.objectContaining({
          behavior: "allow",
          updatedInput: { questions, answers: { "Which database?": "Postgres" } },
        }),
      ]);
    } finally {
      await asking.close();
    }
  });

  it("send --approvals ask refuses --json and --async, which do not follow the run", async () => {
    const res = await on(ok)("send", "x", "--approvals", "ask", "--json");
    expect(res.code).toBe(EXIT.usage);
    expect(res.stderr).toMatch(/--approvals ask answers as the run goes/);
  });

  it("runs cancel stops a run; following it then exits with the cancelled code", async () => {
    const runId = (await on(slow)("send", "work", "--async")).stdout.trim();
    const cancelled = await on(slow)("runs", "cancel", runId);
    expect(cancelled).toMatchObject({ code: EXIT.ok, stdout: `cancelled ${runId}\n` });
    const followed = await on(slow)("runs", "events", runId, "--follow");
    expect(followed.code).toBe(EXIT.cancelled);
    expect(followed.stderr).toMatch(/^cancelled in /m);
  });

  it("Ctrl-C without a terminal detaches: exit 130, the run goes on", async () => {
    const child = spawn(process.execPath, [BIN, "send", "work"], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env(slow) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    const exited = once(child, "exit");
    for await (const chunk of child.stdout) {
      stdout += chunk;
      if (stdout.includes("Working on it")) break;
    }
    child.kill("SIGINT");
    const [code] = await exited;
    expect(code).toBe(EXIT.detached);
    const runId = stderr.match(new RegExp(`runs events (${UUID}) --follow`))?.[1];
    expect(runId).toBeDefined();
    const run = await createClient({ baseUrl: slow.url }).getRun(runId ?? "");
    expect(run.status).toBe("running");
    await createClient({ baseUrl: slow.url }).cancelRun(run.id);
  });

  it("sessions new, ls, show and rm", async () => {
    const created = await on(ok)("sessions", "new", "--title", "from the cli");
    const id = created.stdout.trim();
    expect(id).toMatch(new RegExp(`^${UUID}$`));

    const table = await on(ok)("sessions", "ls", "--limit", "100");
    expect(table.stdout.split("\n")[0]).toMatch(/^ID\s+TITLE\s+RUNS\s+COST\s+LAST ACTIVITY$/);
    expect(table.stdout).toMatch(
      new RegExp(`^${id}\\s+from the cli\\s+0\\s+\\$0\\.0000\\s+\\S+$`, "m"),
    );

    const page = JSON.parse((await on(ok)("sessions", "ls", "--json")).stdout);
    expect(page.data.map((s: { id: string }) => s.id)).toContain(id);

    const shown = JSON.parse((await on(ok)("sessions", "show", id)).stdout);
    expect(shown).toMatchObject({ id, title: "from the cli", usage: { runs: 0 } });

    const removed = await on(ok)("sessions", "rm", id);
    expect(removed).toMatchObject({ code: EXIT.ok, stdout: `deleted ${id}\n` });
  });

  it("sessions new --agent picks the session's agent; one the server does not run is refused", async () => {
    const created = await on(ok)("sessions", "new", "--agent", "claude", "--json");
    expect(JSON.parse(created.stdout)).toMatchObject({ agent: "claude" });
    const refused = await on(ok)("sessions", "new", "--agent", "codex");
    expect(refused.code).not.toBe(EXIT.ok);
    expect(refused.stdout).toBe("");
    expect(refused.stderr).toContain("does not run the codex agent (AGENT_BRIDGE_AGENTS)");
    const sent = await on(ok)("send", "hi", "--agent", "codex");
    expect(sent.stderr).toContain("does not run the codex agent");
    expect(sent.code).not.toBe(EXIT.ok);
  });

  it("--permission-mode sets a new session's mode (sessions new) and a run's (send); a mode that is none is bad usage", async () => {
    const created = await on(ok)("sessions", "new", "--permission-mode", "plan", "--json");
    const session = JSON.parse(created.stdout);
    expect(session).toMatchObject({ permission_mode: "plan" });

    const sent = await on(ok)(
      "send",
      "hi",
      "--session",
      session.id,
      "--permission-mode",
      "default",
    );
    expect(sent.code).toBe(EXIT.ok);
    const { args } = await ok.fake.record();
    expect(args.join(" ")).toContain("--permission-mode default");

    const bad = await on(ok)("sessions", "new", "--permission-mode", "ask");
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.stderr).toMatch(/--permission-mode <mode>' argument 'ask' is invalid/);
  });

  it("runs ls lists runs newest first, of one session with --session", async () => {
    const client = createClient({ baseUrl: ok.url });
    const session = await client.createSession({ title: "runs ls" });
    const first = await client.send(session.id, "one");
    const second = await client.send(session.id, "two");
    const other = await client.send((await client.createSession()).id, "elsewhere");

    const table = await runCli(["runs", "ls", "--session", session.id], env(ok));
    expect(table.code).toBe(EXIT.ok);
    const lines = table.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+SESSION\s+STATUS\s+TRIGGER\s+COST\s+CREATED\s+REPLIES$/);
    expect(lines.slice(1).map((line) => line.split(/\s+/).slice(0, 5))).toEqual(
      [second, first].map(({ run }) => [run.id, session.id, "succeeded", "message", "$0.0123"]),
    );

    const all = JSON.parse(
      (await runCli(["runs", "ls", "--json", "--limit", "2"], env(ok))).stdout,
    );
    expect(all.data.map((r: { id: string }) => r.id)).toEqual([other.run.id, second.run.id]);
    expect(all.next_cursor).toEqual(expect.any(String));
  });

  it("shows a server error as its detail and code, without a stack trace", async () => {
    const missing = crypto.randomUUID();
    const res = await on(ok)("sessions", "show", missing);
    expect(res).toEqual({
      code: EXIT.error,
      stdout: "",
      stderr: `agent-bridge: No session with id ${missing} (session_not_found)\n`,
    });
    const busy = await on(ok)("runs", "cancel", "not-a-uuid");
    expect(busy.code).toBe(EXIT.error);
    expect(busy.stderr).toMatch(/^agent-bridge: .*\(validation_failed\)\n$/);
  });

  it("without a key, says to set AGENT_BRIDGE_KEY or pass --key; with a wrong one, where it came from", async () => {
    const keyed = await createTestApp("pglite", { AGENT_BRIDGE_AUTH: "keys" });
    const server = await listen(keyed.app);
    try {
      const missing = await runCli(["sessions", "ls"], { AGENT_BRIDGE_URL: server.url });
      expect(missing).toEqual({
        code: EXIT.error,
        stdout: "",
        stderr:
          "agent-bridge: missing Authorization: Bearer <API key> (unauthorized); set AGENT_BRIDGE_KEY or pass --key: the key the server printed at its first start, or one from `agent-bridge keys create`\n",
      });
      const wrong = await runCli(["sessions", "ls", "--key", `ab_${"x".repeat(43)}`], {
        AGENT_BRIDGE_URL: server.url,
      });
      expect(wrong.stderr).toBe(
        "agent-bridge: unknown or revoked API key (unauthorized); check the key given with --key or AGENT_BRIDGE_KEY\n",
      );
    } finally {
      await server.close();
      await keyed.close();
    }
  });

  it("takes the server from --url over AGENT_BRIDGE_URL, and says when it cannot reach it", async () => {
    const nobody = `http://127.0.0.1:${await freePort()}`;
    const res = await runCli(["--url", ok.url, "sessions", "ls", "--json"], {
      AGENT_BRIDGE_URL: nobody,
    });
    expect(res.code).toBe(EXIT.ok);
    const down = await cli("--url", nobody, "sessions", "ls");
    expect(down).toEqual({
      code: EXIT.error,
      stdout: "",
      stderr: `agent-bridge: cannot reach ${nobody}: ECONNREFUSED\n`,
    });
  });

  it("has --help on every command, and exits 2 on bad usage", async () => {
    const commands = [
      [],
      ["send"],
      ["sessions"],
      ["sessions", "ls"],
      ["sessions", "new"],
      ["sessions", "show"],
      ["sessions", "rm"],
      ["runs"],
      ["runs", "show"],
      ["runs", "events"],
      ["runs", "cancel"],
      ["serve"],
      ["openapi"],
    ];
    const helps = await Promise.all(commands.map((c) => cli(...c, "--help")));
    for (const [i, help] of helps.entries()) {
      expect(help.code, commands[i]?.join(" ")).toBe(EXIT.ok);
      expect(help.stdout).toMatch(/^Usage: agent-bridge/);
    }
    const bad = await cli("send");
    expect(bad.code).toBe(EXIT.usage);
    expect(bad.stderr).toContain("missing required argument 'prompt'");
    const conflict = await cli("send", "hi", "--new", "--session", crypto.randomUUID());
    expect(conflict.code).toBe(EXIT.usage);
  });

  it("stops quietly when its reader goes away (| head)", async () => {
    // 77 KB of YAML: more than a pipe holds, so writing goes on after head has gone.
    const cli = `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)}`;
    const res = await runCommand("bash", ["-c", `set -o pipefail; ${cli} openapi | head -3`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
    });
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout.split("\n")[0]).toBe("openapi: 3.1.0");
  });

  it("openapi prints the committed spec", async () => {
    const { readFile } = await import("node:fs/promises");
    const res = await cli("openapi");
    expect(res.code).toBe(EXIT.ok);
    expect(res.stdout).toBe(await readFile(new URL("../../openapi.yaml", import.meta.url), "utf8"));
  });
});
