import { randomUUID } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readOwnCgroups } from "../../src/process/run-limits.js";
import { isRoot } from "../support/agent-user.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { holdUntilReleased, type MockTurn } from "../support/mock-anthropic.js";
import { commandOutput, sections } from "../support/probe.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";

// Each sandboxed run in cgroups of its own (src/process/run-limits.ts), with small limits: the
// real CLI, in bypass mode against the mock Messages API, plays a hijacked agent whose Bash command
// forks or allocates past them. Its run, and nothing else, ends `failed` with the limit's code.
// The fork bomb is a bounded one (2^10 sleeping processes at most), so that without the limits it
// only costs the machine a few seconds. Needs root and writable cgroup v1 memory and pids
// hierarchies, as CI has; bubblewrap too (AGENT_BRIDGE_SANDBOX=on).

const MAX_PROCESSES = 96;
const MEMORY_MB = 768;

const own = readOwnCgroups();
const parents = typeof own === "object" && !("unified" in own) ? own : undefined;

/** The directories of a run's groups (the server is this process). */
const groupsOf = (runId: string) =>
  [parents?.memory, parents?.pids].map((parent) =>
    join(parent as string, `agent-bridge-${process.pid}-${runId}`),
  );

/** This process's run groups still there. */
const runGroups = () =>
  [parents?.memory, parents?.pids].flatMap((parent) =>
    readdirSync(parent as string).filter((name) => name.startsWith(`agent-bridge-${process.pid}-`)),
  );

/**
 * Waits, a bounded while, until none of `dirs` is there; whether they went. The run's answer comes
 * as soon as its outcome is known, its groups go once its processes have.
 */
async function gone(dirs: string[], withinMs = 10_000): Promise<boolean> {
  const until = Date.now() + withinMs;
  while (dirs.some((dir) => existsSync(dir))) {
    if (Date.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return true;
}

const bash = (command: string): MockTurn => ({
  blocks: [{ type: "tool_use", name: "Bash", input: { command } }],
});
const say = (text: string, hold?: () => Promise<void>): MockTurn => ({
  blocks: [{ type: "text", text }],
  ...(hold ? { hold } : {}),
});

interface Answer {
  run: { id: string; status: string };
  completion: { status: string; error_code?: string; error: string | null };
}

describe.skipIf(!isRoot || !parents?.memory || !parents?.pids)(
  "each run's memory and process limits (cgroup v1)",
  () => {
    describe.each(REAL_CLI_BACKENDS)("on %s", (backend) => {
      let app: RealClaudeApp;
      beforeAll(async () => {
        app = await realClaudeApp(backend, {
          AGENT_BRIDGE_SANDBOX: "on",
          AGENT_BRIDGE_RUN_MEMORY_MB: String(MEMORY_MB),
          AGENT_BRIDGE_RUN_MAX_PROCESSES: String(MAX_PROCESSES),
        });
      });
      afterAll(() => app?.close());

      /** A session whose message `prompt` runs; its answer once the run has ended. */
      const send = async (prompt: string): Promise<Answer> => {
        const session = await app.api.newSession();
        const res = await app.api.postMessage(session.id, prompt, { Accept: "application/json" });
        expect(res.status).toBe(200);
        return res.json() as Promise<Answer>;
      };

      it("reports the limits in /readyz, and runs each CLI inside its run's groups, which it cannot leave", async () => {
        const ready = (await app.api.json("/readyz")) as { sandbox: Record<string, unknown> };
        expect(ready.sandbox).toMatchObject({
          enabled: true,
          limits: {
            enabled: true,
            mechanism: "cgroup v1",
            memory_mb: MEMORY_MB,
            max_processes: MAX_PROCESSES,
          },
        });
        const prompt = `where am I ${randomUUID()}`;
        app.mock.scriptFor(
          prompt,
          bash(
            [
              "echo '== cgroup'; cat /proc/self/cgroup",
              // Root's agent (no agent user here) moving itself to the server's own group.
              `echo '== escape'; echo $$ > ${parents?.pids}/cgroup.procs 2>&1`,
              "echo '== end'",
            ].join("\n"),
          ),
          say("Done."),
        );
        const answer = await send(prompt);
        expect(answer.run.status).toBe("succeeded");
        const found = sections(commandOutput(app.mock, prompt));
        // In its own cgroup namespace the run's groups are its root; the server's are not.
        expect(found.cgroup).toMatch(/^\d+:memory:\/$/m);
        expect(found.cgroup).toMatch(/^\d+:pids:\/$/m);
        expect(found.escape).toMatch(/Read-only file system/);
        expect(await gone(groupsOf(answer.run.id))).toBe(true);
      });

      it("ends a fork bomb's run failed (process_limit), while another session's run goes on", async () => {
        const hold = holdUntilReleased();
        const otherPrompt = `meanwhile ${randomUUID()}`;
        app.mock.scriptFor(otherPrompt, bash("echo started"), say("Still here.", hold.hold));
        const other = send(otherPrompt);
        await hold.arrived;
        const bombPrompt = `bomb ${randomUUID()}`;
        app.mock.scriptFor(
          bombPrompt,
          bash("b() { [ $1 -gt 0 ] && { b $(($1 - 1)) & b $(($1 - 1)) & }; sleep 30; }; b 9"),
          say("Survived."),
        );
        const bomb = await send(bombPrompt);
        expect(bomb.run.status).toBe("failed");
        expect(bomb.completion).toMatchObject({ status: "failed", error_code: "process_limit" });
        expect(bomb.completion.error).toContain(`limit of ${MAX_PROCESSES} processes`);
        expect(await gone(groupsOf(bomb.run.id))).toBe(true);

        hold.release();
        const answer = await other;
        expect(answer.run.status).toBe("succeeded");
        expect(answer.completion.status).toBe("succeeded");
        expect(await gone(groupsOf(answer.run.id))).toBe(true);
        expect(runGroups()).toEqual([]);
        expect((await fetch(`${app.server.url}/readyz`)).status).toBe(200);
      });

      it("ends a memory hog's run failed (memory_limit)", async () => {
        const prompt = `hog ${randomUUID()}`;
        app.mock.scriptFor(prompt, bash("head -c 4G /dev/zero | tail"), say("Survived."));
        const hog = await send(prompt);
        expect(hog.run.status).toBe("failed");
        expect(hog.completion).toMatchObject({ status: "failed", error_code: "memory_limit" });
        expect(hog.completion.error).toContain(`memory limit of ${MEMORY_MB} MiB`);
        expect(await gone(groupsOf(hog.run.id))).toBe(true);
      });
    });
  },
);
