import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groupAlive } from "../../src/process/groups.js";
import {
  createHook,
  deliver,
  getRun,
  isFinished,
  type Receiver,
  startReceiver,
  until,
} from "../hooks/support.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { type Cleanups, undo } from "../support/cleanups.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { clusterDatabase, follow, groupGone, instance, post } from "../support/instances.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";
import { type ReverseProxy, startProxy } from "../support/proxy.js";
import type { ServerProcess } from "../support/server.js";
import { type Frame, wire } from "../support/sse.js";
import { result, systemInit, textDelta } from "../support/stream-json-lines.js";

// Issue 15's end-to-end tests: three real server processes (A, B, C) on one Postgres database,
// behind the README's nginx ("Scaling out", round-robin, no affinity), used through the proxy
// and directly. The fake CLI holds each run until the test writes its `go` file.

const cleanups: Cleanups = [];
afterAll(async () => {
  await undo(cleanups);
});

const statusOf = (frames: Frame[]) =>
  frames.filter((f) => f.event === "completion").map((f) => (f.data as { status: string }).status);
const textOf = (frames: Frame[]) =>
  frames
    .filter((f) => f.event === "text_delta")
    .map((f) => (f.data as { text: string }).text)
    .join("");

async function newSession(url: string): Promise<string> {
  const res = await post(url, "/v1/sessions", {});
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

/** A message posted to the instance at `url`, answered at once (202) with its run. */
async function startRun(url: string, sessionId: string): Promise<string> {
  const res = await post(url, `/v1/sessions/${sessionId}/messages`, { text: "work" });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

const LEASE = { AGENT_BRIDGE_LEASE_SECONDS: "6", AGENT_BRIDGE_LEASE_RENEW_SECONDS: "1" };

describe.skipIf(!process.env.TEST_DATABASE_URL)("three instances behind nginx", () => {
  let fake: FakeCli;
  let env: Record<string, string>;
  let a: ServerProcess;
  let b: ServerProcess;
  let c: ServerProcess;
  let proxy: ReverseProxy;
  let sql: postgres.Sql;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    const url = await clusterDatabase(cleanups);
    fake = await fakeCli({ steps: [] });
    cleanups.push(fake.cleanup);
    env = {
      DATABASE_URL: url,
      ...fake.bridgeEnv,
      ...LEASE,
      AGENT_BRIDGE_SCHEDULE_TICK_MS: "200",
      AGENT_BRIDGE_CALLBACK_POLL_MS: "100",
    };
    // All at once on the empty database: they take turns creating its tables.
    [a, b, c] = await Promise.all([
      instance(cleanups, env),
      instance(cleanups, env),
      instance(cleanups, env),
    ]);
    proxy = await startProxy([a.url, b.url, c.url]);
    cleanups.push(proxy.stop);
    sql = postgres(url, { max: 1, onnotice: () => {} });
    cleanups.push(() => sql.end());
    cleanups.push(async () => {
      for (const r of receivers) await r.close();
    });
  });

  /** Runs of the next starts hold (after saying `texts`) until `release`; `held(n)`: n holding. */
  async function holding(name: string, texts = ["working"]) {
    const go = join(fake.dir, `go-${name}`);
    await fake.setScenario({
      steps: [
        { emit: systemInit() },
        ...texts.map((text) => ({ emit: textDelta("msg_1", 0, text) })),
        { mark: name },
        { waitFile: go },
        { emit: textDelta("msg_1", 0, "world.") },
        { emit: result({ result: `${texts.join("")}world.` }) },
      ],
    });
    const mark = JSON.stringify({ mark: name });
    return {
      release: () => writeFile(go, ""),
      held: (n = 1) =>
        until(async () => (await markCount(mark)) >= n, 60_000, `${n} CLIs at ${name}`),
    };
  }
  const markCount = async (line: string) =>
    (await readFile(join(fake.dir, "record.ndjson"), "utf8")).split("\n").filter((l) => l === line)
      .length;

  /** The pid of the fake CLI that runs the session's run (its process group). */
  async function cliOf(sessionId: string): Promise<number> {
    const starts = (await fake.invocations()).filter((i) => i.args.includes(sessionId));
    expect(starts).toHaveLength(1);
    return starts[0]?.pid as number;
  }

  /** The pid of the server process that owns the run. */
  async function ownerPid(runId: string): Promise<number | undefined> {
    const [row] = await sql<{ pid: number }[]>`
      select i.pid from runs r join instances i on i.id = r.instance_id where r.id = ${runId}`;
    return row?.pid;
  }

  const requestsTo = (server: ServerProcess, path: string) =>
    server
      .output()
      .split("\n")
      .filter((l) => l.includes('"msg":"request"') && l.includes(`"path":"${path}"`));

  it("a run on A followed from B, C and through the proxy: the same ids in order, one completion, the text whole", async () => {
    const cli = await holding("follow", ["Hello, ", "whole "]);
    const sessionId = await newSession(proxy.url);
    const runId = await startRun(a.url, sessionId);
    expect(await ownerPid(runId)).toBe(a.child.pid);
    await cli.held();
    const followers = await Promise.all(
      [b.url, c.url, proxy.url, proxy.url, proxy.url].map((u) => follow(u, runId)),
    );
    // Live: each has both texts while the CLI still holds.
    const early = await Promise.all(
      followers.map(async (f) => [...(await f.until("text_delta")), ...(await f.events(1))]),
    );
    for (const frames of early) expect(textOf(frames)).toBe("Hello, whole ");
    await cli.release();
    const seen = await Promise.all(
      followers.map(async (f, i) => [...(early[i] ?? []), ...(await f.events())]),
    );
    const onA = await (await follow(a.url, runId)).events();
    expect(statusOf(onA)).toEqual(["succeeded"]);
    for (const frames of seen) {
      expect(wire(frames)).toEqual(wire(onA));
      expect(frames.map((f) => f.id)).toEqual(frames.map((_, i) => String(i + 1)));
      expect(statusOf(frames)).toEqual(["succeeded"]);
      expect(frames.at(-1)?.event).toBe("completion");
      expect(textOf(frames)).toBe("Hello, whole world.");
    }
  });

  it("a run on A cancelled from B ends cancelled, with no process of it left on A", async () => {
    const cli = await holding("cancel");
    const sessionId = await newSession(proxy.url);
    const runId = await startRun(a.url, sessionId);
    await cli.held();
    const pid = await cliOf(sessionId);
    expect(await groupAlive(pid)).toBe(true);
    const throughProxy = await follow(proxy.url, runId);
    const res = await post(b.url, `/v1/runs/${runId}/cancel`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "cancelled" });
    await groupGone(pid);
    expect(statusOf(await throughProxy.events())).toEqual(["cancelled"]);
    await cli.release();
  });

  it("30 simultaneous messages to one session through the proxy: one runs, 29 are session_busy", async () => {
    const cli = await holding("busy");
    const sessionId = await newSession(proxy.url);
    const path = `/v1/sessions/${sessionId}/messages`;
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => post(proxy.url, path, { text: `message ${i}` })),
    );
    const accepted = answers.filter((r) => r.status === 202);
    const refused = answers.filter((r) => r.status !== 202);
    expect(accepted).toHaveLength(1);
    expect(refused.map((r) => r.status)).toEqual(Array(29).fill(409));
    for (const r of refused) expect(await r.json()).toMatchObject({ code: "session_busy" });
    const [winner] = accepted;
    if (!winner) throw new Error("no message accepted");
    const runId = ((await winner.json()) as { id: string }).id;
    // Spread over the three: each instance answered some of them.
    for (const server of [a, b, c]) {
      await until(() => requestsTo(server, path).length > 0, 10_000, "each instance's log line");
    }
    await cli.held();
    await cli.release();
    expect(statusOf(await (await follow(proxy.url, runId)).events())).toEqual(["succeeded"]);
    expect((await fake.invocations()).filter((i) => i.args.includes(sessionId))).toHaveLength(1);
  });

  it("webhooks through the proxy run once each, spread over the instances, and each callback is delivered once", async () => {
    await fake.setScenario(streamedReply(["All ", "good."]));
    const receiver = await startReceiver();
    receivers.push(receiver);
    const secret = "bearer-secret-0123456789";
    await createHook(proxy.url, {
      name: "spread",
      verification: "bearer",
      secret,
      prompt_template: "Check {{payload.n}}",
      callback_url: receiver.url,
      callback_secret: `whsec_${Buffer.from("x".repeat(24)).toString("base64")}`,
    });
    const headers = { "Content-Type": "application/json", Authorization: `Bearer ${secret}` };
    const runIds: string[] = [];
    for (let n = 0; n < 6; n++) {
      const res = await deliver(proxy.url, "spread", JSON.stringify({ n }), headers);
      expect(res.status).toBe(202);
      runIds.push(((await res.json()) as { run_id: string }).run_id);
    }
    const runs = await Promise.all(
      runIds.map((id) =>
        until(
          async () => {
            const run = await getRun(proxy.url, id);
            return run.callback?.state === "delivered" && run;
          },
          60_000,
          `the callback of ${id}`,
        ),
      ),
    );
    for (const run of runs) {
      expect(run, JSON.stringify(run)).toMatchObject({
        status: "succeeded",
        callback: { attempts: 1 },
      });
      const starts = (await fake.invocations()).filter((i) => i.args.includes(run.session_id));
      expect(starts).toHaveLength(1);
    }
    const owners = await Promise.all(runIds.map(ownerPid));
    expect(new Set(owners)).toEqual(new Set([a.child.pid, b.child.pid, c.child.pid]));
    expect(receiver.received.map((r) => r.headers["webhook-id"]).sort()).toEqual(
      [...runIds].sort(),
    );
  });

  it("a schedule fires once per tick with three instances", async () => {
    await fake.setScenario(streamedReply(["Nothing ", "to ", "do."]));
    const hook = {
      verification: "bearer",
      secret: "bearer-secret-0123456789",
      prompt_template: "Heartbeat at {{fire_time}}",
    };
    await createHook(proxy.url, { name: "tick", ...hook, schedule: "*/2 * * * * *" });
    type Delivery = { delivery_id: string; outcome: string; run_id: string | null };
    const deliveries = async () =>
      (
        (await (await fetch(`${proxy.url}/v1/hooks/tick/deliveries?limit=100`)).json()) as {
          data: Delivery[];
        }
      ).data.reverse();
    await until(
      async () => (await deliveries()).filter((d) => d.outcome === "accepted").length >= 3,
      60_000,
      "three ticks",
    );
    const put = await fetch(`${proxy.url}/v1/hooks/tick`, {
      method: "PUT",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(hook),
    });
    expect(put.status).toBe(200);
    const fired = () =>
      [a, b, c].reduce((n, s) => n + (s.output().match(/"msg":"schedule fired"/g)?.length ?? 0), 0);
    // Once unscheduled, every tick fired is listed (a pass under way may still add one), and
    // its run finished.
    const list = await until(
      async () => {
        const all = await deliveries();
        const runs = await Promise.all(
          all.map((d) => (d.run_id ? getRun(proxy.url, d.run_id) : undefined)),
        );
        return all.length === fired() && runs.every((r) => !r || isFinished(r)) && all;
      },
      30_000,
      "the ticks' runs finished",
    );
    const ticks = list.map((d) => d.delivery_id);
    expect(new Set(ticks).size).toBe(ticks.length);
    const times = ticks.map((id) => Date.parse(id.slice("schedule:".length)));
    for (let i = 1; i < times.length; i++) expect(times[i]).toBe((times[i - 1] ?? 0) + 2000);
    const accepted = list.filter((d) => d.outcome === "accepted");
    const sessions = await Promise.all(
      accepted.map(async (d) => (await getRun(proxy.url, d.run_id ?? "")).session_id),
    );
    const starts = await fake.invocations();
    for (const s of sessions) expect(starts.filter((i) => i.args.includes(s))).toHaveLength(1);
  });

  it("a fourth instance starting while runs are live on A, B and C changes nothing in them", async () => {
    const cli = await holding("fourth");
    const live = [];
    for (const server of [a, b, c]) {
      const sessionId = await newSession(server.url);
      live.push({ sessionId, runId: await startRun(server.url, sessionId) });
    }
    await cli.held(3);
    const pids = await Promise.all(live.map((r) => cliOf(r.sessionId)));
    const d = await instance(cleanups, env);
    // D is ready: it has swept once.
    for (const { runId } of live) {
      expect(await getRun(d.url, runId)).toMatchObject({ status: "running" });
    }
    for (const pid of pids) expect(await groupAlive(pid)).toBe(true);
    await cli.release();
    for (const { runId } of live) {
      expect(statusOf(await (await follow(d.url, runId)).events())).toEqual(["succeeded"]);
    }
    expect(await d.stop()).toBe(0);
  });

  it("A killed mid-run: B or C closes its run interrupted within the lease, followers on B and C get the one completion, and A started again touches no live run of B or C", async () => {
    const cli = await holding("kill");
    const onA = await newSession(a.url);
    const runId = await startRun(a.url, onA);
    const others = [];
    for (const server of [b, c]) {
      const sessionId = await newSession(server.url);
      others.push({ sessionId, runId: await startRun(server.url, sessionId) });
    }
    await cli.held(3);
    const aCli = await cliOf(onA);
    const otherClis = await Promise.all(others.map((r) => cliOf(r.sessionId)));
    const followers = await Promise.all([b.url, c.url].map((u) => follow(u, runId)));
    for (const f of followers) await f.until("text_delta");

    const killed = performance.now();
    await a.stop("SIGKILL");
    const rests = await Promise.all(followers.map((f) => f.events()));
    const seconds = (performance.now() - killed) / 1000;
    for (const rest of rests) {
      expect(statusOf(rest)).toEqual(["interrupted"]);
      expect(rest.at(-1)?.event).toBe("completion");
    }
    // The lease's expiry plus one renewal, and a margin for a loaded machine.
    expect(seconds).toBeLessThan(6 + 1 + 10);
    // Its log line may lag what its followers were sent.
    await until(
      () => [b, c].some((s) => s.output().includes("closed the runs of an instance that is gone")),
      10_000,
      "B or C saying it closed A's runs",
    );
    await until(async () => !(await groupAlive(aCli)), 20_000, "A's CLI gone");

    a = await instance(cleanups, env);
    for (const { runId: id } of others) {
      expect(await getRun(a.url, id)).toMatchObject({ status: "running" });
    }
    for (const pid of otherClis) expect(await groupAlive(pid)).toBe(true);
    await cli.release();
    for (const { runId: id } of others) {
      expect(statusOf(await (await follow(a.url, id)).events())).toEqual(["succeeded"]);
    }
    expect(statusOf(await (await follow(a.url, runId)).events())).toEqual(["interrupted"]);
    for (const server of [a, b, c]) expect(server.output()).not.toMatch(/"level":"error"/);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)(
  "a session's messages on A, B and C in turn (real CLI)",
  () => {
    let mock: MockAnthropic;
    let servers: ServerProcess[];
    let proxy: ReverseProxy;
    let workDirOfAll: string;

    beforeAll(async () => {
      const url = await clusterDatabase(cleanups);
      mock = await startMockAnthropic({ quiet: true });
      cleanups.push(() => mock.close());
      const homes: ClaudeEnv[] = [];
      for (let i = 0; i < 3; i++) {
        const ce = await makeClaudeEnv(mock.url);
        cleanups.push(ce.cleanup);
        homes.push(ce);
      }
      // Each instance its own HOME (its disk), one work dir for all, as behind one proxy.
      const workDir = homes[0]?.cwd ?? "";
      const start = (ce: ClaudeEnv) =>
        instance(cleanups, {
          DATABASE_URL: url,
          ...ce.env,
          AGENT_BRIDGE_WORK_DIR: workDir,
          AGENT_BRIDGE_PERMISSION_MODE: "default",
        });
      servers = await Promise.all(homes.map(start));
      workDirOfAll = workDir;
      proxy = await startProxy(servers.map((s) => s.url));
      cleanups.push(proxy.stop);
    });

    it("the model sees 1, 2 and 3 turns: the transcript store carries the conversation", async () => {
      const sessionId = await newSession(proxy.url);
      const words = ["apricot", "quince", "medlar"];
      for (const [i, server] of servers.entries()) {
        mock.script({ blocks: [{ type: "text", text: `Noted: ${words[i]}.` }] });
        const res = await fetch(`${server.url}/v1/sessions/${sessionId}/messages`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify({ text: `remember ${words[i]}` }),
        });
        expect(await res.json()).toMatchObject({
          text: `Noted: ${words[i]}.`,
          run: { status: "succeeded" },
        });
        const messages = mock.mainRequests().at(-1)?.messages ?? [];
        const said = JSON.stringify(messages);
        const turns = messages.filter(
          (m) => m.role === "user" && JSON.stringify(m).includes("remember "),
        );
        expect(turns).toHaveLength(i + 1);
        for (const word of words.slice(0, i)) expect(said).toContain(`Noted: ${word}.`);
      }
    });

    it("a permission request of a run on A, followed on B, is answered on C: the CLI on A gets the answer at once, with the input C changed", async () => {
      const [onA, onB, onC] = servers as [ServerProcess, ServerProcess, ServerProcess];
      const file = join(workDirOfAll, "answered-elsewhere.txt");
      mock.script(
        {
          blocks: [{ type: "tool_use", name: "Write", input: { file_path: file, content: "yes" } }],
        },
        { blocks: [{ type: "text", text: "Written." }] },
      );
      const session = (await (
        await post(onA.url, "/v1/sessions", { approvals: "api" })
      ).json()) as { id: string };
      const started = await post(onA.url, `/v1/sessions/${session.id}/messages`, {
        text: "write it",
      });
      expect(started.status).toBe(202);
      const run = (await started.json()) as { id: string };
      const onBStream = await follow(onB.url, run.id);
      const asked = (await onBStream.until("permission_request")).at(-1)?.data as {
        request_id: string;
      };
      // The default approval timeout is 10 minutes: only the answer itself can end this wait.
      const changed = { file_path: file, content: "yes, from C" };
      const answered = await post(onC.url, `/v1/runs/${run.id}/permissions/${asked.request_id}`, {
        decision: "allow",
        updated_input: changed,
      });
      expect(answered.status).toBe(200);
      const rest = await onBStream.until("completion");
      // A read the answer from the database: its record of it shows what ran.
      expect(rest.find((f) => f.event === "permission_resolved")?.data).toMatchObject({
        decision: "allow",
        by: "client",
        updated_input: changed,
      });
      expect(rest.at(-1)?.data).toMatchObject({ status: "succeeded" });
      expect(await readFile(file, "utf8")).toBe("yes, from C");
    });
  },
);
