import { randomBytes, randomUUID } from "node:crypto";
import { eq, like, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REPLAY_WINDOW_MS } from "../../src/hooks/deliveries.js";
import { insertDelivery } from "../../src/store/hook-deliveries.js";
import { getHookByName } from "../../src/store/hooks.js";
import { hookDeliveries, hooks, runs } from "../../src/store/schema.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import {
  createHook,
  deliver,
  getRun,
  githubHeaders,
  isFinished,
  newStandardSecret,
  standardHeaders,
  until,
} from "./support.js";

// Incoming deliveries over real HTTP: each kind of verification on the raw bytes, duplicates,
// unknown hooks, filters, and what the admin routes show (never a secret).

const GITHUB_SECRET = "github-secret-0123456789";
const BEARER_SECRET = "bearer-secret-0123456789";

describe.each(BACKENDS)("hook deliveries on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  const standardSecret = newStandardSecret();
  const suffix = randomBytes(3).toString("hex");
  const names = { github: `gh-${suffix}`, standard: `std-${suffix}`, bearer: `bearer-${suffix}` };

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Reviewed."]));
    t = await createTestApp(backend, fake.bridgeEnv);
    server = await listen(t.app);
    const prompt_template = "Review {{payload.pull_request.title}} ({{event}}, {{delivery_id}})";
    await createHook(server.url, {
      name: names.github,
      verification: "github",
      secret: GITHUB_SECRET,
      prompt_template,
    });
    await createHook(server.url, {
      name: names.standard,
      verification: "standard",
      secret: standardSecret,
      prompt_template,
    });
    await createHook(server.url, {
      name: names.bearer,
      verification: "bearer",
      secret: BEARER_SECRET,
      prompt_template,
      events: ["pull_request.opened", "push"],
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  // Every body differs, as GitHub's do: the same GitHub body under another id is a replay.
  const payload = (title = "Fix the parser") =>
    JSON.stringify({ action: "opened", pull_request: { title, number: 7 }, nonce: randomUUID() });

  /** Changes one byte of the body (the signature was made over the original). */
  const tamper = (body: string) => body.replace("parser", "parses");

  /** Runs in the database: a refused delivery adds none. */
  const runsStarted = () => t.database.db.$count(runs);

  describe("github", () => {
    it("accepts a correct X-Hub-Signature-256 and starts the run", async () => {
      const body = payload();
      const res = await deliver(server.url, names.github, body, githubHeaders(GITHUB_SECRET, body));
      expect(res.status).toBe(202);
      const receipt = await res.json();
      expect(receipt).toMatchObject({
        hook: names.github,
        event: "pull_request",
        outcome: "accepted",
        duplicate: false,
        run_url: `/v1/runs/${receipt.run_id}`,
        events_url: `/v1/runs/${receipt.run_id}/events`,
      });
      expect(res.headers.get("location")).toBe(receipt.run_url);
      const run = await until(async () => {
        const r = await getRun(server.url, receipt.run_id);
        return isFinished(r) && r;
      });
      expect(run).toMatchObject({
        status: "succeeded",
        trigger: "webhook",
        session_id: receipt.session_id,
        prompt: `Review Fix the parser (pull_request, ${receipt.delivery_id})`,
      });
      expect(run.system_prompt).toMatch(/automated invocation from CI.*Nobody is watching/s);
    });

    it("refuses a wrong secret, a body changed by one byte and a missing signature, and starts nothing", async () => {
      const before = await runsStarted();
      const body = payload();
      const wrong = await deliver(server.url, names.github, body, githubHeaders("not-it", body));
      const changed = await deliver(
        server.url,
        names.github,
        tamper(body),
        githubHeaders(GITHUB_SECRET, body),
      );
      const { "X-Hub-Signature-256": _, ...unsigned } = githubHeaders(GITHUB_SECRET, body);
      const missing = await deliver(server.url, names.github, body, unsigned);
      for (const res of [wrong, changed, missing]) {
        expect(res.status).toBe(401);
        expect(res.headers.get("content-type")).toBe("application/problem+json");
        expect((await res.json()).code).toBe("invalid_signature");
      }
      expect(await runsStarted()).toBe(before);
    });

    it("takes GitHub's form encoding (payload=…), verified on the encoded bytes", async () => {
      const form = `payload=${encodeURIComponent(payload("Form encoded"))}`;
      const headers = {
        ...githubHeaders(GITHUB_SECRET, form),
        "Content-Type": "application/x-www-form-urlencoded",
      };
      const res = await deliver(server.url, names.github, form, headers);
      expect(res.status).toBe(202);
      const run = await getRun(server.url, (await res.json()).run_id);
      expect(run.prompt).toContain("Review Form encoded");
    });
  });

  describe("github replays", () => {
    const listed = async () => {
      const res = await fetch(`${server.url}/v1/hooks/${names.github}/deliveries?limit=100`);
      return ((await res.json()) as { data: { delivery_id: string; run_id: string }[] }).data;
    };
    /** The body signed as GitHub signs it, under a new delivery id unless one is given. */
    const signed = (body: string, opts?: { id?: string; event?: string }) =>
      deliver(server.url, names.github, body, githubHeaders(GITHUB_SECRET, body, opts));

    it("answers the same signed body under made-up delivery ids as a duplicate: one run", async () => {
      const body = payload("Captured");
      const first = await signed(body);
      expect(first.status).toBe(202);
      const receipt = await first.json();
      const before = await runsStarted();

      // Three new ids (one also with another event: neither header is signed), two at once.
      const replays = await Promise.all([
        signed(body),
        signed(body),
        signed(body, { event: "push" }),
      ]);
      for (const res of replays) {
        expect(res.status).toBe(200);
        expect(await res.json()).toMatchObject({
          duplicate: true,
          delivery_id: receipt.delivery_id,
          run_id: receipt.run_id,
        });
      }
      // GitHub's own redelivery (the same id) is a duplicate as before.
      const redelivered = await signed(body, { id: receipt.delivery_id });
      expect(redelivered.status).toBe(200);
      expect((await redelivered.json()).run_id).toBe(receipt.run_id);
      expect(await runsStarted()).toBe(before);
      // One delivery is listed for the body, and nothing of how it is remembered.
      const deliveries = await listed();
      expect(deliveries.filter((d) => d.run_id === receipt.run_id)).toHaveLength(1);
      expect(deliveries.filter((d) => d.delivery_id.startsWith("body-sha256:"))).toEqual([]);
    });

    it("starts a run for the same body under a new id once the 24 h window has passed", async () => {
      const body = payload("Old news");
      const first = await signed(body);
      expect(first.status).toBe(202);
      const db = t.database.db;
      await db
        .update(hookDeliveries)
        .set({ receivedAt: new Date(Date.now() - REPLAY_WINDOW_MS - 60_000) })
        .where(like(hookDeliveries.deliveryId, "body-sha256:%"));
      const later = await signed(body);
      expect(later.status).toBe(202);
      expect((await later.json()).run_id).not.toBe((await first.json()).run_id);
    });

    it("refuses a delivery id in the forms it keeps bodies and schedule ticks under", async () => {
      for (const id of [`body-sha256:${"0".repeat(64)}`, "schedule:2026-12-01T00:00:00.000Z"]) {
        const res = await signed(payload(), { id });
        expect(res.status, id).toBe(400);
        expect(await res.json()).toMatchObject({
          code: "validation_failed",
          detail: `delivery ids starting with ${id.split(":")[0]}: are reserved`,
        });
      }
    });
  });

  describe("standard webhooks", () => {
    it("accepts a correct signature, also among several", async () => {
      const body = payload();
      const headers = standardHeaders(standardSecret, body);
      const res = await deliver(server.url, names.standard, body, {
        ...headers,
        "webhook-signature": `v1,${Buffer.alloc(32).toString("base64")} ${headers["webhook-signature"]}`,
      });
      expect(res.status).toBe(202);
      expect((await res.json()).delivery_id).toBe(headers["webhook-id"]);
    });

    it("refuses a wrong secret, a stale or future timestamp, and a body changed by one byte", async () => {
      const before = await runsStarted();
      const body = payload();
      const now = Math.floor(Date.now() / 1000);
      const attempts = [
        deliver(server.url, names.standard, body, standardHeaders(newStandardSecret(), body)),
        deliver(
          server.url,
          names.standard,
          body,
          standardHeaders(standardSecret, body, { timestamp: now - 330 }),
        ),
        deliver(
          server.url,
          names.standard,
          body,
          standardHeaders(standardSecret, body, { timestamp: now + 330 }),
        ),
        deliver(server.url, names.standard, tamper(body), standardHeaders(standardSecret, body)),
      ];
      const answers = await Promise.all(attempts);
      expect(answers.map((r) => r.status)).toEqual([401, 401, 401, 401]);
      expect((await answers[1]?.json())?.detail).toMatch(/timestamp/);
      expect(await runsStarted()).toBe(before);
    });

    it("accepts a timestamp within the 5 minutes", async () => {
      const body = payload();
      const timestamp = Math.floor(Date.now() / 1000) - 240;
      const res = await deliver(
        server.url,
        names.standard,
        body,
        standardHeaders(standardSecret, body, { timestamp }),
      );
      expect(res.status).toBe(202);
    });
  });

  describe("bearer", () => {
    const headers = (secret: string, id = crypto.randomUUID()) => ({
      "Content-Type": "application/json",
      Authorization: `Bearer ${secret}`,
      "X-Delivery-Id": id,
      "X-Event": "pull_request",
    });

    it("accepts the hook's secret", async () => {
      const res = await deliver(server.url, names.bearer, payload(), headers(BEARER_SECRET));
      expect(res.status).toBe(202);
    });

    it("refuses another secret, a changed one and none", async () => {
      const before = await runsStarted();
      const { Authorization: _, ...none } = headers(BEARER_SECRET);
      const answers = await Promise.all([
        deliver(server.url, names.bearer, payload(), headers("another-secret-0123456789")),
        deliver(server.url, names.bearer, payload(), headers(`${BEARER_SECRET}x`)),
        deliver(server.url, names.bearer, payload(), none),
      ]);
      expect(answers.map((r) => r.status)).toEqual([401, 401, 401]);
      expect(await runsStarted()).toBe(before);
    });

    it("records an event the hook does not take as ignored, and starts nothing", async () => {
      const before = await runsStarted();
      const body = JSON.stringify({ action: "closed", pull_request: { title: "x" } });
      const res = await deliver(server.url, names.bearer, body, headers(BEARER_SECRET));
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ outcome: "ignored", run_id: null });
      expect(await runsStarted()).toBe(before);
    });
  });

  it("answers a repeated delivery id with the first delivery's run (200) and starts nothing", async () => {
    const body = payload();
    const headers = githubHeaders(GITHUB_SECRET, body, { id: `dup-${crypto.randomUUID()}` });
    const first = await deliver(server.url, names.github, body, headers);
    expect(first.status).toBe(202);
    const receipt = await first.json();
    await until(async () => isFinished(await getRun(server.url, receipt.run_id)));
    const before = await runsStarted();

    const again = await deliver(server.url, names.github, body, headers);
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({
      run_id: receipt.run_id,
      session_id: receipt.session_id,
      duplicate: true,
    });
    // Even at the same time, twice more: one run in all.
    const racing = await Promise.all([
      deliver(server.url, names.github, body, headers),
      deliver(server.url, names.github, body, headers),
    ]);
    for (const res of racing) expect((await res.json()).run_id).toBe(receipt.run_id);
    expect(await runsStarted()).toBe(before);

    const list = await (
      await fetch(`${server.url}/v1/hooks/${names.github}/deliveries?limit=100`)
    ).json();
    const mine = list.data.filter(
      (d: { delivery_id: string }) => d.delivery_id === headers["X-GitHub-Delivery"],
    );
    expect(mine).toEqual([
      expect.objectContaining({
        source: "webhook",
        event: "pull_request",
        outcome: "accepted",
        run_id: receipt.run_id,
      }),
    ]);
  });

  describe("a delivery always ends settled, and a retry gets its real outcome", () => {
    const headers = (id: string) => ({
      "Content-Type": "application/json",
      Authorization: `Bearer ${BEARER_SECRET}`,
      "X-Delivery-Id": id,
      "X-Event": "push",
    });
    const listed = async (id: string) => {
      const res = await fetch(`${server.url}/v1/hooks/${names.bearer}/deliveries?limit=100`);
      const { data } = (await res.json()) as { data: { delivery_id: string }[] };
      return data.filter((d) => d.delivery_id === id);
    };

    it("a payload holding U+0000 is refused before it is recorded; the retry starts the run", async () => {
      const id = `nul-${crypto.randomUUID()}`;
      const refused = await deliver(
        server.url,
        names.bearer,
        JSON.stringify({ pull_request: { title: "a\u0000b" } }),
        headers(id),
      );
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({
        code: "validation_failed",
        errors: [{ location: "body", path: "pull_request.title" }],
      });
      expect(await listed(id)).toEqual([]);

      const retry = await deliver(server.url, names.bearer, payload(), headers(id));
      expect(retry.status).toBe(202);
      const receipt = await retry.json();
      expect(receipt).toMatchObject({ outcome: "accepted", duplicate: false });
      expect(receipt.run_id).toEqual(expect.any(String));
    });

    it("a hook whose agent this server no longer runs settles its delivery failed, saying so, and starts nothing", async () => {
      const db = t.database.db;
      await db.update(hooks).set({ agent: "retired-agent" }).where(eq(hooks.name, names.bearer));
      const before = await runsStarted();
      const id = `retired-${crypto.randomUUID()}`;
      let refused: Response;
      try {
        refused = await deliver(server.url, names.bearer, payload(), headers(id));
      } finally {
        await db.update(hooks).set({ agent: null }).where(eq(hooks.name, names.bearer));
      }
      expect(refused.status).toBe(503);
      expect(await refused.json()).toMatchObject({ code: "agent_unavailable" });
      const [recorded] = await listed(id);
      expect(recorded).toMatchObject({
        outcome: "failed",
        run_id: null,
        detail: "this server does not run the retired-agent agent (AGENT_BRIDGE_AGENTS)",
      });
      expect(await runsStarted()).toBe(before);
    });

    it("a failure after the delivery is recorded settles it failed, with no SQL in it; the retry starts the run, and a duplicate of that answers with it", async () => {
      const db = t.database.db;
      // A real database error after the delivery's row is written: no run may be inserted.
      await db.execute(sql`create function test_refuse_runs() returns trigger language plpgsql
        as $$ begin raise exception 'test: no runs now'; end $$`);
      await db.execute(sql`create trigger test_refuse_runs before insert on runs
        for each row execute function test_refuse_runs()`);
      const id = `fail-${crypto.randomUUID()}`;
      let failed: Response;
      try {
        failed = await deliver(server.url, names.bearer, payload(), headers(id));
      } finally {
        await db.execute(sql`drop trigger test_refuse_runs on runs`);
        await db.execute(sql`drop function test_refuse_runs`);
      }
      expect(failed.status).toBe(500);
      const problem = await failed.text();
      expect(JSON.parse(problem)).toMatchObject({ code: "internal_error" });
      const [recorded, ...more] = await listed(id);
      expect(more).toEqual([]);
      expect(recorded).toMatchObject({
        outcome: "failed",
        run_id: null,
        detail: "the run could not be started: an internal error (the server's log has the cause)",
      });
      for (const text of [problem, JSON.stringify(recorded)]) {
        expect(text).not.toMatch(/insert|runs|test_refuse|no runs now|params/i);
      }

      const retry = await deliver(server.url, names.bearer, payload(), headers(id));
      expect(retry.status).toBe(202);
      const receipt = await retry.json();
      const again = await deliver(server.url, names.bearer, payload(), headers(id));
      expect(again.status).toBe(200);
      expect(await again.json()).toMatchObject({
        outcome: "accepted",
        duplicate: true,
        run_id: receipt.run_id,
        detail: null,
      });
      expect(await listed(id)).toEqual([
        expect.objectContaining({ outcome: "accepted", run_id: receipt.run_id }),
      ]);
    });

    it("a delivery left received by a server that died starting its run is settled failed, and the retry starts the run", async () => {
      const db = t.database.db;
      const hook = await getHookByName(db, names.bearer);
      if (!hook) throw new Error("no hook");
      const id = `orphan-${crypto.randomUUID()}`;
      const orphan = await insertDelivery(db, {
        hookId: hook.id,
        deliveryId: id,
        source: "webhook",
        event: "push",
        outcome: "received",
      });
      await db
        .update(hookDeliveries)
        .set({ receivedAt: new Date(Date.now() - 3600_000) })
        .where(eq(hookDeliveries.id, orphan.id));
      // Listing it settles it: nobody sees a delivery that will never move on as `received`.
      expect(await listed(id)).toEqual([
        expect.objectContaining({
          outcome: "failed",
          detail: "abandoned: the server stopped before it had started the run",
        }),
      ]);

      const retry = await deliver(server.url, names.bearer, payload(), headers(id));
      expect(retry.status).toBe(202);
      expect(await retry.json()).toMatchObject({ outcome: "accepted", duplicate: false });
    });

    it("two deliveries of a new id at the same time: one run, both answers name it", async () => {
      const id = `twin-${crypto.randomUUID()}`;
      const before = await runsStarted();
      const answers = await Promise.all([
        deliver(server.url, names.bearer, payload(), headers(id)),
        deliver(server.url, names.bearer, payload(), headers(id)),
      ]);
      const receipts = await Promise.all(answers.map((r) => r.json()));
      expect(answers.map((r) => r.status).sort()).toEqual([200, 202]);
      expect(receipts[0].run_id).toEqual(expect.any(String));
      expect(receipts[1].run_id).toBe(receipts[0].run_id);
      expect(await runsStarted()).toBe(before + 1);
    });
  });

  it("answers 404 for an unknown hook, 400 for a signed body that is not JSON", async () => {
    const body = payload();
    const unknown = await deliver(server.url, `nope-${suffix}`, body, githubHeaders("x", body));
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).code).toBe("hook_not_found");

    const garbage = "{not json";
    const malformed = await deliver(
      server.url,
      names.github,
      garbage,
      githubHeaders(GITHUB_SECRET, garbage),
    );
    expect(malformed.status).toBe(400);
    expect((await malformed.json()).code).toBe("malformed_json");
  });

  it("never returns or lists a secret", async () => {
    const hook = await (await fetch(`${server.url}/v1/hooks/${names.standard}`)).json();
    const list = await (await fetch(`${server.url}/v1/hooks`)).text();
    expect(hook).toMatchObject({ name: names.standard, verification: "standard" });
    expect(JSON.stringify(hook)).not.toContain(standardSecret.slice(6, 20));
    expect(list).not.toContain(standardSecret.slice(6, 20));
    expect(list).not.toContain(GITHUB_SECRET);
    expect(list).not.toContain(BEARER_SECRET);
  });
});
