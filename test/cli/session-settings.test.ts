import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXIT } from "../../src/cli/exit-codes.js";
import { createClient } from "../../src/client/index.js";
import { type LiveServer, liveServer, toolThenReply } from "../client/live.js";
import { cli } from "./run-cli.js";

// `agent-bridge sessions update` and `sessions diff` against a live server (the fake CLI).

describe("the sessions update and diff commands", () => {
  let server: LiveServer;
  const on = (...args: string[]) => cli("--url", server.url, ...args);

  beforeAll(async () => {
    server = await liveServer("pglite", toolThenReply(["ok"]));
  });
  afterAll(() => server?.close());

  it("sessions update changes the settings given, --clear sets fields back, and prints the session's id", async () => {
    const client = createClient({ baseUrl: server.url });
    const { id } = await client.createSession({ title: "before", max_turns: 3 });
    const updated = await on(
      "sessions",
      "update",
      id,
      "--title",
      "after",
      "--model",
      "opus",
      "--effort",
      "low",
      "--disallowed-tool",
      "WebFetch",
      "--disallowed-tool",
      "Bash(curl:*)",
      "--metadata",
      "ticket=42",
      "--clear",
      "max_turns",
    );
    expect(updated).toMatchObject({ code: EXIT.ok, stdout: `${id}\n` });
    expect(await client.getSession(id)).toMatchObject({
      title: "after",
      model: "opus",
      effort: "low",
      disallowed_tools: ["WebFetch", "Bash(curl:*)"],
      metadata: { ticket: "42" },
      max_turns: null,
    });
    const json = JSON.parse((await on("sessions", "update", id, "--json", "--title", "t")).stdout);
    expect(json).toMatchObject({ id, title: "t" });
  });

  it("a refused update or diff shows the server's problem and exits 1; a bad --clear is bad usage", async () => {
    const { id } = await createClient({ baseUrl: server.url }).createSession({});
    const refused = await on("sessions", "update", id, "--disallowed-tool", "--add-dir=/");
    expect(refused.code).toBe(EXIT.error);
    expect(refused.stderr).toContain("disallowed_tools.0");
    const diff = await on("sessions", "diff", id);
    expect(diff.code).toBe(EXIT.error);
    expect(diff.stderr).toContain("not a worktree");
    const bad = await on("sessions", "update", id, "--clear", "agent");
    expect(bad.code).toBe(EXIT.usage);
  });
});
