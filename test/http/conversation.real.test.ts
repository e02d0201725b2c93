import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ConversationItem, createClient } from "../../src/client/index.js";
import { cli } from "../cli/run-cli.js";
import { BACKENDS } from "../support/db.js";
import { PNG_1X1 } from "../support/images.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";
import { type Frame, SseReader } from "../support/sse.js";

// GET /v1/sessions/{id}/messages over real runs of the `claude` binary against the mock Messages
// API: a message with an image whose agent runs a command, a turn that failed on an API error and
// its retry, and a tool its permission mode refuses. On each database: the conversation is read
// from the stored runs and logs, and its pages cut runs in the middle.

describe.each(BACKENDS)("a session's conversation of real claude runs on %s", (backend) => {
  let app: RealClaudeApp;
  beforeAll(async () => {
    app = await realClaudeApp(backend);
  });
  afterAll(() => app.close());

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${app.server.url}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { run: { id: string; created_at: string } };
  };

  it("lists each run's message, text, tool calls with their results, permission answers and end, in order", async () => {
    const client = createClient({ baseUrl: app.server.url });
    const session = await client.createSession();
    app.mock.script(
      {
        blocks: [
          { type: "text", text: "Let me look." },
          { type: "tool_use", name: "Bash", input: { command: "echo hi" } },
        ],
      },
      { blocks: [{ type: "text", text: "It printed hi." }] },
    );
    const first = await post(`/v1/sessions/${session.id}/messages`, {
      text: "what does echo hi print?",
      attachments: [{ type: "image", media_type: "image/png", data: PNG_1X1 }],
    });
    app.mock.script({ error: { status: 400, type: "invalid_request_error", message: "no luck" } });
    const failed = await post(`/v1/sessions/${session.id}/messages`, { text: "and then?" });
    app.mock.script({ blocks: [{ type: "text", text: "Then nothing." }] });
    const retried = await post(`/v1/runs/${failed.run.id}/retry`, {});
    app.mock.script(
      {
        blocks: [
          {
            type: "tool_use",
            name: "Write",
            input: { file_path: join(app.ce.cwd, "x.txt"), content: "x" },
          },
        ],
      },
      { blocks: [{ type: "text", text: "I may not write it." }] },
    );
    const refused = await post(`/v1/sessions/${session.id}/messages`, {
      text: "write x.txt",
      permission_mode: "default",
    });
    const all: ConversationItem[] = [];
    for await (const item of client.messages(session.id)) all.push(item);

    const ended = { live: false, error: null, error_code: null, cost_usd: expect.any(Number) };
    const of = (run: { run: { id: string } }) => ({ run_id: run.run.id, live: false });
    const said = (run: typeof first, seq: number, text: string) => ({
      type: "assistant_text",
      ...of(run),
      seq,
      text,
    });
    const message = (run: typeof first, text: string, trigger: string, images: unknown[] = []) => ({
      type: "user_message",
      ...of(run),
      seq: 0,
      text,
      images,
      trigger,
      created_at: run.run.created_at,
    });
    const end = (run: typeof first, seq: number, status = "succeeded") => ({
      type: "run_end",
      ...of(run),
      ...ended,
      seq,
      status,
    });
    const writing = { file_path: join(app.ce.cwd, "x.txt"), content: "x" };
    // Each item's seq is that of its event in the run's full log (`?events=full`): the first of a
    // type after a position, read back from the log itself.
    const logs = new Map<string, Frame[]>();
    for (const run of [first, failed, retried, refused]) {
      const res = await fetch(
        `${app.server.url}/v1/runs/${run.run.id}/events?events=full&follow=false`,
      );
      logs.set(run.run.id, await SseReader.of(res).events());
    }
    const at = (run: typeof first, type: string, after = 0) => {
      const frame = logs.get(run.run.id)?.find((f) => f.event === type && Number(f.id) > after);
      if (!frame) throw new Error(`no ${type} after ${after} in run ${run.run.id}`);
      return Number(frame.id);
    };
    expect(all).toEqual([
      message(first, "what does echo hi print?", "message", [
        { name: "image-1.png", media_type: "image/png", size_bytes: 70 },
      ]),
      said(first, at(first, "text_delta"), "Let me look."),
      {
        type: "tool_call",
        ...of(first),
        seq: at(first, "tool_call"),
        tool_use_id: expect.any(String),
        tool_name: "Bash",
        kind: "shell_exec",
        input: { command: "echo hi" },
        parent_tool_use_id: null,
        result: { seq: at(first, "tool_result"), is_error: false, content: "hi", truncated: false },
      },
      // The text's deltas as streamed: a blank line parts it from the run's text before.
      said(first, at(first, "text_delta", at(first, "tool_result")), "\n\nIt printed hi."),
      end(first, at(first, "completion")),
      message(failed, "and then?", "message"),
      {
        ...end(failed, at(failed, "completion"), "failed"),
        error_code: "agent_error",
        error: "API Error: 400 no luck",
      },
      message(retried, "and then?", "retry"),
      said(retried, at(retried, "text_delta"), "Then nothing."),
      end(retried, at(retried, "completion")),
      message(refused, "write x.txt", "message"),
      {
        type: "tool_call",
        ...of(refused),
        seq: at(refused, "tool_call"),
        tool_use_id: expect.any(String),
        tool_name: "Write",
        kind: "modify_file",
        input: writing,
        parent_tool_use_id: null,
        result: {
          seq: at(refused, "tool_result"),
          is_error: true,
          content: expect.stringMatching(/^Permission to use Write was denied/),
          truncated: false,
        },
      },
      {
        type: "permission",
        ...of(refused),
        seq: at(refused, "permission_request"),
        request_id: expect.any(String),
        tool_name: "Write",
        tool_use_id: (all[11] as { tool_use_id: string } | undefined)?.tool_use_id,
        input: writing,
        answer: { seq: at(refused, "permission_resolved"), decision: "deny", by: "policy" },
      },
      said(refused, at(refused, "text_delta"), "I may not write it."),
      end(refused, at(refused, "completion")),
    ]);

    // Pages of four: the first ends inside the first run; together they are the whole, once each.
    const pages: ConversationItem[][] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listMessages(session.id, {
        limit: 4,
        ...(cursor ? { cursor } : {}),
      });
      pages.push(page.data);
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    expect(pages.map((p) => p.length)).toEqual([4, 4, 4, 3]);
    expect(pages[1]?.[0]).toEqual(end(first, at(first, "completion")));
    expect(pages.flat()).toEqual(all);

    // The command line prints it, a run after another; without --messages, the session as before.
    const shown = await cli("--url", app.server.url, "sessions", "show", session.id, "--messages");
    expect(shown.code).toBe(0);
    const header = (run: typeof first, trigger: string) =>
      `── run ${run.run.id} · ${trigger} · ${run.run.created_at}`;
    expect(shown.stdout.split("\n")).toEqual([
      header(first, "message"),
      "> what does echo hi print?",
      "> [image-1.png, image/png, 70 bytes]",
      "Let me look.",
      '• Bash (shell_exec) {"command":"echo hi"}',
      "  ok: hi",
      "It printed hi.",
      expect.stringMatching(/^■ succeeded · \$0\.\d{4}$/),
      "",
      header(failed, "message"),
      "> and then?",
      expect.stringMatching(/^■ failed \(agent_error\) · \$0\.\d{4}: API Error: 400 no luck$/),
      "",
      header(retried, "retry"),
      "> and then?",
      "Then nothing.",
      expect.stringMatching(/^■ succeeded · /),
      "",
      header(refused, "message"),
      "> write x.txt",
      `• Write (modify_file) ${JSON.stringify(writing)}`,
      expect.stringMatching(/^ {2}error: Permission to use Write was denied: .{20,}…$/),
      expect.stringMatching(/^\? permission for Write \(request .+\): deny by policy$/),
      "I may not write it.",
      expect.stringMatching(/^■ succeeded · /),
      "",
    ]);
    // docs/conversations.md shows items of the shapes a real run's have, field for field.
    const [documented] = codeBlocks(await docSection("docs/conversations.md", "History"), "json");
    const shapes = (items: ConversationItem[]) =>
      new Map(items.map((item) => [item.type, Object.keys(item).sort()]));
    const real = shapes(all);
    for (const [type, keys] of shapes(JSON.parse(documented ?? "").data)) {
      expect(keys, type).toEqual(real.get(type));
    }
    const plain = await cli("--url", app.server.url, "sessions", "show", session.id);
    expect(JSON.parse(plain.stdout)).toMatchObject({ id: session.id, usage: { runs: 4 } });
  });
});
