import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { PNG_1X1 } from "../support/images.js";
import {
  type MessagesBody,
  type MockAnthropic,
  startMockAnthropic,
  toolResultText,
} from "../support/mock-anthropic.js";
import { SseReader } from "../support/sse.js";

// What a session's MCP servers, a message's images and a run's caps do with the real `claude`
// binary against the mock Messages API: the admin's server named by the session is started
// (connected, says the run's session_status) and offered to the model (and no other: neither the
// admin's others nor the work dir's .mcp.json), its tool's calls are `generic` tool calls,
// an image reaches the API as an image block, and a run stopped by its cap on turns or spend ends
// with that cap's error code. On the embedded database alone: what the database does with these
// fields (both kinds) is in test/http/mcp-images-caps.test.ts, and each real run costs seconds.

const MCP_ECHO = resolve(import.meta.dirname, "../support/mcp-echo.mjs");

/**
 * A stdio server of mcp-echo.mjs (copied to `script`) whose one tool is named `tool`. The CLI
 * starts it in the run's sandbox, where only the system and the run's own directories are: the
 * script lies in the work dir, and `node` is found on PATH (this checkout and this test's Node
 * may lie where the sandbox hides, as in a clone under /tmp).
 */
const echoServer = (script: string, tool: string) => ({
  command: "node",
  args: [script],
  env: { MCP_ECHO_TOOL: tool },
});

/** Tokens that make one turn cost a noticeable amount at the CLI's prices. */
const COSTLY = { input_tokens: 100_000, output_tokens: 1_000 };

const bash = (command: string) => ({
  blocks: [{ type: "tool_use" as const, name: "Bash", input: { command } }],
});

