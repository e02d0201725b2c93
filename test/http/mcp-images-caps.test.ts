import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { count } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_IMAGE_BASE64_CHARS } from "../../src/agents/images.js";
import { hooks, sessions } from "../../src/store/schema.js";
import { createSession } from "../../src/store/sessions.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { imageData, LARGEST_PNG, PNG_1X1 } from "../support/images.js";

// A session's MCP servers, a message's images and the caps of a run, as the API takes them (and
// refuses them: 400, nothing written, nothing run) and as they reach the CLI's command line and
// stdin, with the scripted fake CLI. test/runs/mcp-images-caps.real.test.ts shows the real CLI
// doing what they ask.

const SECRET_TOKEN = "ghp_not-in-any-argv";

const post = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "Content-Type": "application/json", ...headers },
  body: JSON.stringify(body),
});

describe.each(BACKENDS)("MCP servers, images and run caps through the API on %s", (backend) => {
  let dir: string;
  let fake: FakeCli;
  let t: TestApp;
  const reply = streamedReply(["Done."]);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "mcp-images-caps-"));
    const mcpConfig = join(dir, "mcp.json");
    await writeFile(
      mcpConfig,
      JSON.stringify({
        mcpServers: {
          github: {
            command: "github-mcp",
            args: ["stdio"],
            env: { GITHUB_TOKEN: SECRET_TOKEN },
          },
          docs: { type: "http", url: "https://mcp.example/docs", headers: { "X-Key": "k" } },
        },
      }),
    );
    fake = await fakeCli(reply);
    t = await createTestApp(backend, {
      ...fake.bridgeEnv,
      AGENT_BRIDGE_AGENTS: "claude,codex",
      AGENT_BRIDGE_MCP_CONFIG: mcpConfig,
      // Far below one image at its largest: a message has room for its images on top of it.
      AGENT_BRIDGE_BODY_LIMIT_BYTES: "4096",
    });
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  const request = (path: string, init?: RequestInit) => t.app.request(path, init);
  const newSession = async (body: Record<string, unknown> = {}) => {
    const res = await request("/v1/sessions", post(body));
    expect(res.status).toBe(201);
    return (await res.json()) as { id: string } & Record<string, unknown>;
  };
  const runsOf = async (id: string) =>
    ((await (await request(`/v1/sessions/${id}/runs`)).json()) as { data: unknown[] }).data;
  const sessionCount = async () =>
    (await t.database.db.select({ n: count() }).from(sessions))[0]?.n;

  /** Posts a message and waits for its run; returns the answer and what the fake saw. */
  async function run(sessionId: string, body: Record<string, unknown>) {
    const res = await request(
      `/v1/sessions/${sessionId}/messages`,
      post(body, { Accept: "application/json" }),
    );
    return { res, record: await fake.record() };
  }

  /** A 400 naming `path` in the body. */
  async function expectRefused(res: Response, path: string) {
    expect(res.status).toBe(400);
    const problem = await res.json();
    expect(problem.code).toBe("validation_failed");
    expect(problem.errors).toContainEqual(expect.objectContaining({ location: "body", path }));
    return problem;
  }

  it("keeps a session's MCP servers and run caps, and shows them", async () => {
    const plain = await newSession();
    expect(plain).toMatchObject({ mcp_servers: [], max_turns: null, max_budget_usd: null });
    const session = await newSession({
      mcp_servers: ["github", "docs"],
      max_turns: 12,
      max_budget_usd: 0.75,
    });
    expect(session).toMatchObject({
      mcp_servers: ["github", "docs"],
      max_turns: 12,
      max_budget_usd: 0.75,
    });
    const read = await (await request(`/v1/sessions/${session.id}`)).json();
    expect(read).toMatchObject({ mcp_servers: ["github", "docs"], max_turns: 12 });
  });

  it("refuses an MCP server the admin's file does not have, bad caps and NULs, and makes no session", async () => {
    const before = await sessionCount();
    const unknown = await expectRefused(
      await request("/v1/sessions", post({ mcp_servers: ["github", "gitlab"] })),
      "mcp_servers",
    );
    expect(unknown.detail).toContain('no MCP server named "gitlab"');
    expect(unknown.detail).toContain('"github", "docs"');
    for (const [body, path] of [
      [{ mcp_servers: ["github", "github"] }, "mcp_servers"],
      [{ mcp_servers: ["git\u0000hub"] }, "mcp_servers.0"],
      [{ mcp_servers: "github" }, "mcp_servers"],
      [{ max_turns: -1 }, "max_turns"],
      [{ max_turns: 0 }, "max_turns"],
      [{ max_turns: 2.5 }, "max_turns"],
      [{ max_turns: 1_000_000 }, "max_turns"],
      [{ max_budget_usd: 0 }, "max_budget_usd"],
      [{ max_budget_usd: -5 }, "max_budget_usd"],
      [{ max_budget_usd: 1e9 }, "max_budget_usd"],
    ] as const) {
      await expectRefused(await request("/v1/sessions", post(body)), path);
    }
    expect(await sessionCount()).toBe(before);
  });

  it("refuses what a codex session cannot honour: MCP servers, caps on turns or spend, approvals over the API, on the session or its message", async () => {
    const before = await sessionCount();
    for (const [field, value] of [
      ["mcp_servers", ["github"]],
      ["max_turns", 3],
      ["max_budget_usd", 1],
      ["approvals", "api"],
    ] as const) {
      const problem = await expectRefused(
        await request("/v1/sessions", post({ agent: "codex", [field]: value })),
        field,
      );
      expect(problem.detail).toContain("the codex agent cannot honour this");
    }
    expect(await sessionCount()).toBe(before);

    const session = await newSession({ agent: "codex" });
    for (const [field, value] of [
      ["max_turns", 3],
      ["max_budget_usd", 1],
      ["approvals", "api"],
      ["permission_mode", "auto"],
    ] as const) {
      await expectRefused(
        await request(
          `/v1/sessions/${session.id}/messages`,
          post({ text: "hi", [field]: value }, { Prefer: "respond-async" }),
        ),
        field,
      );
    }
    expect(await runsOf(session.id)).toEqual([]);
  });

  it("runs a message with its own permission mode, model and effort (plan, then execute), and the next with the session's", async () => {
    const session = await newSession({ permission_mode: "plan", model: "opus", effort: "low" });
    const flags = (args: string[]) =>
      args.filter(
        (a) => /^--(permission-mode|model|effort)/.test(a) || ["plan", "acceptEdits"].includes(a),
      );
    const planned = await run(session.id, { text: "plan it" });
    expect(planned.res.status).toBe(200);
    const own = await run(session.id, {
      text: "do it",
      permission_mode: "acceptEdits",
      model: "sonnet",
      effort: "high",
    });
    expect(own.res.status).toBe(200);
    const after = await run(session.id, { text: "and now?" });
    expect(flags(own.record.args).join(" ")).toMatch(/acceptEdits/);
    expect(own.record.args.join(" ")).toMatch(/--model[= ]sonnet/);
    expect(own.record.args.join(" ")).toMatch(/--effort[= ]high/);
    for (const { record } of [planned, after]) {
      expect(flags(record.args).join(" ")).toMatch(/plan/);
      expect(record.args.join(" ")).toMatch(/--model[= ]opus/);
      expect(record.args.join(" ")).toMatch(/--effort[= ]low/);
    }
    await expectRefused(
      await request(
        `/v1/sessions/${session.id}/messages`,
        post({ text: "x", model: "no such; model" }, { Prefer: "respond-async" }),
      ),
      "model",
    );
  });

  it("refuses a message's bad attachments and caps, and starts no run", async () => {
    const session = await newSession();
    const png = (data: string) => ({ type: "image", media_type: "image/png", data });
    const cases: Array<[Record<string, unknown>, string]> = [
      // One character of base64 over the bound.
      [{ attachments: [png(`${LARGEST_PNG}AAAA`)] }, "attachments.0.data"],
      [{ attachments: [png("iVBORw0KGgo")] }, "attachments.0.data"],
      [{ attachments: [png("iVBORw0K\nGgo=")] }, "attachments.0.data"],
      [{ attachments: [png("")] }, "attachments.0.data"],
      // The magic bytes of another type.
      [{ attachments: [png(imageData("image/jpeg"))] }, "attachments.0.data"],
      [
        {
          attachments: [{ type: "image", media_type: "image/webp", data: imageData("image/gif") }],
        },
        "attachments.0.data",
      ],
      [
        { attachments: [{ type: "image", media_type: "image/bmp", data: "Qk0=" }] },
        "attachments.0.media_type",
      ],
      [
        { attachments: [{ type: "file", media_type: "image/png", data: PNG_1X1 }] },
        "attachments.0.type",
      ],
      [{ attachments: Array.from({ length: 5 }, () => png(PNG_1X1)) }, "attachments"],
      [{ attachments: [{ ...png(PNG_1X1), name: "x.png" }] }, "attachments.0"],
      [{ max_turns: 0 }, "max_turns"],
      [{ max_turns: 5000 }, "max_turns"],
      [{ max_budget_usd: -0.1 }, "max_budget_usd"],
    ];
    for (const [fields, path] of cases) {
      const res = await request(
        `/v1/sessions/${session.id}/messages`,
        post({ text: "look", ...fields }, { Prefer: "respond-async" }),
      );
      await expectRefused(res, path);
    }
    expect(await runsOf(session.id)).toEqual([]);
  });

  it("takes a message with its images at their largest beyond AGENT_BRIDGE_BODY_LIMIT_BYTES, and nothing bigger", async () => {
    const images = ["image/png", "image/jpeg", "image/gif", "image/webp"].map((type) => ({
      type: "image",
      media_type: type,
      data: imageData(type as "image/png", (MAX_IMAGE_BASE64_CHARS / 4) * 3),
    }));
    // Read whole and validated: the session is looked up only after that.
    const missing = "00000000-0000-4000-8000-000000000000";
    const fits = await request(
      `/v1/sessions/${missing}/messages`,
      post({ text: "x".repeat(3000), attachments: images }),
    );
    expect(fits.status).toBe(404);
    const over = await request(
      `/v1/sessions/${missing}/messages`,
      post({ text: "x".repeat(10_000), attachments: images }),
    );
    expect(over.status).toBe(413);
    // Other routes keep the limit.
    expect((await request("/v1/sessions", post({ title: "x".repeat(5000) }))).status).toBe(413);
  });

  it("gives the run its session's MCP servers in a file of its own, removed after the run; never their secrets in argv", async () => {
    const session = await newSession({ mcp_servers: ["github"] });
    // This run waits for the test, which looks at the run's files meanwhile.
    const release = join(dir, "release");
    await fake.setScenario({ steps: [{ mark: "mcp-run" }, { waitFile: release }, ...reply.steps] });
    const answer = (async () => {
      try {
        await fake.waitForMark("mcp-run");
        const { args } = await fake.record();
        const file = args.find((a) => a.startsWith("--mcp-config="))?.slice(13) ?? "";
        const content = JSON.parse(await readFile(file, "utf8"));
        return { file, content, mode: (await stat(file)).mode & 0o777 };
      } finally {
        await writeFile(release, "");
      }
    })();
    const { res, record } = await run(session.id, { text: "use github" });
    await fake.setScenario(reply);
    expect(res.status).toBe(200);
    const { content, file, mode } = await answer;
    // Just the session's server, readable by the CLI's user alone.
    expect(content).toEqual({
      mcpServers: {
        github: { command: "github-mcp", args: ["stdio"], env: { GITHUB_TOKEN: SECRET_TOKEN } },
      },
    });
    expect(mode).toBe(0o600);
    expect(record.args).toContain("--strict-mcp-config");
    expect(record.args.join(" ")).not.toContain(SECRET_TOKEN);
    expect(existsSync(file)).toBe(false);
  });

  it("ends a run of a session whose MCP server the admin's file no longer has, naming it, without starting the CLI", async () => {
    // Made when the file still had it.
    const session = await createSession(t.database.db, {
      ownerKeyId: null,
      workDir: null,
      title: null,
      agent: "claude",
      permissionMode: "default",
      model: null,
      effort: "low",
      systemPrompt: null,
      worktree: false,
      mcpServers: ["github", "retired"],
      metadata: {},
    });
    const starts = (await fake.invocations()).length;
    const { res } = await run(session.id, { text: "use it" });
    expect((await res.json()).completion).toMatchObject({
      status: "failed",
      error_code: "invalid_run_request",
      error: `the server's MCP configuration has no server named "retired"`,
    });
    expect(await fake.invocations()).toHaveLength(starts);
  });

  it("passes --strict-mcp-config and no MCP configuration for a session without servers", async () => {
    const session = await newSession();
    const { res, record } = await run(session.id, { text: "plain" });
    expect(res.status).toBe(200);
    expect(record.args.filter((a) => a.includes("mcp"))).toEqual(["--strict-mcp-config"]);
  });

  it("caps a run as its message says, else as its session says", async () => {
    const session = await newSession({ max_turns: 4, max_budget_usd: 2 });
    const bySession = await run(session.id, { text: "one" });
    expect(bySession.res.status).toBe(200);
    expect(bySession.record.args).toEqual(
      expect.arrayContaining(["--max-turns=4", "--max-budget-usd=2"]),
    );
    const byMessage = await run(session.id, {
      text: "two",
      max_turns: 1,
      max_budget_usd: 0.25,
    });
    expect(byMessage.res.status).toBe(200);
    const caps = byMessage.record.args.filter((a) => a.startsWith("--max-"));
    expect(caps).toEqual(["--max-budget-usd=0.25", "--max-turns=1"]);
  });

  it("sends a message's images to the CLI as image blocks before its text, and keeps only the text", async () => {
    const session = await newSession();
    const gif = imageData("image/gif");
    const { res, record } = await run(session.id, {
      text: "what are these?",
      attachments: [
        { type: "image", media_type: "image/png", data: PNG_1X1 },
        { type: "image", media_type: "image/gif", data: gif },
      ],
    });
    expect(res.status).toBe(200);
    // The record holds every start's stdin: this run's prompt is the last line.
    expect(JSON.parse(record.stdin.at(-1) ?? "{}").message.content).toEqual([
      { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_1X1 } },
      { type: "image", source: { type: "base64", media_type: "image/gif", data: gif } },
      { type: "text", text: "what are these?" },
    ]);
    const { run: shown } = await res.json();
    expect(shown.prompt).toBe("what are these?");
    expect(JSON.stringify(shown)).not.toContain(PNG_1X1);
  });

  it("holds an Idempotency-Key to the message's images and caps too", async () => {
    const session = await newSession();
    const image = { type: "image", media_type: "image/png", data: PNG_1X1 };
    const send = (body: Record<string, unknown>) =>
      request(
        `/v1/sessions/${session.id}/messages`,
        post(
          { text: "same text", ...body },
          { Prefer: "respond-async", "Idempotency-Key": "key-1" },
        ),
      );
    const first = await send({ attachments: [image], max_turns: 2 });
    expect(first.status).toBe(202);
    const { id } = await first.json();
    const again = await send({ attachments: [image], max_turns: 2 });
    expect((await again.json()).id).toBe(id);
    for (const other of [{ attachments: [image] }, { attachments: [image], max_turns: 3 }, {}]) {
      const res = await send(other);
      expect(res.status).toBe(422);
      expect((await res.json()).code).toBe("idempotency_key_reused");
    }
  });

  it("lets a hook's sessions have MCP servers, refusing one the admin's file does not have", async () => {
    const hook = {
      name: "with-mcp",
      verification: "bearer",
      secret: "bearer-secret-0123456789",
      prompt_template: "Look at {{payload.note}}",
    };
    const before = (await t.database.db.select({ n: count() }).from(hooks))[0]?.n;
    await expectRefused(
      await request("/v1/hooks", post({ ...hook, mcp_servers: ["nope"] })),
      "mcp_servers",
    );
    await expectRefused(
      await request("/v1/hooks", post({ ...hook, agent: "codex", mcp_servers: ["github"] })),
      "mcp_servers",
    );
    expect((await t.database.db.select({ n: count() }).from(hooks))[0]?.n).toBe(before);
    const created = await request("/v1/hooks", post({ ...hook, mcp_servers: ["docs"] }));
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ mcp_servers: ["docs"] });

    const delivered = await request(
      "/v1/hooks/with-mcp/deliveries",
      post({ note: "it" }, { Authorization: `Bearer ${hook.secret}` }),
    );
    expect(delivered.status).toBe(202);
    const { session_id } = await delivered.json();
    const session = await (await request(`/v1/sessions/${session_id}`)).json();
    expect(session.mcp_servers).toEqual(["docs"]);
  });
});
