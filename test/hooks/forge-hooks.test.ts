import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runs } from "../../src/store/schema.js";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { createHook, deliver } from "./support.js";

// Hooks of a forge: GitLab's deliveries verified by their token, and a hook's forge and API
// token, set, kept and cleared, and never shown.

const GITLAB_SECRET = "gitlab-secret-0123456789";
const TOKEN = `glpat-${randomBytes(12).toString("hex")}`;

describe.each(BACKENDS)("hooks of a forge on %s", (backend) => {
  let fake: FakeCli;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  const name = `gl-${randomBytes(3).toString("hex")}`;

  beforeAll(async () => {
    fake = await fakeCli(streamedReply(["Looked."]));
    t = await createTestApp(backend, fake.bridgeEnv);
    server = await listen(t.app);
    await createHook(server.url, {
      name,
      verification: "gitlab",
      secret: GITLAB_SECRET,
      prompt_template: "Look at {{payload.object_attributes.note}} ({{event}})",
      events: ["note"],
      forge_token: TOKEN,
      forge: { api_url: "https://gitlab.example.com/api/v4/" },
    });
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await fake.cleanup();
  });

  const note = (text = "@agent-bridge look") =>
    JSON.stringify({
      object_kind: "note",
      project: { id: 42, path_with_namespace: "acme/widgets" },
      object_attributes: { note: text, noteable_type: "MergeRequest" },
      nonce: randomUUID(),
    });
  const gitlabHeaders = (token: string, id = randomUUID()) => ({
    "Content-Type": "application/json",
    "X-Gitlab-Token": token,
    "X-Gitlab-Event": "Note Hook",
    "Idempotency-Key": id,
  });
  const runsStarted = () => t.database.db.$count(runs);
  const api = (path: string, init?: RequestInit) =>
    fetch(`${server.url}${path}`, {
      ...init,
      headers: { "Content-Type": "application/json", ...init?.headers },
    });

  it("starts a run for GitLab's token, with the payload's object_kind as its event", async () => {
    const res = await deliver(server.url, name, note(), gitlabHeaders(GITLAB_SECRET));
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ event: "note", outcome: "accepted" });
  });

  it("refuses another token, a longer one and none, and starts nothing", async () => {
    const before = await runsStarted();
    const { "X-Gitlab-Token": _, ...none } = gitlabHeaders(GITLAB_SECRET);
    const answers = await Promise.all([
      deliver(server.url, name, note(), gitlabHeaders("another-secret-0123456789")),
      deliver(server.url, name, note(), gitlabHeaders(`${GITLAB_SECRET}x`)),
      deliver(server.url, name, note(), none),
    ]);
    expect(answers.map((r) => r.status)).toEqual([401, 401, 401]);
    expect(await runsStarted()).toBe(before);
  });

  it("answers GitLab's retry (the same Idempotency-Key) and a replayed body as duplicates", async () => {
    const body = note();
    const id = randomUUID();
    const first = await deliver(server.url, name, body, gitlabHeaders(GITLAB_SECRET, id));
    expect(first.status).toBe(202);
    const before = await runsStarted();
    const retry = await deliver(server.url, name, body, gitlabHeaders(GITLAB_SECRET, id));
    const replay = await deliver(server.url, name, body, gitlabHeaders(GITLAB_SECRET));
    expect([retry.status, replay.status]).toEqual([200, 200]);
    expect(await replay.json()).toMatchObject({ duplicate: true, delivery_id: id });
    expect(await runsStarted()).toBe(before);
  });

  it("takes X-Gitlab-Event-UUID as the delivery id from a GitLab without Idempotency-Key", async () => {
    const id = randomUUID();
    const { "Idempotency-Key": _, ...headers } = gitlabHeaders(GITLAB_SECRET);
    const res = await deliver(server.url, name, note(), { ...headers, "X-Gitlab-Event-UUID": id });
    expect(await res.json()).toMatchObject({ delivery_id: id, outcome: "accepted" });
  });

  it("shows the forge and whether it has a token, never the token", async () => {
    const hook = await (await api(`/v1/hooks/${name}`)).json();
    expect(hook.forge).toEqual({
      kind: "gitlab",
      api_url: "https://gitlab.example.com/api/v4",
      token_set: true,
    });
    expect(JSON.stringify(hook)).not.toContain(TOKEN);
    expect(await (await api("/v1/hooks")).text()).not.toContain(TOKEN);
  });

  it("keeps the token through an update that leaves it out, and drops it for null", async () => {
    const definition = {
      verification: "gitlab",
      prompt_template: "Look",
      forge: { api_url: "https://gitlab.example.com/api/v4" },
    };
    const kept = await api(`/v1/hooks/${name}`, {
      method: "PUT",
      body: JSON.stringify(definition),
    });
    expect((await kept.json()).forge.token_set).toBe(true);
    const dropped = await api(`/v1/hooks/${name}`, {
      method: "PUT",
      body: JSON.stringify({ ...definition, forge_token: null }),
    });
    expect((await dropped.json()).forge.token_set).toBe(false);
  });

  it("gives a GitHub hook github.com's API by default, and a bearer hook none", async () => {
    const github = await createHook(server.url, {
      name: `gh-${randomBytes(3).toString("hex")}`,
      verification: "github",
      secret: GITLAB_SECRET,
      prompt_template: "x",
    });
    expect(github.forge).toEqual({
      kind: "github",
      api_url: "https://api.github.com",
      token_set: false,
    });
    const bearer = await createHook(server.url, {
      name: `b-${randomBytes(3).toString("hex")}`,
      verification: "bearer",
      secret: GITLAB_SECRET,
      prompt_template: "x",
    });
    expect(bearer.forge).toBeNull();
  });

  it("refuses a forge API on an inside address, with credentials, or a token without a forge", async () => {
    const base = {
      name: `bad-${randomBytes(3).toString("hex")}`,
      secret: GITLAB_SECRET,
      prompt_template: "x",
    };
    const refusals = [
      [
        { ...base, verification: "github", forge: { api_url: "http://169.254.169.254/" } },
        "forge.api_url",
      ],
      [
        { ...base, verification: "github", forge: { api_url: "https://u:p@github.example/" } },
        "forge.api_url",
      ],
      [{ ...base, verification: "bearer", forge_token: "ghp_x" }, "forge_token"],
      [{ ...base, verification: "bearer", forge: {} }, "forge.kind"],
      [{ ...base, verification: "github", forge: { kind: "gitea" } }, "forge.kind"],
    ] as const;
    for (const [body, field] of refusals) {
      const res = await api("/v1/hooks", { method: "POST", body: JSON.stringify(body) });
      expect(res.status, field).toBe(400);
      expect(res.headers.get("content-type")).toMatch(/problem\+json/);
      expect(JSON.stringify(await res.json())).toContain(field);
    }
    expect((await api(`/v1/hooks/${base.name}`)).status).toBe(404);
  });
});
