import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import { storedTranscript } from "../../src/runs/transcripts.js";
import { AGENT_USER, ensureAgentUser, isRoot } from "../support/agent-user.js";
import { createTestAppOn, httpApi, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { BACKENDS, openTestDatabase } from "../support/db.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";

// Issue 38, finding 1: with AGENT_BRIDGE_AGENT_USER the server runs as root, and the agent's HOME
// is the agent's to change. What root used to do there by path (store the CLI's transcript after
// a run, write it back before a resume, make $HOME/tmp and $HOME/.codex at each run) a symbolic
// link, a hard link or a FIFO put in the path's place turned on root's own files: a secret read
// into the stored transcript, a file of root's written over and given to the agent, a directory
// of root's chowned to the tenant, the server blocked for ever on a FIFO. Each is planted here at
// each of those paths, and the real CLI runs on: planted by the agent through its Bash tool (as
// in the issue), or between runs as the agent (its tenant's user and group); a hard link to a
// root file by the test as root, since the kernel's protected_hardlinks keeps the agent from
// making one (an agent on a machine without it could). Needs root.

/** A file's or a directory's owner, mode and content, to show it was left as it was. */
function snapshot(path: string) {
  const stat = lstatSync(path);
  return {
    uid: stat.uid,
    gid: stat.gid,
    mode: stat.mode,
    nlink: stat.isDirectory() ? undefined : stat.nlink,
    content: stat.isDirectory() ? readdirSync(path).sort() : readFileSync(path, "utf8"),
  };
}

describe.skipIf(!isRoot).each(BACKENDS)(
  "root and what the agent plants in its HOME on %s",
  (backend) => {
    let agent: { uid: number; gid: number };
    let mock: MockAnthropic;
    let ce: ClaudeEnv;
    let homes: string;
    let rootOnly: string;
    let t: TestApp;
    let server: { url: string; close(): Promise<void> };
    let api: ReturnType<typeof httpApi>;
    const logged: string[] = [];

    beforeAll(async () => {
      agent = ensureAgentUser();
      mock = await startMockAnthropic({ quiet: true });
      ce = await makeClaudeEnv(mock.url);
      // The work dir, as docs/security.md asks of one: the agent user's group may write it.
      chownSync(ce.cwd, 0, agent.gid);
      chmodSync(ce.cwd, 0o2770);
      homes = mkdtempSync(join(tmpdir(), "agent-bridge-homes-"));
      chmodSync(homes, 0o711);
      // Root's own files, on the homes' file system (a hard link cannot cross one).
      rootOnly = mkdtempSync(join(tmpdir(), "root-only-"));
      t = createTestAppOn(
        await openTestDatabase(backend),
        {
          ...ce.env,
          AGENT_BRIDGE_AGENT_USER: AGENT_USER,
          AGENT_BRIDGE_AGENT_HOMES_DIR: join(homes, "homes"),
          AGENT_BRIDGE_WORK_DIR: ce.cwd,
          AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
        },
        createLogger("warn", {}, (line) => logged.push(line)),
      );
      // The agents' HOME, as a first run makes it.
      await t.deps.homes?.identityFor(null);
      server = await listen(t.app);
      api = httpApi(server.url);
    });
    afterAll(async () => {
      await server?.close();
      await t?.close();
      await mock?.close();
      await ce?.cleanup();
      rmSync(homes, { recursive: true, force: true });
      rmSync(rootOnly, { recursive: true, force: true });
    });

    /** The agents' HOME (auth is off: one tenant, with no key). */
    const home = () => join(homes, "homes", "no-key");
    /** The tenant's own user, whose its HOME is. */
    const tenantUid = () => lstatSync(home()).uid;

    /** Runs the shell commands as the agent does: its tenant's user and group, in its HOME. */
    const asAgent = (...commands: string[]) =>
      execFileSync(
        "setpriv",
        [
          `--reuid=${tenantUid()}`,
          `--regid=${lstatSync(home()).gid}`,
          "--clear-groups",
          "sh",
          "-ec",
          commands.join("\n"),
        ],
        { env: { PATH: process.env.PATH, HOME: home() } },
      );

    /** A fresh file of root's, readable by root alone, holding a secret. */
    const rootFile = (name: string) => {
      const path = join(rootOnly, name);
      writeFileSync(path, `ROOT-SECRET-${name}\n`, { mode: 0o600 });
      return path;
    };
    /** A fresh directory of root's, for root alone, holding one file. */
    const rootDir = (name: string, file = "kept.txt") => {
      const path = join(rootOnly, name);
      mkdirSync(path, { mode: 0o700 });
      writeFileSync(join(path, file), `ROOT-SECRET-${name}\n`, { mode: 0o600 });
      return path;
    };

    /**
     * Sends `text` and waits for the run to be over; the model answers "Done." (after a Bash call
     * of `bash`, when given).
     */
    async function send(sessionId: string, text: string, bash?: string) {
      mock.script(
        ...(bash
          ? [{ blocks: [{ type: "tool_use" as const, name: "Bash", input: { command: bash } }] }]
          : []),
        { blocks: [{ type: "text", text: "Done." }] },
      );
      const res = await api.postMessage(sessionId, text, { Accept: "application/json" });
      const answer = (await res.json()) as { run: { id: string; status: string } };
      // The answer comes with the completion; the transcript is stored again once the CLI is
      // gone. A cancel of a finished run is refused (409) only once all of it is over.
      const cancel = await fetch(`${server.url}/v1/runs/${answer.run.id}/cancel`, {
        method: "POST",
      });
      expect(cancel.status).toBe(409);
      return answer;
    }

    /**
     * A session that has run once: its transcript is on disk and stored. With `workDir` (under
     * the work dir), the CLI's project directory is the session's alone.
     */
    async function sessionWithTranscript(workDir?: string) {
      if (workDir) {
        mkdirSync(workDir);
        chownSync(workDir, agent.uid, agent.gid);
        chmodSync(workDir, 0o2775);
      }
      const res = await fetch(`${server.url}/v1/sessions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(workDir ? { work_dir: workDir } : {}),
      });
      const session = (await res.json()) as { id: string };
      const first = await send(session.id, "remember this");
      expect(first.run.status, JSON.stringify(first.run)).toBe("succeeded");
      const projects = join(home(), ".claude", "projects");
      const [project] = readdirSync(projects).filter((name) =>
        readdirSync(join(projects, name)).includes(`${session.id}.jsonl`),
      );
      const projectDir = join(projects, project ?? "");
      return { id: session.id, projectDir, transcript: join(projectDir, `${session.id}.jsonl`) };
    }

    const stored = async (sessionId: string) =>
      (await storedTranscript(t.database.db, sessionId))?.toString("utf8") ?? "";
    /** The lines logged since the `from`th that hold `text`. */
    const logLines = (text: string, from = 0) =>
      logged.slice(from).filter((line) => line.includes(text));

    it("stores nothing of a root file the agent links its transcript to, and the resume writes over the link, not the file", async () => {
      const session = await sessionWithTranscript();
      const secret = rootFile("transcript-symlink");
      const before = snapshot(secret);

      // The repro: the agent points its transcript at root's file.
      const planted = await send(session.id, "go on", `ln -sfn ${secret} ${session.transcript}`);
      expect(planted.run.status).toBe("succeeded");
      expect(lstatSync(session.transcript).isSymbolicLink()).toBe(true);
      expect(await stored(session.id)).not.toContain("ROOT-SECRET");
      expect(logLines(`${session.transcript}: is a symbolic link`)).not.toEqual([]);

      // The next run resumes: the stored copy is written back in the link's place.
      expect((await send(session.id, "and again")).run.status).toBe("succeeded");
      expect(snapshot(secret)).toEqual(before);
      const restored = lstatSync(session.transcript);
      expect(restored.isFile()).toBe(true);
      expect(restored.uid).toBe(tenantUid());
      expect(await stored(session.id)).not.toContain("ROOT-SECRET");
    });

    /** After the resume `run`: the stored copy is on disk again, the only name of its file. */
    async function expectRestored(
      run: { run: { status: string } },
      session: { id: string; transcript: string },
    ) {
      expect(run.run.status).toBe("succeeded");
      expect(lstatSync(session.transcript)).toMatchObject({ uid: tenantUid(), nlink: 1 });
      expect(lstatSync(session.transcript).isFile()).toBe(true);
      expect(await stored(session.id)).toContain("go on");
      expect(await stored(session.id)).not.toContain("ROOT-SECRET");
      expect(logLines(`"error":"${session.transcript}: `)).not.toEqual([]);
    }

    it("writes the stored transcript back over a hard link to a root file in its place, which stays as it was", async () => {
      const session = await sessionWithTranscript();
      const secret = rootFile("transcript-hardlink");
      const before = snapshot(secret);
      rmSync(session.transcript);
      linkSync(secret, session.transcript);

      const run = await send(session.id, "go on");
      expect(snapshot(secret)).toEqual(before);
      await expectRestored(run, session);
    });

    it("writes the stored transcript back over a FIFO in its place, without waiting on it", async () => {
      const session = await sessionWithTranscript();
      asAgent(`rm ${session.transcript}`, `mkfifo ${session.transcript}`);

      await expectRestored(await send(session.id, "go on"), session);
    });

    it("reads nothing from, and writes nothing into, a root directory the agent links its project directory to", async () => {
      const session = await sessionWithTranscript(join(ce.cwd, "project-link"));
      // Root's directory holds a file of the transcript's name.
      const target = rootDir("project-symlink", `${session.id}.jsonl`);
      const before = snapshot(target);
      const fileBefore = snapshot(join(target, `${session.id}.jsonl`));

      await send(
        session.id,
        "go on",
        `rm -rf ${session.projectDir}; ln -s ${target} ${session.projectDir}`,
      );
      // The transcript's directory is gone for the CLI too; its next resume starts afresh.
      await send(session.id, "and again");

      expect(snapshot(target)).toEqual(before);
      expect(snapshot(join(target, `${session.id}.jsonl`))).toEqual(fileBefore);
      expect(await stored(session.id)).not.toContain("ROOT-SECRET");
      expect(
        logLines(`"could not restore the session's transcript","session_id":"${session.id}"`),
      ).toHaveLength(1);
    });

    it("makes $HOME/tmp and $HOME/.codex again, as the agent, where the agent linked them to root's directories, and leaves those as they were", async () => {
      const session = await api.newSession();
      const logsFrom = logged.length;
      const codexTarget = rootDir("codex-symlink");
      const tmpTarget = rootDir("tmp-symlink");
      const before = [codexTarget, tmpTarget].map(snapshot);
      // The variant, and the same for $HOME/tmp.
      asAgent(
        `rm -rf $HOME/.codex && ln -s ${codexTarget} $HOME/.codex`,
        `rm -rf $HOME/tmp && ln -s ${tmpTarget} $HOME/tmp`,
      );

      const run = await send(session.id, "go on");
      expect([codexTarget, tmpTarget].map(snapshot)).toEqual(before);
      expect(run.run.status).toBe("succeeded");
      for (const name of ["tmp", ".codex"]) {
        expect(lstatSync(join(home(), name)), name).toMatchObject({ uid: tenantUid() });
        expect(lstatSync(join(home(), name)).isDirectory(), name).toBe(true);
        expect(logLines(`"path":"${join(home(), name)}"`, logsFrom), name).toHaveLength(1);
      }
    });

    it("makes $HOME/tmp and $HOME/.codex again where a FIFO and a hard link to a root file stand, and the run goes on", async () => {
      const session = await api.newSession();
      const logsFrom = logged.length;
      const target = rootFile("codex-hardlink");
      const before = snapshot(target);
      asAgent("rm -rf $HOME/tmp && mkfifo $HOME/tmp", "rm -rf $HOME/.codex");
      linkSync(target, join(home(), ".codex"));

      const run = await send(session.id, "go on");
      expect(snapshot(target)).toEqual(before);
      expect(run.run.status).toBe("succeeded");
      for (const name of ["tmp", ".codex"]) {
        expect(lstatSync(join(home(), name)), name).toMatchObject({ uid: tenantUid() });
        expect(lstatSync(join(home(), name)).isDirectory(), name).toBe(true);
        expect(logLines(`"path":"${join(home(), name)}"`, logsFrom), name).toHaveLength(1);
      }
    });
  },
);
