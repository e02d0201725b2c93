import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateKey } from "../../src/auth/keys.js";
import { commandAs } from "../../src/process/agent-user.js";
import { AGENT_USER, ensureAgentUser, isRoot, TENANT_UID_BASE } from "../support/agent-user.js";
import { CLAUDE_BIN, type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { CODEX_BIN, type CodexEnv, makeCodexEnv } from "../support/codex-env.js";
import { serverDatabases } from "../support/db.js";
import {
  holdUntilReleased,
  type MockAnthropic,
  startMockAnthropic,
  toolResultText,
} from "../support/mock-anthropic.js";
import { callOutput, type MockOpenAI, shellCall, startMockOpenAI } from "../support/mock-openai.js";
import { sections } from "../support/probe.js";
import { type ServerProcess, startServer } from "../support/server.js";

// A tenant's agent runs arbitrary shell commands. With AGENT_BRIDGE_AGENT_USER the server runs
// each tenant's CLIs as a user and group of that tenant's own: the real CLI, in bypass mode, is
// asked to read the server's environment, its database files and another tenant's HOME, and to
// signal another tenant's running CLI, and the operating system refuses each. Needs root (CI runs as root), as the feature itself does. The runs' sandbox
// is off here, so that this shows the agent user's boundary alone: with it, the same reads find
// nothing to refuse (test/process/sandbox.real.test.ts).

/** The pid of the process whose HOME is `home` (read as root). */
function processWithHome(home: string): number {
  for (const pid of readdirSync("/proc").filter((e) => /^\d+$/.test(e))) {
    try {
      if (readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`HOME=${home}`))
        return Number(pid);
    } catch {
      // Gone meanwhile.
    }
  }
  throw new Error(`no process runs with HOME=${home}`);
}

/**
 * Whether the agent user can run `bin` where this checkout is: one under a directory private to
 * root (a fresh clone in a 0700 temp dir) is out of its reach, as docs/security.md says it must not be.
 */
