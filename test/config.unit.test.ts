import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { defaultClaudeBin } from "../src/agents/claude/plugin.js";
import { ConfigError, loadConfig } from "../src/config.js";
import { DEFAULT_PRICES } from "../src/prices.js";

function problems(env: NodeJS.ProcessEnv): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("config", () => {
  it("has documented defaults for everything", () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8787,
      host: "127.0.0.1",
      databaseUrl: undefined,
      bodyLimitBytes: 1_048_576,
      agents: {
        default: "claude",
        enabled: ["claude"],
        permissionMode: "acceptEdits",
        timeoutSeconds: 600,
        idleTimeoutSeconds: 300,
        worktreeEnabled: false,
        effort: "xhigh",
      },
      claude: { model: undefined },
      codex: { model: undefined },
      prices: DEFAULT_PRICES,
      deprecated: [],
      sandbox: {
        mode: "auto",
        tmpBytes: 512 * 1024 * 1024,
        limits: { memoryBytes: 4096 * 1024 * 1024, maxProcesses: 1024 },
      },
    });
    expect(config.dataDir).toMatch(/\.agent-bridge$/);
    expect(config.workDir).toBe(process.cwd());
    expect(config.agents.maxLineBytes).toBeGreaterThanOrEqual(10_000_000);
  });

  it("takes the settings that had Claude's name under their new names, the old names with a deprecation, not both", () => {
    const old = loadConfig({
      AGENT_BRIDGE_CLAUDE_WORK_DIR: "/srv/work",
      AGENT_BRIDGE_CLAUDE_PERMISSION_MODE: "plan",
      AGENT_BRIDGE_CLAUDE_TIMEOUT_SECONDS: "60",
    });
    expect(old.workDir).toBe("/srv/work");
    expect(old.agents).toMatchObject({ permissionMode: "plan", timeoutSeconds: 60 });
    expect(old.deprecated).toEqual([
      "AGENT_BRIDGE_CLAUDE_WORK_DIR is deprecated: it applies to every agent now, as AGENT_BRIDGE_WORK_DIR",
      "AGENT_BRIDGE_CLAUDE_PERMISSION_MODE is deprecated: it applies to every agent now, as AGENT_BRIDGE_PERMISSION_MODE",
      "AGENT_BRIDGE_CLAUDE_TIMEOUT_SECONDS is deprecated: it applies to every agent now, as AGENT_BRIDGE_RUN_TIMEOUT_SECONDS",
    ]);
    expect(loadConfig({ AGENT_BRIDGE_WORK_DIR: "/srv/new" }).deprecated).toEqual([]);
    expect(() =>
      loadConfig({ AGENT_BRIDGE_CLAUDE_EFFORT: "low", AGENT_BRIDGE_EFFORT: "high" }),
    ).toThrow(/AGENT_BRIDGE_CLAUDE_EFFORT: set AGENT_BRIDGE_EFFORT \(its new name\), not both/);
  });

  it("runs the agents named in AGENT_BRIDGE_AGENTS, the default among them", () => {
    expect(loadConfig({ AGENT_BRIDGE_AGENTS: "claude,codex" }).agents).toMatchObject({
      default: "claude",
      enabled: ["claude", "codex"],
    });
    expect(() => loadConfig({ AGENT_BRIDGE_AGENTS: "codex" })).toThrow(/AGENT_BRIDGE_AGENTS/);
    expect(() => loadConfig({ AGENT_BRIDGE_AGENTS: "claude,gpt" })).toThrow(/AGENT_BRIDGE_AGENTS/);
    expect(() => loadConfig({ AGENT_BRIDGE_CODEX_PRICES: "{" })).toThrow(
      /AGENT_BRIDGE_CODEX_PRICES: expected JSON/,
    );
  });

  it("finds the claude binary of the installed @anthropic-ai/claude-code package", () => {
    expect(defaultClaudeBin()).toMatch(/node_modules\/@anthropic-ai\/claude-code\//);
    expect(loadConfig({}).claude.bin).toBe(defaultClaudeBin());
  });

  it("lists one line per bad value, naming the variable and what it accepts", () => {
    const lines = problems({
      PORT: "eighty",
      AGENT_BRIDGE_CLAUDE_PERMISSION_MODE: "yolo",
      AGENT_BRIDGE_CLAUDE_WORKTREE_ENABLED: "maybe",
      AGENT_BRIDGE_CLAUDE_TIMEOUT_SECONDS: "0",
      DATABASE_URL: "mysql://x",
      ANTHROPIC_BASE_URL: "api.anthropic.com",
      AGENT_BRIDGE_SANDBOX: "maybe",
      AGENT_BRIDGE_RUN_MEMORY_MB: "-1",
      AGENT_BRIDGE_RUN_MAX_PROCESSES: "many",
    });
    expect(lines).toHaveLength(9);
    const line = (name: string) => lines.find((l) => l.startsWith(`${name}:`));
    expect(line("PORT")).toContain("whole number");
    expect(line("AGENT_BRIDGE_CLAUDE_PERMISSION_MODE")).toContain(
      "default, acceptEdits, auto, plan, dontAsk, bypassPermissions, dangerously-skip-permissions",
    );
    expect(line("AGENT_BRIDGE_CLAUDE_PERMISSION_MODE")).toContain('"yolo"');
    expect(line("AGENT_BRIDGE_CLAUDE_WORKTREE_ENABLED")).toContain("true or false");
    expect(line("AGENT_BRIDGE_CLAUDE_TIMEOUT_SECONDS")).toContain(">= 1");
    expect(line("DATABASE_URL")).toContain("postgres://");
    expect(line("ANTHROPIC_BASE_URL")).toContain("http:// or https://");
    expect(line("AGENT_BRIDGE_SANDBOX")).toContain("expected one of: auto, on, off");
    expect(line("AGENT_BRIDGE_RUN_MEMORY_MB")).toContain(">= 0");
    expect(line("AGENT_BRIDGE_RUN_MAX_PROCESSES")).toContain("whole number");
  });

  it("traces to the OTLP endpoint's /v1/traces, or to the traces endpoint as given; off without either; spans per event only when asked", () => {
    expect(loadConfig({}).tracing).toBeUndefined();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracing).toEqual({
      url: "http://collector:4318/v1/traces",
      events: false,
    });
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.example/ingest",
      }).tracing,
    ).toEqual({ url: "https://traces.example/ingest", events: false });
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_SDK_DISABLED: "true",
      }).tracing,
    ).toBeUndefined();
    // Spans per event: asked for, and only with an endpoint (without one it changes nothing).
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        AGENT_BRIDGE_TRACE_EVENTS: "true",
      }).tracing,
    ).toEqual({ url: "http://collector:4318/v1/traces", events: true });
    expect(loadConfig({ AGENT_BRIDGE_TRACE_EVENTS: "true" }).tracing).toBeUndefined();
    expect(problems({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:// or https:// URL (got "collector:4318")',
    ]);
  });

  it("prices models from the built-in table, AGENT_BRIDGE_CODEX_PRICES over it and AGENT_BRIDGE_MODEL_PRICES over both", () => {
    const own = { input: 1, output: 2, cache_read: 0.1, cache_creation: 1.25 };
    const { prices } = loadConfig({
      AGENT_BRIDGE_CODEX_PRICES: JSON.stringify({
        "gpt-fake": { input: 1, cached_input: 0.5, output: 4 },
        "claude-opus-5-5": { input: 9, cached_input: 9, output: 9 },
      }),
      AGENT_BRIDGE_MODEL_PRICES: JSON.stringify({ "claude-opus-5-5": own }),
    });
    expect(prices["gpt-fake"]).toEqual({ input: 1, output: 4, cache_read: 0.5, cache_creation: 1 });
    expect(prices["claude-opus-5-5"]).toEqual(own);
    expect(prices["gpt-6.2-sol"]).toEqual(DEFAULT_PRICES["gpt-6.2-sol"]);
    expect(() =>
      loadConfig({ AGENT_BRIDGE_MODEL_PRICES: JSON.stringify({ m: { input: 1, output: 2 } }) }),
    ).toThrow(/AGENT_BRIDGE_MODEL_PRICES.m.cache_read: Invalid input/);
  });

  it("treats an empty variable as unset", () => {
    expect(loadConfig({ PORT: "", DATABASE_URL: "" })).toMatchObject({
      port: 8787,
      databaseUrl: undefined,
    });
  });

  it("keeps the bridge's own settings and secrets, and the model API's credential and address, out of the CLI's environment: the gateway's upstream has those", () => {
    const config = loadConfig({
      PATH: "/usr/bin",
      HOME: "/home/x",
      ANTHROPIC_API_KEY: "sk-test",
      ANTHROPIC_BASE_URL: "http://llm.internal:8080/anthropic",
      DATABASE_URL: "postgres://secret@db/x",
      AGENT_BRIDGE_API_KEY: `ab_${"k".repeat(43)}`,
      AWS_SECRET_ACCESS_KEY: "nope",
    });
    expect(config.claude.childEnv).toEqual({ PATH: "/usr/bin", HOME: "/home/x" });
    expect(config.claude.upstream).toEqual({
      baseUrl: "http://llm.internal:8080/anthropic",
      credential: { "x-api-key": "sk-test" },
      variable: "ANTHROPIC_API_KEY",
      source: "ANTHROPIC_API_KEY",
    });
  });

  it("has no upstream when the CLI has no credential in the environment (a login in its HOME): the CLI keeps its API's address and calls it itself", () => {
    const config = loadConfig({ HOME: "/home/x", ANTHROPIC_BASE_URL: "https://llm.example" });
    expect(config.claude.upstream).toBeUndefined();
    expect(config.claude.childEnv).toEqual({
      HOME: "/home/x",
      ANTHROPIC_BASE_URL: "https://llm.example",
    });
  });

  it("gives codex's key and API address to the gateway's upstream, not to codex: AGENT_BRIDGE_CODEX_BASE_URL, else codex's OPENAI_BASE_URL, else OpenAI's", () => {
    const env = { HOME: "/home/x", OPENAI_API_KEY: "sk-proj", OPENAI_BASE_URL: "http://llm:1/v1" };
    const config = loadConfig(env);
    expect(config.codex.childEnv).toEqual({ HOME: "/home/x" });
    expect(config.codex.upstream).toEqual({
      baseUrl: "http://llm:1/v1",
      credential: { authorization: "Bearer sk-proj" },
      variable: "OPENAI_API_KEY",
      source: "OPENAI_API_KEY",
    });
    const named = { ...env, AGENT_BRIDGE_CODEX_BASE_URL: "https://gw.example/openai/v1" };
    expect(loadConfig(named).codex.upstream?.baseUrl).toBe("https://gw.example/openai/v1");
    expect(loadConfig({ CODEX_API_KEY: "sk-codex" }).codex.upstream).toEqual({
      baseUrl: "https://api.openai.com/v1",
      credential: { authorization: "Bearer sk-codex" },
      variable: "CODEX_API_KEY",
      source: "CODEX_API_KEY",
    });
    // Without a key codex has no gateway, and says what to give it; its env holds no API address.
    const keyless = loadConfig({ HOME: "/home/x", OPENAI_BASE_URL: "http://llm:1/v1" });
    expect(keyless.codex.upstream).toBeUndefined();
    expect(keyless.codex.missingCredentials?.message).toContain("codex login --with-api-key");
    expect(keyless.codex.childEnv).toEqual({ HOME: "/home/x" });
    expect(problems({ AGENT_BRIDGE_CODEX_BASE_URL: "llm:1" })).toEqual([
      'AGENT_BRIDGE_CODEX_BASE_URL: expected an http:// or https:// URL (got "llm:1")',
    ]);
  });

  describe("secrets from files (<NAME>_FILE, as Docker secrets are mounted)", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "agent-bridge-secrets-"));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const secretFile = (name: string, content: string) => {
      const file = path.join(dir, name);
      writeFileSync(file, content, { mode: 0o600 });
      return file;
    };
    const key = `ab_${"s".repeat(43)}`;

    it("reads each secret setting from its file, without the file's final newline", () => {
      const config = loadConfig({
        DATABASE_URL_FILE: secretFile("db", "postgres://bridge:pw@db/x\n"),
        AGENT_BRIDGE_API_KEY_FILE: secretFile("key", key),
        ANTHROPIC_API_KEY_FILE: secretFile("anthropic", "sk-from-file\r\n"),
      });
      expect(config.databaseUrl).toBe("postgres://bridge:pw@db/x");
      expect(config.auth.apiKey).toBe(key);
      // The gateway's upstream gets the value; the CLI neither it nor the file's name.
      expect(config.claude.upstream?.credential).toEqual({ "x-api-key": "sk-from-file" });
      expect(config.claude.childEnv.ANTHROPIC_API_KEY).toBeUndefined();
      expect(config.claude.childEnv.ANTHROPIC_API_KEY_FILE).toBeUndefined();
    });

    it("hides from every run's sandbox the files its secrets were read from, and the server's own dirs", () => {
      const keyFile = secretFile("key-hidden", key);
      const config = loadConfig({
        HOME: "/home/bridge",
        AGENT_BRIDGE_API_KEY_FILE: keyFile,
        AGENT_BRIDGE_DATA_DIR: "/var/lib/bridge",
        AGENT_BRIDGE_AGENT_USER: "agent-bridge-agent",
        AGENT_BRIDGE_DEBUG_CAPTURE: "/var/log/bridge-capture",
      });
      expect(config.sandbox.hidden).toEqual([
        "/var/lib/bridge",
        "/var/lib/bridge/homes",
        "/var/log/bridge-capture",
        keyFile,
        "/home/bridge/.codex/auth.json",
        "/home/bridge",
      ]);
    });

    it("refuses a setting given both ways, a file it cannot read and an empty one", () => {
      expect(
        problems({
          AGENT_BRIDGE_API_KEY: key,
          AGENT_BRIDGE_API_KEY_FILE: secretFile("key2", key),
          DATABASE_URL_FILE: path.join(dir, "missing"),
          ANTHROPIC_API_KEY_FILE: secretFile("empty", "\n"),
        }),
      ).toEqual([
        `DATABASE_URL_FILE: cannot read ${JSON.stringify(path.join(dir, "missing"))} (ENOENT)`,
        "AGENT_BRIDGE_API_KEY_FILE: set either AGENT_BRIDGE_API_KEY or AGENT_BRIDGE_API_KEY_FILE, not both",
        `ANTHROPIC_API_KEY_FILE: ${JSON.stringify(path.join(dir, "empty"))} is empty`,
      ]);
    });

    it("never repeats a secret's value in a problem", () => {
      const lines = problems({ DATABASE_URL_FILE: secretFile("bad", "mysql://root:hunter2@x/y") });
      expect(lines).toEqual(["DATABASE_URL: expected a postgres:// or postgresql:// URL"]);
    });
  });

  describe("AGENT_BRIDGE_MCP_CONFIG", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "agent-bridge-mcp-"));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const mcpFile = (name: string, content: unknown) => {
      const file = path.join(dir, name);
      writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content));
      return file;
    };

    it("reads the admin's named MCP servers, stdio and remote, in the CLI's own format", () => {
      const servers = {
        github: { command: "npx", args: ["-y", "github-mcp"], env: { GITHUB_TOKEN: "t" } },
        docs: { type: "http", url: "https://mcp.example/docs", headers: { "X-Key": "k" } },
        events: { type: "sse", url: "http://127.0.0.1:9000/sse" },
      };
      const file = mcpFile("good.json", { mcpServers: servers });
      expect(loadConfig({ AGENT_BRIDGE_MCP_CONFIG: file }).agents.mcpServers).toEqual(servers);
      expect(loadConfig({}).agents.mcpServers).toEqual({});
    });

    it("stops the start-up naming the file and each problem in it", () => {
      const missing = path.join(dir, "missing.json");
      expect(problems({ AGENT_BRIDGE_MCP_CONFIG: missing })).toEqual([
        `AGENT_BRIDGE_MCP_CONFIG: ${JSON.stringify(missing)}: cannot read it (ENOENT)`,
      ]);
      const notJson = mcpFile("not-json.json", "{mcpServers:");
      expect(problems({ AGENT_BRIDGE_MCP_CONFIG: notJson })[0]).toMatch(
        new RegExp(`^AGENT_BRIDGE_MCP_CONFIG: ${JSON.stringify(notJson)}: not JSON: `),
      );
      const bad = mcpFile("bad.json", {
        mcpServers: {
          nocommand: { args: ["x"] },
          ftp: { type: "http", url: "ftp://x" },
          nul: { command: "x\u0000y" },
          extra: { command: "x", cwd: "/" },
        },
      });
      const lines = problems({ AGENT_BRIDGE_MCP_CONFIG: bad });
      const at = `AGENT_BRIDGE_MCP_CONFIG: ${JSON.stringify(bad)}: mcpServers.`;
      expect(lines).toEqual([
        `${at}nocommand: expected a stdio server {"command", "args"?, "env"?} or a remote one {"type": "sse" | "http", "url", "headers"?}`,
        `${at}ftp.url: expected an http:// or https:// URL`,
        `${at}nul.command: must not contain NUL`,
        `${at}extra: Unrecognized key: "cwd"`,
      ]);
      const badName = mcpFile("bad-name.json", { mcpServers: { "git hub": { command: "x" } } });
      expect(problems({ AGENT_BRIDGE_MCP_CONFIG: badName })).toEqual([
        `AGENT_BRIDGE_MCP_CONFIG: ${JSON.stringify(badName)}: mcpServers.git hub: a server name is letters, digits, '_' or '-', at most 64, starting with a letter or digit`,
      ]);
      expect(problems({ AGENT_BRIDGE_MCP_CONFIG: mcpFile("flat.json", { github: {} }) })).toEqual([
        `AGENT_BRIDGE_MCP_CONFIG: ${JSON.stringify(path.join(dir, "flat.json"))}: mcpServers: Invalid input: expected record, received undefined`,
        `AGENT_BRIDGE_MCP_CONFIG: ${JSON.stringify(path.join(dir, "flat.json"))}: Unrecognized key: "github"`,
      ]);
    });
  });
});
