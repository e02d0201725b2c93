import { describe, expect, it } from "vitest";
import {
  globMatches,
  matchToolRule,
  type RunToolRules,
  toolRuleReason,
} from "../src/tool-rules.js";

// Which rule decides a tool use: the key's list, then the session's, the first match winning;
// `*` in a pattern matches any run of characters, a command pattern the whole command.

const rules = (key: RunToolRules["key"], session: RunToolRules["session"] = []) => ({
  key,
  session,
});

describe("globMatches", () => {
  it("matches `*` as any run (empty, newlines) and the rest literally", () => {
    expect(globMatches("a*c", "ac")).toBe(true);
    expect(globMatches("a*c", "a\nb\nc")).toBe(true);
    expect(globMatches("a*c", "acx")).toBe(false);
    expect(globMatches("*", "")).toBe(true);
    expect(globMatches("a.c", "abc")).toBe(false);
    expect(globMatches("*ab*ab*", "xabyyab")).toBe(true);
  });

  it("a pattern of many `*` against a long command that does not match answers false, quickly", () => {
    const pattern = `${"*a".repeat(100)}*b`;
    expect(globMatches(pattern, "a".repeat(100_000))).toBe(false);
  });
});

describe("matchToolRule", () => {
  it("a command pattern matches the whole command, `*` any run of characters; without `*`, the command exactly", () => {
    const list = rules([{ tool: "Bash", command: "rm *", decision: "ask" }]);
    expect(matchToolRule(list, "Bash", { command: "rm -rf x" })?.rule.decision).toBe("ask");
    expect(matchToolRule(list, "Bash", { command: "  rm -rf x\n" })?.index).toBe(0);
    expect(matchToolRule(list, "Bash", { command: "ls; rm x" })).toBeUndefined();
    expect(matchToolRule(list, "Bash", { command: "rm" })).toBeUndefined();
    expect(matchToolRule(list, "Read", { command: "rm x" })).toBeUndefined();
    const exact = rules([{ tool: "Bash", command: "make test", decision: "deny" }]);
    expect(matchToolRule(exact, "Bash", { command: "make test" })).toBeDefined();
    expect(matchToolRule(exact, "Bash", { command: "make test2" })).toBeUndefined();
    // Regex characters are themselves.
    const dots = rules([{ tool: "Bash", command: "cat a.txt", decision: "deny" }]);
    expect(matchToolRule(dots, "Bash", { command: "cat abtxt" })).toBeUndefined();
  });

  it("a tool pattern matches names by glob; a rule without command matches any input", () => {
    const list = rules([{ tool: "mcp__github__*", decision: "deny" }]);
    expect(matchToolRule(list, "mcp__github__create_issue", {})?.rule.decision).toBe("deny");
    expect(matchToolRule(list, "mcp__gitlab__x", {})).toBeUndefined();
  });

  it("the key's rules come first, then the session's; the first match wins, `allow` included", () => {
    const list = rules(
      [
        { tool: "Bash", command: "ls*", decision: "allow" },
        { tool: "Bash", decision: "deny" },
      ],
      [{ tool: "*", decision: "ask" }],
    );
    expect(matchToolRule(list, "Bash", { command: "ls -l" })).toMatchObject({
      source: "key",
      index: 0,
      rule: { decision: "allow" },
    });
    expect(matchToolRule(list, "Bash", { command: "cat x" })).toMatchObject({
      source: "key",
      index: 1,
    });
    expect(matchToolRule(list, "Write", {})).toMatchObject({ source: "session", index: 0 });
  });

  it("presets stand for their rules at their place: supervised asks for all but the read-only tools, plan only for ExitPlanMode", () => {
    const supervised = rules(
      [],
      [{ tool: "Bash", command: "ls", decision: "allow" }, { preset: "supervised" }],
    );
    expect(matchToolRule(supervised, "Read", {})).toMatchObject({
      rule: { decision: "allow" },
      index: 1,
      preset: "supervised",
    });
    expect(matchToolRule(supervised, "Bash", { command: "ls" })).toMatchObject({ index: 0 });
    const asked = matchToolRule(supervised, "Bash", { command: "rm x" });
    expect(asked).toMatchObject({ rule: { decision: "ask" }, index: 1, preset: "supervised" });
    expect(asked && toolRuleReason(asked)).toContain(
      "the session's tool rule 1 (preset supervised)",
    );
    const plan = rules([{ preset: "plan" }]);
    expect(matchToolRule(plan, "ExitPlanMode", {})?.rule.decision).toBe("ask");
    expect(matchToolRule(plan, "Write", {})).toBeUndefined();
  });
});
