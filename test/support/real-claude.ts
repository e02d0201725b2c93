import { createTestApp, httpApi, listen, type TestApp } from "./app.js";
import { type ClaudeEnv, makeClaudeEnv } from "./claude-env.js";
import type { Backend } from "./db.js";
import { type MockAnthropic, startMockAnthropic } from "./mock-anthropic.js";

// The app as the real-CLI tests have it: the real `claude` binary against a mock Messages API of
// the test's, in bypass mode, working in a directory of its own, and served on loopback.

export interface RealClaudeApp {
  mock: MockAnthropic;
  ce: ClaudeEnv;
  t: TestApp;
  server: { url: string; close(): Promise<void> };
  api: ReturnType<typeof httpApi>;
  close(): Promise<void>;
}

/** The app on `backend`, with `env` over the defaults above. */
export async function realClaudeApp(
  backend: Backend,
  env: Record<string, string> = {},
): Promise<RealClaudeApp> {
  const mock = await startMockAnthropic({ quiet: true });
  const ce = await makeClaudeEnv(mock.url);
  const t = await createTestApp(backend, {
    ...ce.env,
    AGENT_BRIDGE_WORK_DIR: ce.cwd,
    AGENT_BRIDGE_PERMISSION_MODE: "bypassPermissions",
    ...env,
  });
  const server = await listen(t.app);
  return {
    mock,
    ce,
    t,
    server,
    api: httpApi(server.url),
    close: async () => {
      await server.close();
      await t.close();
      await mock.close();
      await ce.cleanup();
    },
  };
}
