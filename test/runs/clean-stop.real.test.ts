import { execFileSync } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import type { MessagesBody, MockAnthropic, MockTurn } from "../support/mock-anthropic.js";
import { type RealClaudeApp, realClaudeApp } from "../support/real-claude.js";
import { type Frame, SseReader } from "../support/sse.js";

// A session's `require_clean_work_dir` with the real `claude` binary against the mock Messages
// API, in bypass: the bridge's Stop hook runs `git status --porcelain` in the work dir when the
// agent would end its turn, and sends it back while changes are left, at most twice a turn.

const data = <T = Record<string, unknown>>(frame: Frame | undefined) => frame?.data as T;
const text = (t: string): MockTurn => ({ blocks: [{ type: "text", text: t }] });
const bash = (command: string): MockTurn => ({
  blocks: [{ type: "tool_use", name: "Bash", input: { command, description: command } }],
});

/** The text of the last user message of a request. */
function lastUserText(body: MessagesBody | undefined): string {
  const last = body?.messages.at(-1) as { content: unknown } | undefined;
  const content = last?.content;
  if (typeof content === "string") return content;
  return (Array.isArray(content) ? content : [])
    .map((b: { text?: string }) => b.text ?? "")
    .join("\n");
}

describe.each(REAL_CLI_BACKENDS)(
  "the clean-stop check with the real claude CLI on %s",
  (backend) => {
    let app: RealClaudeApp;
    let mock: MockAnthropic;

    beforeAll(async () => {
      app = await realClaudeApp(backend);
      ({ mock } = app);
    });
    afterAll(() => app.close());

    /** A git repository in the work dir, with one commit. */
    const repo = async (name: string) => {
      const dir = join(app.ce.cwd, name);
      await mkdir(dir);
      const git = (...args: string[]) => execFileSync("git", args, { cwd: dir });
      git("init", "-q");
      git("config", "user.email", "agent@example.com");
      git("config", "user.name", "agent");
      git("commit", "-q", "--allow-empty", "-m", "start");
      return { dir, git };
    };
    const post = (path: string, body: unknown) =>
      fetch(`${app.server.url}${path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    /** A message to a new session with the check on, in `workDir`; its full view, to the end. */
    const run = async (workDir: string | undefined, prompt: string) => {
      const created = await post("/v1/sessions", {
        require_clean_work_dir: true,
        ...(workDir ? { work_dir: workDir } : {}),
      });
      expect(created.status).toBe(201);
      const session = (await created.json()) as { id: string; require_clean_work_dir: boolean };
      expect(session.require_clean_work_dir).toBe(true);
      const res = await post(`/v1/sessions/${session.id}/messages?events=full`, { text: prompt });
      expect(res.status).toBe(200);
      const frames = await SseReader.of(res).until("completion");
      return {
        types: frames.map((f) => f.event),
        checks: frames.filter((f) => f.event === "stop_check").map((f) => data(f)),
        completion: data(frames.at(-1)),
      };
    };

    it("an agent that stops with an uncommitted file is sent back with the file named, commits it, and then stops clean", async () => {
      const { dir, git } = await repo("commits");
      mock.script(
        {
          blocks: [
            {
              type: "tool_use",
              name: "Write",
              input: { file_path: join(dir, "notes.txt"), content: "hello\n" },
            },
          ],
        },
        text("written"),
        bash("git add -A && git commit -q -m notes"),
        text("committed"),
      );
      const seen = mock.mainRequests().length;
      const { types, checks, completion } = await run(dir, "write notes");

      expect(checks).toEqual([
        { type: "stop_check", dirty: true, files: ["notes.txt"], blocked: true, attempt: 1 },
        { type: "stop_check", dirty: false, files: [], blocked: false, attempt: 2 },
      ]);
      // The model's request after its first stop carries the bridge's reason as the user's.
      const sentBack = lastUserText(mock.mainRequests()[seen + 2]);
      expect(sentBack).toContain('Stop:Callback hook blocking error from command: "callback": ');
      expect(sentBack).toContain("?? notes.txt");
      expect(sentBack).toContain("Commit them, or say why");
      expect(completion).toMatchObject({ status: "succeeded", work_dir_dirty: false });
      // The CLI's line of the feedback is no client's input, and the turn has one completion.
      expect(types).not.toContain("user_input");
      expect(types.filter((t) => t === "completion")).toHaveLength(1);
      expect(git("status", "--porcelain").toString()).toBe("");
    });

    it("an agent that keeps stopping dirty is sent back twice, then let stop, and its completion says the work dir is dirty", async () => {
      const { dir } = await repo("stays-dirty");
      mock.script(
        {
          blocks: [
            {
              type: "tool_use",
              name: "Write",
              input: { file_path: join(dir, "left.txt"), content: "left\n" },
            },
          ],
        },
        text("done"),
        text("still done"),
        text("I leave left.txt for the user to review"),
      );
      const { checks, completion } = await run(dir, "leave a file");

      expect(checks.map((c) => [c.dirty, c.blocked, c.attempt])).toEqual([
        [true, true, 1],
        [true, true, 2],
        [true, false, 3],
      ]);
      expect(checks[2]).toMatchObject({ files: ["left.txt"] });
      expect(completion).toMatchObject({
        status: "succeeded",
        result: "I leave left.txt for the user to review",
        work_dir_dirty: true,
      });
    });

    it("a work dir that is no git repository lets the agent stop, said once", async () => {
      mock.script(text("nothing to commit here"));
      const { checks, completion } = await run(undefined, "say something");

      expect(checks).toEqual([
        {
          type: "stop_check",
          dirty: false,
          files: [],
          blocked: false,
          attempt: 1,
          not_repository: true,
        },
      ]);
      expect(completion).toMatchObject({ status: "succeeded" });
      expect(completion).not.toHaveProperty("work_dir_dirty");
    });
  },
);
