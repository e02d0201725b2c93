import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import { type MockAnthropic, startMockAnthropic } from "../support/mock-anthropic.js";
import { createHook, deliver, getRun, githubHeaders, isFinished, until } from "./support.js";

// Two GitHub deliveries for one pull request continue one conversation of the real `claude` CLI:
// the Messages API (a mock on loopback) sees the first turn in the second request.

const SECRET = "github-secret-0123456789";

describe.each(REAL_CLI_BACKENDS)(
  "one session per pull request with the real CLI on %s",
  (backend) => {
    let mock: MockAnthropic;
    let ce: ClaudeEnv;
    let t: TestApp;
    let server: { url: string; close(): Promise<void> };

    beforeAll(async () => {
      mock = await startMockAnthropic({ quiet: true });
      ce = await makeClaudeEnv(mock.url);
      t = await createTestApp(backend, { ...ce.env, AGENT_BRIDGE_WORK_DIR: ce.cwd });
      server = await listen(t.app);
      await createHook(server.url, {
        name: "review",
        verification: "github",
        secret: SECRET,
        prompt_template:
          "Pull request {{payload.pull_request.number}} was {{payload.action}}: {{payload.pull_request.title}}",
        session_key_template: "{{payload.repository.full_name}}#{{payload.pull_request.number}}",
        permission_mode: "bypassPermissions",
      });
    });
    afterAll(async () => {
      await server.close();
      await t.close();
      await mock.close();
      await ce.cleanup();
    });

    const event = (action: string, title: string) =>
      JSON.stringify({
        action,
        repository: { full_name: "acme/widgets" },
        pull_request: { number: 42, title },
      });

    it("resumes the session of the first delivery in the second, which waited for it", async () => {
      mock.script(
        { blocks: [{ type: "text", text: "First review: the word is apricot." }] },
        { blocks: [{ type: "text", text: "Second review, still apricot." }] },
      );
      const bodies = [event("opened", "Add widgets"), event("synchronize", "Add widgets v2")];
      const receipts: { run_id: string; session_id: string }[] = [];
      for (const body of bodies) {
        const res = await deliver(server.url, "review", body, githubHeaders(SECRET, body));
        expect(res.status).toBe(202);
        receipts.push(await res.json());
      }
      const [first, second] = receipts;
      expect(second?.session_id).toBe(first?.session_id);
      const runs = await until(
        async () => {
          const all = await Promise.all(receipts.map((r) => getRun(server.url, r.run_id)));
          return all.every(isFinished) && all;
        },
        60_000,
        "both runs",
      );
      expect(runs.map((r) => [r.status, r.result])).toEqual([
        ["succeeded", "First review: the word is apricot."],
        ["succeeded", "Second review, still apricot."],
      ]);
      const requests = mock.mainRequests();
      const seen = JSON.stringify(requests.at(-1)?.messages);
      expect(seen).toContain("Pull request 42 was opened: Add widgets");
      expect(seen).toContain("First review: the word is apricot.");
      expect(seen).toContain("Pull request 42 was synchronize: Add widgets v2");
      // The framing reached the model as system prompt.
      expect(JSON.stringify(requests.at(-1)?.system)).toContain("automated invocation from CI");
    });
  },
);