describe("MCP servers, images and run caps with the real CLI", () => {
  let mock: MockAnthropic;
  let ce: ClaudeEnv;
  let dir: string;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };

  beforeAll(async () => {
    mock = await startMockAnthropic({ quiet: true });
    ce = await makeClaudeEnv(mock.url);
    dir = await mkdtemp(join(tmpdir(), "mcp-admin-"));
    const script = join(ce.cwd, "mcp-echo.mjs");
    await copyFile(MCP_ECHO, script);
    const mcpConfig = join(dir, "mcp.json");
    await writeFile(
      mcpConfig,
      JSON.stringify({
        mcpServers: {
          echo: echoServer(script, "admin_echo"),
          other: echoServer(script, "other_echo"),
        },
      }),
    );
    // A server of the work dir's own, which the CLI would load if it were not told not to.
    await writeFile(
      join(ce.cwd, ".mcp.json"),
      JSON.stringify({ mcpServers: { project: echoServer(script, "project_echo") } }),
    );
    t = await createTestApp("pglite", {
      ...ce.env,
      AGENT_BRIDGE_WORK_DIR: ce.cwd,
      AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
      AGENT_BRIDGE_MCP_CONFIG: mcpConfig,
    });
    server = await listen(t.app);
  });
  afterAll(async () => {
    await server.close();
    await t.close();
    await mock.close();
    await ce.cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  const call = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const newSession = async (body: Record<string, unknown> = {}): Promise<string> =>
    (await (await call("/v1/sessions", body)).json()).id;
  /** Posts a message and waits for its run; returns the run and its completion. */
  const finish = async (sessionId: string, body: Record<string, unknown>) => {
    const res = await call(`/v1/sessions/${sessionId}/messages`, body, {
      Accept: "application/json",
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { run: { id: string }; completion: Record<string, unknown> };
  };
  const message = async (sessionId: string, body: Record<string, unknown>) =>
    (await finish(sessionId, body)).completion;
  /** The main requests the mock got from here on, once `during` is done. */
  const requestsDuring = async (during: () => Promise<unknown>): Promise<MessagesBody[]> => {
    const before = mock.mainRequests().length;
    await during();
    return mock.mainRequests().slice(before);
  };

  it("starts the session's MCP server from the admin's file and offers its tool, and loads no other; the full view shows the server connected and the call as a generic tool call", async () => {
    const session = await newSession({ mcp_servers: ["echo"] });
    const tool = "mcp__echo__admin_echo";
    // The CLI defers MCP tools: the model loads the tool with ToolSearch, then calls it.
    mock.script(
      { blocks: [{ type: "tool_use", name: "ToolSearch", input: { query: `select:${tool}` } }] },
      { blocks: [{ type: "tool_use", name: tool, input: { text: "pong-4711" } }] },
      { blocks: [{ type: "text", text: "Echoed." }] },
    );
    let run = { id: "" };
    let completion: Record<string, unknown> = {};
    const [first, loaded, answered] = await requestsDuring(async () => {
      ({ run, completion } = await finish(session, {
        text: "Echo pong-4711 through the MCP tool.",
      }));
    });
    expect(completion).toMatchObject({ status: "succeeded", result: "Echoed." });
    // Offered from the first request on (named among the deferred tools) ...
    const offered = JSON.stringify(first);
    expect(offered).toContain(tool);
    for (const absent of ["other_echo", "project_echo"]) expect(offered).not.toContain(absent);
    // ... in `tools` with its schema once loaded, and the server answered the call.
    expect(loaded?.tools).toContainEqual(
      expect.objectContaining({
        name: tool,
        input_schema: expect.objectContaining({ required: ["text"] }),
      }),
    );
    expect(toolResultText(answered)).toBe("pong-4711");

    const full = await SseReader.of(
      await fetch(`${server.url}/v1/runs/${run.id}/events?events=full`),
    ).events();
    const data = (event: string) =>
      full.filter((f) => f.event === event).map((f) => f.data as Record<string, unknown>);
    // The CLI's init line says how its MCP servers are: this one started.
    expect(data("session_status")).toEqual([
      expect.objectContaining({ mcp_servers: [{ name: "echo", status: "connected" }] }),
    ]);
    const [echo, ...more] = data("tool_call").filter((c) => c.tool_name === tool);
    expect(more).toEqual([]);
    expect(echo).toMatchObject({
      kind: "generic",
      normalized: { kind: "generic" },
      input: { text: "pong-4711" },
    });
    expect(data("tool_update").filter((u) => u.tool_use_id === echo?.tool_use_id)).toEqual([
      {
        type: "tool_update",
        tool_use_id: echo?.tool_use_id,
        status: "complete",
        normalized: { kind: "generic", output: "pong-4711" },
      },
    ]);
  });

  it("sends an image attachment to the Messages API as an image block before the text", async () => {
    const session = await newSession();
    mock.script({ blocks: [{ type: "text", text: "A single pixel." }] });
    let completion: Record<string, unknown> = {};
    const [request] = await requestsDuring(async () => {
      completion = await message(session, {
        text: "What is in this image?",
        attachments: [{ type: "image", media_type: "image/png", data: PNG_1X1 }],
      });
    });
    expect(completion).toMatchObject({ status: "succeeded", result: "A single pixel." });
    const prompt = request?.messages.filter((m) => m.role === "user").at(-1);
    const blocks = Array.isArray(prompt?.content) ? prompt.content : [];
    const image = blocks.findIndex((b) => b.type === "image");
    expect(blocks[image]).toEqual({
      type: "image",
      source: { type: "base64", media_type: "image/png", data: PNG_1X1 },
    });
    // The CLI ends the text with a newline when an image comes before it.
    const text = blocks.findIndex(
      (b) => typeof b.text === "string" && b.text.trim() === "What is in this image?",
    );
    expect(text).toBeGreaterThan(image);
    // A session without MCP servers gets none, not even the work dir's own.
    expect(JSON.stringify(request)).not.toContain("mcp__");
  });

  it("ends a run stopped by its session's cap on turns with max_turns; a message's own cap wins", async () => {
    const session = await newSession({ max_turns: 1 });
    // Had the CLI gone on, its next request would get the mock's default answer and succeed.
    mock.script(bash("echo one"));
    const stopped = await message(session, { text: "Run echo one, then answer." });
    expect(stopped).toMatchObject({
      status: "failed",
      is_error: true,
      error_code: "max_turns",
      error: "Reached maximum number of turns (1)",
    });

    mock.script(bash("echo two"), { blocks: [{ type: "text", text: "Done in two." }] });
    const allowed = await message(session, { text: "Now finish.", max_turns: 3 });
    expect(allowed).toMatchObject({ status: "succeeded", result: "Done in two." });
  });

  it("ends a run stopped by its own max_budget_usd with max_budget", async () => {
    const session = await newSession();
    mock.script(
      { ...bash("echo costly"), usage: COSTLY },
      { blocks: [{ type: "text", text: "never reached" }], usage: COSTLY },
    );
    const stopped = await message(session, { text: "Spend.", max_budget_usd: 0.0001 });
    expect(stopped).toMatchObject({
      status: "failed",
      is_error: true,
      error_code: "max_budget",
      error: "Reached maximum budget ($0.0001)",
    });
  });
});
