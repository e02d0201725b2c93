import { randomUUID } from "node:crypto";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateKey } from "../../src/auth/keys.js";
import { AGENT_USER, ensureAgentUser, isRoot } from "../support/agent-user.js";
import { CLAUDE_BIN, type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { serverDatabases } from "../support/db.js";
import {
  holdUntilReleased,
  type MockAnthropic,
  type MockTurn,
  startMockAnthropic,
} from "../support/mock-anthropic.js";
import { commandOutput, sections } from "../support/probe.js";
import { type ServerProcess, startServer } from "../support/server.js";

// Each run's CLI, and everything it starts, runs in a bubblewrap sandbox of its own
// (src/process/sandbox.ts). The real CLI, in bypass mode against the mock Messages API, plays a
// hijacked agent: its own Bash commands try what issue 38 found, and what each one reaches (or is
// refused) is what it printed, checked from outside where it can be. Every one of these succeeds
// without the sandbox (AGENT_BRIDGE_SANDBOX=off). Needs root (CI runs as root), as the agent user
// does, and bubblewrap (.ci/run installs it).

const CLI = basename(realpathSync(CLAUDE_BIN));

const bash = (command: string): MockTurn => ({
  blocks: [{ type: "tool_use", name: "Bash", input: { command } }],
});
const say = (text: string, hold?: () => Promise<void>): MockTurn => ({
  blocks: [{ type: "text", text }],
  ...(hold ? { hold } : {}),
});

/** A process's arguments, as the host sees them; undefined once it is gone. */
function argvOf(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return undefined;
  }
}

/** The host's processes whose arguments pass `test`. */
function pidsWhere(test: (argv: string[]) => boolean): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      const argv = argvOf(pid);
      return argv !== undefined && test(argv);
    });
}

/** The host pid of the running CLI of a session. */
function cliOf(sessionId: string): number {
  const [pid] = pidsWhere(
    (argv) => basename(argv[0] ?? "") === CLI && argv.some((a) => a.includes(sessionId)),
  );
  if (pid === undefined) throw new Error(`no CLI runs for session ${sessionId}`);
  return pid;
}

/**
 * The sockets the CLI `pid` listens on for messages, as root reaches them: in `$TMPDIR/cc-socks/`
 * when its TMPDIR's parent is its user's alone (a tenant's HOME), else in `/tmp/cc-socks-<uid>/`.
 */
function socketsOf(pid: number): string[] {
  const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
  const tmp = env.find((entry) => entry.startsWith("TMPDIR="))?.slice("TMPDIR=".length);
  const dirs = [
    `/tmp/cc-socks-${statSync(`/proc/${pid}`).uid}`,
    ...(tmp ? [join(tmp, "cc-socks")] : []),
  ];
  return dirs.flatMap((dir) => {
    const seen = `/proc/${pid}/root${dir}`;
    return existsSync(seen) ? readdirSync(seen).map((name) => join(seen, name)) : [];
  });
}