function agentUserCanRun(bin: string): boolean {
  try {
    const { uid, gid } = ensureAgentUser();
    // As the server starts its CLIs (setpriv itself may still pass where they then cannot).
    const [file, args] = commandAs({ uid, gid, groups: [gid] }, bin, ["--version"]);
    execFileSync(file, args, { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

const codexReachable = isRoot && agentUserCanRun(CODEX_BIN);
// Without the sandbox, which shows the CLI's installation wherever it is, the agent user must
// reach it on the host: not so in a fresh clone under a temp dir of root's (0700).
const claudeReachable = isRoot && agentUserCanRun(CLAUDE_BIN);

describe.skipIf(!claudeReachable)("agents run as another OS user (AGENT_BRIDGE_AGENT_USER)", () => {
  const dbs = serverDatabases();
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let openai: MockOpenAI;
  let codex: CodexEnv;
  let agent: { uid: number; gid: number };

  beforeAll(async () => {
    agent = ensureAgentUser();
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    openai = await startMockOpenAI({ quiet: true });
    // The operator's codex set-up: a CODEX_HOME with the provider's config, which only the
    // server's user can read (mkdtemp makes it 0700).
    codex = await makeCodexEnv(openai.url);
    // The work dir, as docs/security.md asks of one: group-writable by the agent user's group.
    chownSync(ce.cwd, 0, agent.gid);
    chmodSync(ce.cwd, 0o2770);
  });
  afterAll(async () => {
    await dbs.cleanup();
    await mock?.close();
    await ce?.cleanup();
    await openai?.close();
    await codex?.cleanup();
  });

  for (const [backend, database] of dbs.targets) {
    describe(backend, () => {
      const adminKey = generateKey();
      let server: ServerProcess;
      let dataDir: string;

      beforeAll(async () => {
        const db = await database();
        // The embedded database's, or one for the homes alone.
        dataDir = db.AGENT_BRIDGE_DATA_DIR ?? mkdtempSync(join(tmpdir(), "agent-bridge-homes-"));
        // As an operator's data dir would be: the agents may pass through it to their homes.
        chmodSync(dataDir, 0o711);
        server = await startServer({
          ...ce.env,
          ...db,
          AGENT_BRIDGE_DATA_DIR: dataDir,
          AGENT_BRIDGE_AUTH: "keys",
          AGENT_BRIDGE_API_KEY: adminKey,
          AGENT_BRIDGE_AGENT_USER: AGENT_USER,
          AGENT_BRIDGE_SANDBOX: "off",
          AGENT_BRIDGE_WORK_DIR: ce.cwd,
          AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
          ...(codexReachable
            ? {
                AGENT_BRIDGE_AGENTS: "claude,codex",
                CODEX_HOME: codex.codexHome,
                OPENAI_API_KEY: codex.env.OPENAI_API_KEY ?? "",
                AGENT_BRIDGE_CODEX_BASE_URL: codex.env.AGENT_BRIDGE_CODEX_BASE_URL ?? "",
              }
            : {}),
        });
      });
      afterAll(async () => {
        await server?.stop();
        rmSync(dataDir, { recursive: true, force: true });
      });

      const call = async (key: string, path: string, body?: unknown) => {
        const res = await fetch(`${server.url}${path}`, {
          method: "POST",
          headers: {
            Authorization: `Bearer ${key}`,
            "Content-Type": "application/json",
            Accept: "application/json",
          },
          body: JSON.stringify(body ?? {}),
        });
        expect(res.status, await res.clone().text()).toBeLessThan(300);
        return res.json();
      };
      const send = async (key: string, text: string, agentName = "claude") => {
        // The server's default mode (bypass) is the admin's; another key asks for less.
        const session = await call(key, "/v1/sessions", {
          agent: agentName,
          ...(key === adminKey ? {} : { permission_mode: "acceptEdits" }),
        });
        return call(key, `/v1/sessions/${session.id}/messages`, { text });
      };

      it("cannot read the server's environment, its database, another tenant's HOME or processes, nor signal them", async () => {
        // Another tenant's agent has run (its HOME holds a transcript) and is running again,
        // waiting for its model's answer.
        const other = await call(adminKey, "/v1/keys", { name: "other-tenant" });
        mock.script({ blocks: [{ type: "text", text: "noted" }] });
        expect((await send(other.key, "remember this")).run.status).toBe("succeeded");
        const otherHome = join(dataDir, "homes", other.id);
        expect(readdirSync(join(otherHome, ".claude", "projects"), { recursive: true })).toEqual(
          expect.arrayContaining([expect.stringMatching(/\.jsonl$/)]),
        );
        const held = holdUntilReleased();
        mock.script({ blocks: [{ type: "text", text: "still here" }], hold: held.hold });
        const otherRun = send(other.key, "wait a moment");
        await held.arrived;
        const otherCli = processWithHome(otherHome);
        // One tenant is one user: its second session's CLI runs as the user that owns what the
        // first one left in the HOME.
        const otherUid = statSync(`/proc/${otherCli}`).uid;
        expect(otherUid).toBeGreaterThan(TENANT_UID_BASE);
        expect(statSync(join(otherHome, ".claude.json")).uid).toBe(otherUid);

        const probe = [
          "echo '== id'; id",
          `echo '== environ'; cat /proc/${server.child.pid}/environ 2>&1`,
          `echo '== other process'; cat /proc/${otherCli}/environ 2>&1`,
          `echo '== signal'; kill -s TERM ${otherCli} 2>&1`,
          'echo \'== mine\'; echo mine > "$HOME/mine.txt" && echo "$HOME"',
          ...(backend === "pglite" ? [`echo '== pgdata'; ls ${join(dataDir, "pgdata")} 2>&1`] : []),
          `echo '== homes'; ls ${join(dataDir, "homes")} 2>&1`,
          `echo '== other home'; ls -a ${otherHome} 2>&1`,
          `echo '== other transcript'; cat ${join(otherHome, ".claude.json")} 2>&1`,
          "echo '== privileges'; grep NoNewPrivs /proc/self/status",
          "echo '== end'",
        ].join("; ");
        mock.script(
          { blocks: [{ type: "tool_use", name: "Bash", input: { command: probe } }] },
          { blocks: [{ type: "text", text: "That is what I found." }] },
        );
        const answer = await send(adminKey, "look around");
        held.release();
        expect((await otherRun).run.status).toBe("succeeded");
        expect(answer.run.status).toBe("succeeded");

        const output = mock.mainRequests().map(toolResultText).join("\n");
        const found = sections(output);
        expect(found.end, output).toBeDefined(); // the command really ran to its end
        // A user and group of its tenant's, not the agent user's nor the other tenant's; the
        // agent user's group (the work dirs') a supplementary one.
        const uid = Number(/uid=(\d+)/.exec(found.id ?? "")?.[1]);
        expect(uid).toBeGreaterThanOrEqual(TENANT_UID_BASE);
        expect(uid).not.toBe(otherUid);
        expect(Number(/gid=(\d+)/.exec(found.id ?? "")?.[1])).toBeGreaterThanOrEqual(2_000_000_000);
        expect(found.id).toMatch(new RegExp(`groups=.*\\b${agent.gid}\\b`));
        const denied = ["environ", "other process", "homes", "other home", "other transcript"];
        if (backend === "pglite") denied.push("pgdata");
        for (const name of denied) expect(found[name], name).toMatch(/Permission denied/);
        // The kernel lets a process signal only those of its own user: the other tenant's CLI
        // got no SIGTERM (its run went on to succeed, above).
        expect(found.signal).toMatch(/Operation not permitted/);
        // What it writes in its HOME is its own user's.
        const home = (found.mine ?? "").trim();
        expect(home).toMatch(/\/homes\//);
        expect(statSync(join(home, "mine.txt")).uid).toBe(uid);
        // set-uid programs (sudo, su) cannot give it anything back.
        expect(found.privileges).toMatch(/NoNewPrivs:\s*1/);
        for (const text of [output, JSON.stringify(answer)]) {
          expect(text).not.toContain(adminKey);
          expect(text).not.toContain(other.key);
          expect(text).not.toContain("AGENT_BRIDGE_API_KEY");
        }
      });

      // The OS keeps tenants apart whatever the database: once is enough.
      it.runIf(backend === "pglite" && codexReachable)(
        "runs codex with a CODEX_HOME in the tenant's HOME: the operator's config applies, and another tenant cannot read its threads",
        async () => {
          const other = await call(adminKey, "/v1/keys", { name: "other-codex-tenant" });
          openai.script({ output: [{ type: "message", text: "noted" }] });
          const first = await send(other.key, "remember this", "codex");
          // It reached the mock: the operator's provider config was copied in and read.
          expect(first.run.status, JSON.stringify(first)).toBe("succeeded");
          const otherCodexHome = join(dataDir, "homes", other.id, ".codex");
          expect(readdirSync(join(otherCodexHome, "sessions"), { recursive: true })).toEqual(
            expect.arrayContaining([expect.stringMatching(/\.jsonl$/)]),
          );
          // Nothing of the tenant's lands in the operator's CODEX_HOME.
          expect(readdirSync(codex.codexHome)).not.toContain("sessions");

          const probe = [
            "echo '== id'; id",
            `echo '== other threads'; ls -R ${otherCodexHome} 2>&1`,
            `echo '== operator codex home'; ls ${codex.codexHome} 2>&1`,
            "echo '== end'",
          ].join("; ");
          openai.script(
            { output: [shellCall(probe, "call_probe")] },
            { output: [{ type: "message", text: "That is what I found." }] },
          );
          const answer = await send(adminKey, "look around", "codex");
          expect(answer.run.status, JSON.stringify(answer)).toBe("succeeded");
          const output = callOutput(openai.responsesRequests().at(-1), "call_probe") ?? "";
          const found = sections(output);
          expect(found.end, output).toBeDefined();
          expect(Number(/uid=(\d+)/.exec(found.id ?? "")?.[1])).toBeGreaterThanOrEqual(
            TENANT_UID_BASE,
          );
          expect(found["other threads"]).toMatch(/Permission denied/);
          expect(found["operator codex home"]).toMatch(/Permission denied/);
        },
      );
    });
  }
});
