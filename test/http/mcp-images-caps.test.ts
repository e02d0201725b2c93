import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { count } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_IMAGE_BASE64_CHARS } from "../../src/agents/images.js";
import type {
  CreateSession,
  components,
  FinishedRun,
  Problem,
  Run,
} from "../../src/client/index.js";
import { hooks, sessions } from "../../src/store/schema.js";
import { createSession } from "../../src/store/sessions.js";
import { createTestApp, type TestApp } from "../support/app.js";
import { appClient, untyped } from "../support/app-client.js";
import { BACKENDS } from "../support/db.js";
import { type FakeCli, fakeCli } from "../support/fake-cli.js";
import { streamedReply } from "../support/fake-scenarios.js";
import { imageData, LARGEST_PNG, PNG_1X1 } from "../support/images.js";

// A session's MCP servers, a message's images and the caps of a run, as the API takes them (and
// refuses them: 400, nothing written, nothing run) and as they reach the CLI's command line and
// stdin, with the scripted fake CLI. test/runs/mcp-images-caps.real.test.ts shows the real CLI
// doing what they ask.

const SECRET_TOKEN = "ghp_not-in-any-argv";

type PostMessage = components["schemas"]["PostMessage"];

/** A raw POST, for bodies the contract's types forbid (wrong types, unknown fields). */
const post = (body: unknown, headers: Record<string, string> = {}) => ({
  method: "POST",
  headers: { "Content-Type": "application/json", ...headers },
  body: JSON.stringify(body),
});

