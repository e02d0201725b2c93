import { describe, expect, it } from "vitest";
import {
  BASE_ARGS,
  buildClaudeArgs,
  type CommandInput,
  userMessageLine,
} from "../../../src/agents/claude/command.js";
import { InvalidRunRequestError } from "../../../src/process/errors.js";

const SID = "11111111-2222-3333-4444-555555555555";
const base: CommandInput = { claudeSessionId: SID, resume: false, permissionMode: "default" };

/** The value following `flag`, or undefined when the flag is absent. */
function flagValue(args: string[], flag: string): string | undefined {
  const i = args.indexOf(flag);
  return i === -1 ? undefined : args[i + 1];
}

describe("buildClaudeArgs", () => {
  it("starts with the one-shot stream-json flags, the stdio permission prompt tool and the replay of user messages", () => {
    const args = buildClaudeArgs(base);
    expect(args.slice(0, BASE_ARGS.length)).toEqual([
      "-p",
      "--input-format",
      "stream-json",
      "--output-format",
      "stream-json",
      "--verbose",
      "--include-partial-messages",
      "--permission-prompt-tool",
      "stdio",
      "--replay-user-messages",
    ]);
  });

  it("uses --session-id for a first run and --resume once the CLI session exists", () => {
    const first = buildClaudeArgs(base);
    expect(flagValue(first, "--session-id")).toBe(SID);
    expect(first).not.toContain("--resume");
    const next = buildClaudeArgs({ ...base, resume: true });
    expect(flagValue(next, "--resume")).toBe(SID);
    expect(next).not.toContain("--session-id");
  });

  it("resumes at a given message only with --resume, as one --resume-session-at=<uuid> argument", () => {
    const at = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    expect(buildClaudeArgs({ ...base, resume: true, resumeAt: at })).toContain(
      `--resume-session-at=${at}`,
    );
    // A run that starts the session (the CLI had none to resume) has nothing to resume at.
    expect(buildClaudeArgs({ ...base, resumeAt: at }).join(" ")).not.toContain("--resume");
    expect(buildClaudeArgs({ ...base, resume: true }).join(" ")).not.toContain("resume-session-at");
  });

  it("starts a fork's session as a fork of the original's conversation at its message, and resumes its own after", () => {
    const forkOf = { agentSessionId: "11111111-2222-3333-4444-555555555555", resumeAt: "at-uuid" };
    const first = buildClaudeArgs({ ...base, forkOf });
    expect(first.slice(BASE_ARGS.length, BASE_ARGS.length + 4)).toEqual([
      `--resume=${forkOf.agentSessionId}`,
      "--fork-session",
      `--session-id=${SID}`,
      "--resume-session-at=at-uuid",
    ]);
    const next = buildClaudeArgs({ ...base, forkOf, resume: true });
    expect(flagValue(next, "--resume")).toBe(SID);
    expect(next).not.toContain("--fork-session");
  });

  it("adds -w with the worktree name only when given", () => {
    expect(buildClaudeArgs(base)).not.toContain("-w");
    expect(flagValue(buildClaudeArgs({ ...base, worktree: "sess-42" }), "-w")).toBe("sess-42");
  });

  it("refuses a worktree name that the CLI would read as a flag (-w takes an optional value)", () => {
    expect(() => buildClaudeArgs({ ...base, worktree: "--help" })).toThrow(InvalidRunRequestError);
    expect(() => buildClaudeArgs({ ...base, worktree: "" })).toThrow(InvalidRunRequestError);
  });

  it("refuses an empty session id", () => {
    expect(() => buildClaudeArgs({ ...base, claudeSessionId: "" })).toThrow(InvalidRunRequestError);
  });

  it.each(["default", "acceptEdits", "auto", "plan", "dontAsk", "bypassPermissions"] as const)(
    "passes permission mode %s as --permission-mode",
    (mode) => {
      const args = buildClaudeArgs({ ...base, permissionMode: mode });
      expect(flagValue(args, "--permission-mode")).toBe(mode);
      expect(args).not.toContain("--dangerously-skip-permissions");
    },
  );

  it("turns the dangerously-skip-permissions mode into its own flag", () => {
    const args = buildClaudeArgs({ ...base, permissionMode: "dangerously-skip-permissions" });
    expect(args).toContain("--dangerously-skip-permissions");
    expect(args).not.toContain("--permission-mode");
  });

  it("passes a spending cap as one --max-budget-usd=<usd> argument, in micro-dollars and never 0", () => {
    expect(buildClaudeArgs(base).some((a) => a.startsWith("--max-budget-usd"))).toBe(false);
    const capped = (usd: number) =>
      buildClaudeArgs({ ...base, maxBudgetUsd: usd }).filter((a) =>
        a.startsWith("--max-budget-usd"),
      );
    expect(capped(0.08)).toEqual(["--max-budget-usd=0.08"]);
    expect(capped(0.5 - 0.42000000000000004)).toEqual(["--max-budget-usd=0.08"]);
    expect(capped(12.3456789)).toEqual(["--max-budget-usd=12.345679"]);
    expect(capped(1e-9)).toEqual(["--max-budget-usd=0.000001"]);
  });

  it("adds --effort, --model and --append-system-prompt only when set", () => {
    const plain = buildClaudeArgs(base);
    for (const flag of ["--effort", "--model", "--append-system-prompt"])
      expect(plain).not.toContain(flag);
    const args = buildClaudeArgs({
      ...base,
      effort: "high",
      model: "claude-sonnet-4-5",
      appendSystemPrompt: "Be brief.\n--help",
    });
    expect(flagValue(args, "--effort")).toBe("high");
    expect(flagValue(args, "--model")).toBe("claude-sonnet-4-5");
    // A required option value is taken as it is, even when it looks like a flag.
    expect(flagValue(args, "--append-system-prompt")).toBe("Be brief.\n--help");
    expect(buildClaudeArgs({ ...base, model: "", appendSystemPrompt: "" })).toEqual(plain);
  });

  it("never puts the prompt in argv: there is no prompt argument at all", () => {
    const args = buildClaudeArgs({
      ...base,
      worktree: "w1",
      effort: "low",
      model: "m",
      appendSystemPrompt: "s",
    });
    expect(args).toEqual([
      ...BASE_ARGS,
      "--session-id",
      SID,
      "-w",
      "w1",
      "--permission-mode",
      "default",
      "--effort",
      "low",
      "--model",
      "m",
      "--append-system-prompt",
      "s",
      "--strict-mcp-config",
    ]);
  });

  it("always passes --strict-mcp-config, so no MCP configuration but the run's own is loaded", () => {
    expect(buildClaudeArgs(base).filter((a) => a.includes("mcp"))).toEqual(["--strict-mcp-config"]);
    const args = buildClaudeArgs({ ...base, mcpConfigFile: "/tmp/run-1/mcp.json" });
    // One argument: the option is variadic, and `=` keeps the next flag from becoming a file.
    expect(args.filter((a) => a.includes("mcp"))).toEqual([
      "--mcp-config=/tmp/run-1/mcp.json",
      "--strict-mcp-config",
    ]);
  });

  it("passes the session's allowed tool rules one --allowedTools=<rule> each, spaces kept", () => {
    expect(buildClaudeArgs(base).some((a) => a.startsWith("--allowedTools"))).toBe(false);
    const args = buildClaudeArgs({ ...base, allowedTools: ["Write", "Bash(echo hi *)"] });
    expect(args.filter((a) => a.startsWith("--allowedTools"))).toEqual([
      "--allowedTools=Write",
      "--allowedTools=Bash(echo hi *)",
    ]);
  });

  it("passes a cap on turns as one --max-turns=<n> argument, only when set", () => {
    expect(buildClaudeArgs(base).some((a) => a.startsWith("--max-turns"))).toBe(false);
    const args = buildClaudeArgs({ ...base, maxTurns: 3 });
    expect(args.filter((a) => a.startsWith("--max-turns"))).toEqual(["--max-turns=3"]);
  });
});

describe("userMessageLine", () => {
  it("is one stream-json user message line holding the prompt as text", () => {
    const line = userMessageLine("--help");
    expect(line.endsWith("\n")).toBe(true);
    expect(line.slice(0, -1)).not.toContain("\n");
    expect(line).toBe(
      '{"type":"user","message":{"role":"user","content":[{"type":"text","text":"--help"}]},"parent_tool_use_id":null,"session_id":""}\n',
    );
  });

  it("keeps newlines and quotes of the prompt inside the JSON string", () => {
    const prompt = 'line 1\nline 2 "quoted"\n--dangerously-skip-permissions';
    const line = userMessageLine(prompt);
    expect(line.split("\n")).toHaveLength(2);
    expect(JSON.parse(line).message.content[0].text).toBe(prompt);
  });

  it("puts images first, as base64 image blocks, then the prompt", () => {
    const line = userMessageLine("what is this?", [
      { mediaType: "image/png", data: "iVBORw0KGgo=" },
      { mediaType: "image/webp", data: "UklGRg==" },
    ]);
    expect(JSON.parse(line).message.content).toEqual([
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { type: "base64", media_type: "image/webp", data: "UklGRg==" } },
      { type: "text", text: "what is this?" },
    ]);
  });
});