/** Whether the process runs: it exists and is more than a zombie (nothing may reap it here). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !["Z", "X"].includes(stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3));
  } catch {
    return false;
  }
}

/** Waits, a bounded while, until the process no longer runs; whether it stopped. */
async function stops(pid: number, withinMs = 10_000): Promise<boolean> {
  const until = Date.now() + withinMs;
  while (alive(pid)) {
    if (Date.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return true;
}

/** A socket's device and inode: which socket it is, whatever path shows it. */
const identity = (path: string) => {
  const s = statSync(path);
  return `${s.dev} ${s.ino}`;
};

describe.skipIf(!isRoot)("each run in a sandbox of its own (AGENT_BRIDGE_SANDBOX=on)", () => {
  const dbs = serverDatabases();
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let agent: { uid: number; gid: number };
  let root: string;
  let rootA: string;
  let rootB: string;
  const otherCode = `other-tenant-code-${randomUUID()}`;

  beforeAll(async () => {
    agent = ensureAgentUser();
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    // Two allowed roots, each a tenant's work dir, made as docs/security.md asks: the agent user's.
    root = realpathSync(mkdtempSync(join(tmpdir(), "agent-bridge-sandbox-")));
    chmodSync(root, 0o711);
    rootA = join(root, "a");
    rootB = join(root, "b");
    for (const dir of [rootA, rootB]) {
      mkdirSync(dir);
      chownSync(dir, 0, agent.gid);
      chmodSync(dir, 0o2770);
    }
    // The other tenant's work, which its agent can read and write outside a sandbox.
    writeFileSync(join(rootB, "code.txt"), otherCode, { mode: 0o664 });
  });
  afterAll(async () => {
    await dbs.cleanup();
    await mock?.close();
    await ce?.cleanup();
    rmSync(root, { recursive: true, force: true });
  });

  /** A bridge server on `db` with the sandbox on, its runs' /tmp capped at 8 MB. */
  const serve = (db: Record<string, string>, dataDir: string, env: Record<string, string>) =>
    startServer({
      ...ce.env,
      ...db,
      AGENT_BRIDGE_DATA_DIR: dataDir,
      AGENT_BRIDGE_AUTH: "keys",
      AGENT_BRIDGE_SANDBOX: "on",
      AGENT_BRIDGE_SANDBOX_TMP_MB: "8",
      AGENT_BRIDGE_ALLOWED_ROOTS: `${rootA},${rootB}`,
      AGENT_BRIDGE_WORK_DIR: rootA,
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
      ...env,
    });

  /** The calls a key makes to `server`. */
  const client = (server: ServerProcess) => {
    const post = async (key: string, path: string, body: unknown) => {
      const res = await fetch(`${server.url}${path}`, {
        method: "POST",
        headers: {
          Authorization: `Bearer ${key}`,
          "Content-Type": "application/json",
          Accept: "application/json",
        },
        body: JSON.stringify(body),
      });
      expect(res.status, await res.clone().text()).toBeLessThan(300);
      return res.json();
    };
    /** A session of `key` whose first message is `prompt`; `done` is its run, once ended. */
    const start = async (key: string, prompt: string, workDir?: string) => {
      const session = await post(key, "/v1/sessions", workDir ? { work_dir: workDir } : {});
      const done: Promise<{ run: { status: string } }> = post(
        key,
        `/v1/sessions/${session.id}/messages`,
        { text: prompt },
      );
      return { sessionId: session.id as string, done };
    };
    /**
     * Has the agent of `key` run `lines` as one Bash command; the sections of what it printed,
     * once its run succeeded.
     */
    const probe = async (key: string, lines: string[], workDir?: string) => {
      const prompt = `look around ${randomUUID()}`;
      mock.scriptFor(prompt, bash([...lines, "echo '== end'"].join("\n")), say("Done."));
      const { done } = await start(key, prompt, workDir);
      expect((await done).run.status).toBe("succeeded");
      const output = commandOutput(mock, prompt);
      const found = sections(output);
      expect(found.end, output).toBeDefined(); // the command ran to its end
      return found;
    };
    /** A run of `key` held in its second model request, after its Bash `command` ran. */
    const held = async (key: string, command: string, workDir?: string) => {
      const prompt = `hold on ${randomUUID()}`;
      const hold = holdUntilReleased();
      mock.scriptFor(prompt, bash(command), say("Released.", hold.hold));
      const run = await start(key, prompt, workDir);
      await hold.arrived;
      return { ...run, release: hold.release };
    };
    return { post, start, probe, held };
  };

  for (const [backend, database] of dbs.targets) {
    describe(`agents of two tenants as the agent user, on ${backend}`, () => {
      const adminKey = generateKey();
      let server: ServerProcess;
      let api: ReturnType<typeof client>;
      let dataDir: string;
      let a: { id: string; key: string };
      let b: { id: string; key: string };
      const secret = `server-secret-${randomUUID()}`;

      beforeAll(async () => {
        const db = await database();
        // The embedded database's, or one for the homes alone; the agents pass through it.
        dataDir = db.AGENT_BRIDGE_DATA_DIR ?? mkdtempSync(join(tmpdir(), "agent-bridge-homes-"));
        chmodSync(dataDir, 0o711);
        // Something of the server's any user could read, were it visible.
        writeFileSync(join(dataDir, "server-secret.txt"), secret, { mode: 0o644 });
        server = await serve(db, dataDir, {
          AGENT_BRIDGE_API_KEY: adminKey,
          AGENT_BRIDGE_AGENT_USER: AGENT_USER,
        });
        api = client(server);
        // Tenants that may run in bypass mode, each in its own allowed root.
        const tenant = (name: string, workRoot: string) =>
          api.post(adminKey, "/v1/keys", {
            name,
            permission_modes: ["bypassPermissions"],
            work_roots: [workRoot],
          });
        [a, b] = await Promise.all([tenant("tenant-a", rootA), tenant("tenant-b", rootB)]);
      });
      afterAll(async () => {
        await server?.stop();
        rmSync(dataDir, { recursive: true, force: true });
      });

      it("ends a setsid survivor of the agent's Bash command with its run", async () => {
        const name = `survivor-${randomUUID()}`;
        const run = await api.held(
          a.key,
          // The command ends once the survivor runs (its fork may not have exec'd it yet before).
          `setsid nohup sh -c 'touch /tmp/${name}; while true; do sleep 1; done' ${name} >/dev/null 2>&1 & until [ -e /tmp/${name} ]; do :; done; echo started`,
        );
        // By its own argument (it may still be setsid or nohup, which exec it under the same pid).
        const [survivor] = pidsWhere((argv) => argv.includes(name));
        expect(survivor, "the survivor runs while its run does").toBeDefined();
        try {
          run.release();
          expect((await run.done).run.status).toBe("succeeded");
          expect(await stops(survivor as number)).toBe(true);
        } finally {
          if (alive(survivor as number)) process.kill(survivor as number, "SIGKILL");
        }
      });

      it("reaches no port of the host, no address outside and no host socket; through the gateway's proxy, what its key's egress list names", async () => {
        const web = createHttpServer((_req, res) => res.end("the host's web server"));
        await new Promise<void>((resolve) => web.listen(0, "127.0.0.1", resolve));
        const port = (web.address() as AddressInfo).port;
        const url = `http://127.0.0.1:${port}/`;
        const setEgress = async (egress: string[]) => {
          const res = await fetch(`${server.url}/v1/keys/${a.id}`, {
            method: "PATCH",
            headers: { Authorization: `Bearer ${adminKey}`, "Content-Type": "application/json" },
            body: JSON.stringify({ egress }),
          });
          expect(res.status).toBe(200);
        };
        // `--noproxy ''`: through the proxy even to 127.0.0.1, which NO_PROXY keeps for the API.
        const lines = [
          `echo '== direct'; curl -sS --noproxy '*' --max-time 10 ${url} 2>&1; echo " exit=$?"`,
          `echo '== outside'; curl -sS --noproxy '*' --max-time 10 http://192.0.2.1/ 2>&1; echo " exit=$?"`,
          `echo '== proxied'; curl -sS --noproxy '' ${url} 2>&1; echo " exit=$?"`,
          "echo '== run'; ls -A /run",
        ];
        try {
          const refused = await api.probe(a.key, lines);
          expect(refused.direct).toMatch(/Couldn't connect to server[\s\S]* exit=7/);
          expect(refused.outside).toMatch(/exit=7/);
          expect(refused.proxied).toContain(
            `127.0.0.1:${port} is not in the egress list of the run's API key`,
          );
          expect(refused.run?.trim()).toBe("agent-bridge");
          await setEgress([`127.0.0.1:${port}`]);
          const allowed = await api.probe(a.key, lines);
          expect(allowed.proxied?.trim()).toBe("the host's web server exit=0");
          // Only through the proxy: directly, the host is as far away as before.
          expect(allowed.direct).toMatch(/exit=7/);
        } finally {
          await setEgress([]);
          web.close();
        }
      });

      it("sees only its own run's processes, and cannot kill another tenant's CLI", async () => {
        const other = await api.held(b.key, "echo waiting", rootB);
        const otherCli = cliOf(other.sessionId);
        try {
          const found = await api.probe(a.key, [
            "echo '== ps'; ps -eo pid,args",
            "echo '== proc'; ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo",
            `echo '== kill'; kill -9 ${otherCli} 2>&1; echo "kill=$?"`,
          ]);
          expect(found.ps).not.toContain(other.sessionId);
          expect(found.proc?.split(" ")).not.toContain(String(otherCli));
          expect(found.kill).toMatch(/No such process/);
          expect(found.kill).toContain("kill=1");
          expect(alive(otherCli)).toBe(true);
        } finally {
          other.release();
        }
        expect((await other.done).run.status).toBe("succeeded");
      });

      it("writes its work dir and HOME, and neither the system nor another tenant's work dir", async () => {
        const mark = `probe-${randomUUID()}`;
        const homeA = join(dataDir, "homes", a.id);
        try {
          const found = await api.probe(a.key, [
            `echo '== system'; touch /etc/${mark} 2>&1`,
            `echo '== other root'; ls -A ${rootB}; cat ${join(rootB, "code.txt")} 2>&1; touch ${join(rootB, mark)} 2>&1`,
            `echo '== own'; touch ${join(rootA, mark)} "$HOME/${mark}" && echo wrote`,
          ]);
          expect(found.system).toMatch(/Read-only file system/);
          // Nothing of the other tenant's work dir, and its touch fails (a root the run's own
          // /dev/shm hides, as here, is not there at all; elsewhere an empty read-only directory).
          expect(found["other root"]).toMatch(
            /code\.txt: No such file or directory\n.*cannot touch/,
          );
          expect(found["other root"]).not.toContain(otherCode);
          expect(found.own).toContain("wrote");
          expect(existsSync(`/etc/${mark}`)).toBe(false);
          expect(existsSync(join(rootB, mark))).toBe(false);
          expect(existsSync(join(rootA, mark))).toBe(true);
          expect(existsSync(join(homeA, mark))).toBe(true);
        } finally {
          for (const file of [`/etc/${mark}`, join(rootB, mark), join(rootA, mark)])
            rmSync(file, { force: true });
        }
      });

      it("reads neither the server's data dir and environment nor another tenant's HOME", async () => {
        // The other tenant has run, so its HOME holds its transcript.
        const first = await api.start(b.key, `remember ${randomUUID()}`, rootB);
        expect((await first.done).run.status).toBe("succeeded");
        const homes = join(dataDir, "homes");
        const found = await api.probe(a.key, [
          `echo '== data dir'; ls -a ${dataDir}; cat ${join(dataDir, "server-secret.txt")} 2>&1`,
          `echo '== environ'; cat /proc/${server.child.pid}/environ 2>&1`,
          `echo '== homes'; ls -a ${homes}`,
          `echo '== other home'; ls -a ${join(homes, b.id)} 2>&1`,
        ]);
        expect(found["data dir"]).toMatch(/No such file or directory/);
        expect(found["data dir"]).not.toContain("pgdata");
        expect(found.environ).toMatch(/No such file or directory/);
        // Its own HOME alone, and no sign of the other's.
        expect(found.homes?.split("\n").filter(Boolean).sort()).toEqual([".", "..", a.id].sort());
        expect(found["other home"]).toMatch(/No such file or directory/);
        const everything = JSON.stringify(found);
        for (const leak of [secret, adminKey, b.key, "AGENT_BRIDGE_API_KEY"])
          expect(everything).not.toContain(leak);
      });

      it("has a /tmp of its own: another run's files and its CLI's socket are not in it", async () => {
        const mark = `from-b-${randomUUID()}`;
        const other = await api.held(b.key, `echo ${mark} > /tmp/${mark}; echo wrote`, rootB);
        try {
          const [otherSocket] = socketsOf(cliOf(other.sessionId)).map(identity);
          expect(otherSocket, "the other CLI's socket").toBeDefined();
          const found = await api.probe(a.key, [
            `echo '== tmp'; ls -a /tmp; cat /tmp/${mark} 2>&1`,
            `echo '== sockets'; stat -c '%d %i' /tmp/cc-socks-*/* "$TMPDIR"/cc-socks/* 2>/dev/null`,
          ]);
          expect(found.tmp).toMatch(/No such file or directory/);
          // Device numbers in stat's decimal, as Node gives them.
          const seen = (found.sockets ?? "").split("\n").filter(Boolean);
          expect(seen.length, "its own CLI's socket").toBeGreaterThan(0);
          expect(seen).not.toContain(otherSocket);
          // Neither run's /tmp is the host's.
          expect(existsSync(`/tmp/${mark}`)).toBe(false);
        } finally {
          other.release();
          rmSync(`/tmp/${mark}`, { force: true });
        }
        expect((await other.done).run.status).toBe("succeeded");
      });

      it("fills its /tmp and /dev/shm up to their cap (ENOSPC), and its run goes on", async () => {
        const mark = `fill-${randomUUID()}`;
        const files = [`/tmp/${mark}`, `/dev/shm/${mark}`];
        try {
          const found = await api.probe(a.key, [
            `echo '== tmp'; dd if=/dev/zero of=/tmp/${mark} bs=1M count=16 2>&1; echo "dd=$?"`,
            `echo '== shm'; dd if=/dev/zero of=/dev/shm/${mark} bs=1M count=16 2>&1; echo "dd=$?"`,
          ]);
          for (const where of [found.tmp, found.shm]) {
            expect(where).toMatch(/No space left on device/);
            expect(where).toContain("dd=1");
            expect(where).toMatch(/^8388608 bytes/m);
          }
          for (const file of files) expect(existsSync(file)).toBe(false);
        } finally {
          for (const file of files) rmSync(file, { force: true });
        }
      });
    });
  }

  // Without an agent user the agent is the server's user, here root: what keeps it in is the
  // sandbox alone, with no capability left to undo it. Once, on the embedded database, whose files
  // root could otherwise read.
  describe("the agent of a server without an agent user (root), on pglite", () => {
    const adminKey = generateKey();
    let server: ServerProcess;
    let api: ReturnType<typeof client>;
    let dataDir: string;

    beforeAll(async () => {
      const db = await dbs.embedded();
      dataDir = db.AGENT_BRIDGE_DATA_DIR as string;
      server = await serve(db, dataDir, { AGENT_BRIDGE_API_KEY: adminKey });
      api = client(server);
    });
    afterAll(() => server?.stop());

    it("is root without a capability: writes neither the system nor another root, reads not the data dir, unmounts nothing", async () => {
      const mark = `probe-${randomUUID()}`;
      try {
        const found = await api.probe(adminKey, [
          "echo '== id'; id -u; grep CapEff /proc/self/status",
          `echo '== system'; touch /etc/${mark} 2>&1`,
          `echo '== other root'; ls -A ${rootB}; cat ${join(rootB, "code.txt")} 2>&1; touch ${join(rootB, mark)} 2>&1`,
          `echo '== data dir'; ls -a ${dataDir}; ls ${join(dataDir, "pgdata")} 2>&1`,
          `echo '== environ'; cat /proc/${server.child.pid}/environ 2>&1`,
          // What hides the data dir here: the run's own /dev/shm over the host's, which holds it.
          `echo '== unmount'; umount /dev/shm 2>&1; ls ${join(dataDir, "pgdata")} 2>&1`,
        ]);
        expect(found.id).toMatch(/^0\nCapEff:\s*0+\n/);
        expect(found.system).toMatch(/Read-only file system/);
        expect(found["other root"]).toMatch(/code\.txt: No such file or directory\n.*cannot touch/);
        expect(found["other root"]).not.toContain(otherCode);
        expect(found["data dir"]).toMatch(/No such file or directory/);
        expect(found.environ).toMatch(/No such file or directory/);
        expect(found.unmount).toMatch(/must be superuser|not permitted/);
        expect(found.unmount).toMatch(/No such file or directory/);
        expect(existsSync(`/etc/${mark}`)).toBe(false);
        expect(existsSync(join(rootB, mark))).toBe(false);
        expect(JSON.stringify(found)).not.toContain(adminKey);
      } finally {
        for (const file of [`/etc/${mark}`, join(rootB, mark)]) rmSync(file, { force: true });
      }
    });
  });
});