describe.each(BACKENDS)("MCP servers, images and run caps through the API on %s", (backend) => {
  let dir: string;
  let fake: FakeCli;
  let t: TestApp;
  let api: ReturnType<typeof appClient>;
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
    api = appClient(t.app);
  });
  afterAll(async () => {
    await t.close();
    await fake.cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  const request = (path: string, init?: RequestInit) => t.app.request(path, init);
  const postSession = (body: CreateSession) => api.POST("/v1/sessions", { body });
  const newSession = async (body: CreateSession = {}) => {
    const { data, response } = await postSession(body);
    expect(response.status).toBe(201);
    return data as NonNullable<typeof data>;
  };
  const runsOf = async (id: string) => (await api.listRuns({ sessionId: id })).data;
  const sessionCount = async () =>
    (await t.database.db.select({ n: count() }).from(sessions))[0]?.n;
  /** A message answered at once with its queued run (`Prefer: respond-async`). */
  const queue = (sessionId: string, body: PostMessage, idempotencyKey?: string) =>
    api.POST("/v1/sessions/{id}/messages", {
      params: {
        path: { id: sessionId },
        header: {
          prefer: "respond-async",
          ...(idempotencyKey ? { "idempotency-key": idempotencyKey } : {}),
        },
      },
      body,
    });

  /** Posts a message and waits for its run; returns the answer and what the fake saw. */
  async function run(sessionId: string, body: PostMessage) {
    const answer = await api.POST("/v1/sessions/{id}/messages", {
      params: { path: { id: sessionId } },
      body,
      headers: { Accept: "application/json" },
    });
    // With `Accept: application/json` a message is answered with its finished run.
    return {
      res: answer.response,
      finished: answer.data as FinishedRun | undefined,
      record: await fake.record(),
    };
  }

  /** A 400 naming `path` in the body. */
  function expectRefused(
    { error, response }: { error?: Problem; response: Response },
    path: string,
  ) {
    expect(response.status).toBe(400);
    expect(error?.code).toBe("validation_failed");
    expect(error?.errors).toContainEqual(expect.objectContaining({ location: "body", path }));
    return error as Problem;
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
    const read = await api.getSession(session.id);
    expect(read).toMatchObject({ mcp_servers: ["github", "docs"], max_turns: 12 });
  });

  it("refuses an MCP server the admin's file does not have, bad caps and NULs, and makes no session", async () => {
    const before = await sessionCount();
    const unknown = expectRefused(
      await postSession({ mcp_servers: ["github", "gitlab"] }),
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
      // Raw: some of these are what the contract's types forbid.
      expectRefused(await untyped(request("/v1/sessions", post(body))), path);
    }
    expect(await sessionCount()).toBe(before);
  });

  it("refuses what a codex session cannot honour: MCP servers, a cap on turns, approvals over the API, on the session or its message; a cap on spend, which the model gateway keeps, it takes", async () => {
    const before = await sessionCount();
    const asks: [string, CreateSession][] = [
      ["mcp_servers", { mcp_servers: ["github"] }],
      ["max_turns", { max_turns: 3 }],
      ["approvals", { approvals: "api" }],
    ];
    for (const [field, asked] of asks) {
      const problem = expectRefused(await postSession({ agent: "codex", ...asked }), field);
      expect(problem.detail).toContain("the codex agent cannot honour this");
    }
    expect(await sessionCount()).toBe(before);

    const session = await newSession({ agent: "codex", max_budget_usd: 1 });
    expect(session).toMatchObject({ agent: "codex", max_budget_usd: 1 });
    for (const [field, asked] of [
      ["max_turns", { max_turns: 3 }],
      ["approvals", { approvals: "api" }],
      ["permission_mode", { permission_mode: "auto" }],
    ] as const) {
      expectRefused(await queue(session.id, { text: "hi", ...asked }), field);
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
    expectRefused(await queue(session.id, { text: "x", model: "no such; model" }), "model");
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
      // Raw: some of these are what the contract's types forbid.
      const res = request(
        `/v1/sessions/${session.id}/messages`,
        post({ text: "look", ...fields }, { Prefer: "respond-async" }),
      );
      expectRefused(await untyped(res), path);
    }
    expect(await runsOf(session.id)).toEqual([]);
  });

  it("takes a message with its images at their largest beyond AGENT_BRIDGE_BODY_LIMIT_BYTES, and nothing bigger", async () => {
    const types = ["image/png", "image/jpeg", "image/gif", "image/webp"] as const;
    const images = types.map((type) => ({
      type: "image" as const,
      media_type: type,
      data: imageData(type, (MAX_IMAGE_BASE64_CHARS / 4) * 3),
    }));
    // Read whole and validated: the session is looked up only after that.
    const missing = "00000000-0000-4000-8000-000000000000";
    const message = (text: string) =>
      api.POST("/v1/sessions/{id}/messages", {
        params: { path: { id: missing } },
        body: { text, attachments: images },
      });
    expect((await message("x".repeat(3000))).response.status).toBe(404);
    expect((await message("x".repeat(10_000))).response.status).toBe(413);
    // Other routes keep the limit.
    expect((await postSession({ title: "x".repeat(5000) })).response.status).toBe(413);
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
    const { finished } = await run(session.id, { text: "use it" });
    expect(finished?.completion).toMatchObject({
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
    const { res, finished, record } = await run(session.id, {
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
    const shown = finished?.run;
    expect(shown?.prompt).toBe("what are these?");
    expect(JSON.stringify(shown)).not.toContain(PNG_1X1);
  });

  it("holds an Idempotency-Key to the message's images and caps too", async () => {
    const session = await newSession();
    const image = { type: "image", media_type: "image/png", data: PNG_1X1 } as const;
    const send = (body: Omit<PostMessage, "text">) =>
      queue(session.id, { text: "same text", ...body }, "key-1");
    const first = await send({ attachments: [image], max_turns: 2 });
    expect(first.response.status).toBe(202);
    const { id } = first.data as Run;
    const again = await send({ attachments: [image], max_turns: 2 });
    expect((again.data as Run).id).toBe(id);
    for (const other of [{ attachments: [image] }, { attachments: [image], max_turns: 3 }, {}]) {
      const { error, response } = await send(other);
      expect(response.status).toBe(422);
      expect(error?.code).toBe("idempotency_key_reused");
    }
  });

  it("lets a hook's sessions have MCP servers, refusing one the admin's file does not have", async () => {
    const hook = {
      name: "with-mcp",
      verification: "bearer",
      secret: "bearer-secret-0123456789",
      prompt_template: "Look at {{payload.note}}",
    } as const;
    const createHook = (fields: Omit<components["schemas"]["CreateHook"], keyof typeof hook>) =>
      api.POST("/v1/hooks", { body: { ...hook, ...fields } });
    const before = (await t.database.db.select({ n: count() }).from(hooks))[0]?.n;
    expectRefused(await createHook({ mcp_servers: ["nope"] }), "mcp_servers");
    expectRefused(await createHook({ agent: "codex", mcp_servers: ["github"] }), "mcp_servers");
    expect((await t.database.db.select({ n: count() }).from(hooks))[0]?.n).toBe(before);
    const created = await createHook({ mcp_servers: ["docs"] });
    expect(created.response.status).toBe(201);
    expect(created.data).toMatchObject({ mcp_servers: ["docs"] });

    // Raw: the contract types a delivery's payload as an empty object.
    const delivered = await request(
      "/v1/hooks/with-mcp/deliveries",
      post({ note: "it" }, { Authorization: `Bearer ${hook.secret}` }),
    );
    expect(delivered.status).toBe(202);
    const { session_id } = await delivered.json();
    const session = await api.getSession(session_id);
    expect(session.mcp_servers).toEqual(["docs"]);
  });
});
