import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { issueKey } from "../../src/auth/keys.js";
import { sessions } from "../../src/store/schema.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { createHook, deliver, getRun, isFinished, until } from "./support.js";

// Which session a delivery runs in: a session key continues one session, and a delivery for a
// busy session waits in line for it instead of failing; the sessions belong to the hook's maker.

const SECRET = "bearer-secret-0123456789";
const headers = { "Content-Type": "application/json", Authorization: `Bearer ${SECRET}` };

describe.each(BACKENDS)("hook sessions on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    // About a second a run, so that a second delivery finds the session busy.
    fake = await fakeCli(streamedReply(["Looking", " at it", "."], { delayMs: 350 }));
    t = await createTestApp(backend, fake.bridgeEnv);
    server = await listen(t.app);
    await createHook(server.url, {
      name: "per-pr",
      verification: "bearer",
      secret: SECRET,
      prompt_template: "Review PR {{payload.pr}}: {{payload.note}}",
      session_key_template: "{{payload.repo}}#{{payload.pr}}",
    });
    await createHook(server.url, {
      name: "fresh",
      verification: "bearer",
      secret: SECRET,
      prompt_template: "Look at {{payload.note}}",
    });
    await createHook(server.url, {
      name: "supervised",
      verification: "bearer",
      secret: SECRET,
      prompt_template: "Deploy {{payload.note}}",
      approvals: "api",
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  const send = async (hook: string, payload: Record<string, unknown>) => {
    const res = await deliver(server.url, hook, JSON.stringify(payload), headers);
    expect(res.status).toBe(202);
    return (await res.json()) as { run_id: string; session_id: string };
  };

  it("continues one session per key; a delivery for the busy session waits in line", async () => {
    const first = await send("per-pr", { repo: "acme/app", pr: 1, note: "opened" });
    const second = await send("per-pr", { repo: "acme/app", pr: 1, note: "synchronize" });
    const other = await send("per-pr", { repo: "acme/app", pr: 2, note: "opened" });
    expect(second.session_id).toBe(first.session_id);
    expect(other.session_id).not.toBe(first.session_id);

    // Waiting, shown as queued; and a message to the session meanwhile is refused as busy.
    expect((await getRun(server.url, second.run_id)).status).toBe("queued");
    const message = await fetch(`${server.url}/v1/sessions/${first.session_id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Prefer: "respond-async" },
      body: JSON.stringify({ text: "me too" }),
    });
    expect(message.status).toBe(409);

    const done = await until(async () => {
      const runs = await Promise.all([first, second].map((r) => getRun(server.url, r.run_id)));
      return runs.every(isFinished) && runs;
    });
    const [a, b] = await Promise.all(
      done.map(async (r) => (await fetch(`${server.url}/v1/runs/${r.id}`)).json()),
    );
    expect([a.status, b.status]).toEqual(["succeeded", "succeeded"]);
    expect(Date.parse(b.started_at)).toBeGreaterThanOrEqual(Date.parse(a.finished_at));
    expect(b.prompt).toBe("Review PR 1: synchronize");
    const session = await (await fetch(`${server.url}/v1/sessions/${first.session_id}`)).json();
    expect(session).toMatchObject({
      title: "per-pr: acme/app#1",
      metadata: { hook: "per-pr", session_key: "acme/app#1" },
      usage: { runs: 2 },
    });
    // The second run resumed the CLI session the first one started.
    const invocations = await fake.invocations();
    const resumed = invocations.filter((i) => i.args.includes("--resume"));
    expect(resumed.some((i) => i.args.includes(first.session_id))).toBe(true);
  });

  it("gives its sessions the hook's approvals: deny unless the hook says api", async () => {
    const hooks = await (await fetch(`${server.url}/v1/hooks`)).json();
    const approvals = Object.fromEntries(
      hooks.data.map((h: { name: string; approvals: string }) => [h.name, h.approvals]),
    );
    expect(approvals).toMatchObject({ fresh: "deny", supervised: "api" });
    for (const [hook, expected] of [
      ["fresh", "deny"],
      ["supervised", "api"],
    ]) {
      const { session_id } = await send(String(hook), { note: "it" });
      const session = await (await fetch(`${server.url}/v1/sessions/${session_id}`)).json();
      expect(session.approvals).toBe(expected);
    }
  });

  it("gives every delivery a new session without a session key", async () => {
    const a = await send("fresh", { note: "one" });
    const b = await send("fresh", { note: "two" });
    expect(a.session_id).not.toBe(b.session_id);
    expect((await getRun(server.url, b.run_id)).status).not.toBe("failed");
  });

  it("cancels a delivery's run while it waits, and runs the next one", async () => {
    const first = await send("per-pr", { repo: "acme/app", pr: 9, note: "a" });
    const second = await send("per-pr", { repo: "acme/app", pr: 9, note: "b" });
    const third = await send("per-pr", { repo: "acme/app", pr: 9, note: "c" });
    const cancelled = await fetch(`${server.url}/v1/runs/${second.run_id}/cancel`, {
      method: "POST",
    });
    expect((await cancelled.json()).status).toBe("cancelled");
    const last = await until(async () => {
      const r = await getRun(server.url, third.run_id);
      return isFinished(r) && r;
    });
    expect(last.status).toBe("succeeded");
    expect((await getRun(server.url, first.run_id)).status).toBe("succeeded");
  });
});

describe("hooks with API keys on", () => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let admin: { key: string; id: string };
  let user: string;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["ok"]));
    t = await createTestApp("pglite", { ...fake.bridgeEnv, AGENT_BRIDGE_AUTH: "keys" });
    const made = await issueKey(t.database.db, { name: "ops", admin: true });
    admin = { key: made.key, id: made.row.id };
    user = (await issueKey(t.database.db, { name: "ci", admin: false })).key;
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  it("lets only admins manage hooks, takes deliveries without a key, and gives their sessions to the hook's maker", async () => {
    const body = {
      name: "keyed",
      verification: "bearer",
      secret: SECRET,
      prompt_template: "hi",
    };
    const forbidden = await fetch(`${server.url}/v1/hooks`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${user}` },
      body: JSON.stringify(body),
    });
    expect(forbidden.status).toBe(403);
    await createHook(server.url, body, { Authorization: `Bearer ${admin.key}` });
    expect((await fetch(`${server.url}/v1/hooks/keyed/deliveries`)).status).toBe(401);

    const receipt = await (await deliver(server.url, "keyed", "{}", headers)).json();
    const [session] = await t.database.db
      .select()
      .from(sessions)
      .where(eq(sessions.id, receipt.session_id));
    expect(session?.ownerKeyId).toBe(admin.id);
    const asUser = await fetch(`${server.url}/v1/runs/${receipt.run_id}`, {
      headers: { Authorization: `Bearer ${user}` },
    });
    expect(asUser.status).toBe(404);
    const asAdmin = await fetch(`${server.url}/v1/runs/${receipt.run_id}`, {
      headers: { Authorization: `Bearer ${admin.key}` },
    });
    expect(asAdmin.status).toBe(200);
  });
});
