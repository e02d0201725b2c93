import { describe, expect, it } from "vitest";
import { bypassProxyFor, childEnvironment } from "../../src/agents/child-env.js";
import { claudePlugin } from "../../src/agents/claude/plugin.js";
import { codexPlugin } from "../../src/agents/codex/plugin.js";

const CLAUDE = claudePlugin.envPolicy;
const CODEX = codexPlugin.envPolicy;

const source = {
  PATH: "/usr/bin:/bin",
  HOME: "/home/bridge",
  USER: "bridge",
  SHELL: "/bin/bash",
  TMPDIR: "/tmp",
  LANG: "C.UTF-8",
  LC_ALL: "C.UTF-8",
  TZ: "UTC",
  TERM: "xterm",
  ANTHROPIC_API_KEY: "sk-ant",
  ANTHROPIC_BASE_URL: "http://127.0.0.1:1",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  HTTP_PROXY: "http://proxy:3128",
  https_proxy: "http://proxy:3128",
  NO_PROXY: "localhost",
  NODE_EXTRA_CA_CERTS: "/etc/ca.pem",
  SSL_CERT_FILE: "/etc/ssl/cert.pem",
  IS_SANDBOX: "1",
  DISABLE_TELEMETRY: "1",
  // Not for the child:
  DATABASE_URL: "postgres://secret",
  AGENT_BRIDGE_ADMIN_TOKEN: "secret",
  AGENT_BRIDGE_RUN_TIMEOUT_SECONDS: "600",
  GITHUB_TOKEN: "ghp_secret",
  AWS_SECRET_ACCESS_KEY: "aws-secret",
  GOOGLE_APPLICATION_CREDENTIALS: "/gcp.json",
  CLOUD_ML_REGION: "us-east5",
  NODE_OPTIONS: "--inspect",
  UNSET: undefined,
};

describe("childEnvironment", () => {
  it("keeps what the CLI needs: basics, locale, ANTHROPIC_*, CLAUDE_*, proxies, certificates", () => {
    const env = childEnvironment(source, [], CLAUDE);
    expect(env).toEqual({
      PATH: "/usr/bin:/bin",
      HOME: "/home/bridge",
      USER: "bridge",
      SHELL: "/bin/bash",
      TMPDIR: "/tmp",
      LANG: "C.UTF-8",
      LC_ALL: "C.UTF-8",
      TZ: "UTC",
      TERM: "xterm",
      ANTHROPIC_API_KEY: "sk-ant",
      ANTHROPIC_BASE_URL: "http://127.0.0.1:1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      HTTP_PROXY: "http://proxy:3128",
      https_proxy: "http://proxy:3128",
      NO_PROXY: "localhost",
      NODE_EXTRA_CA_CERTS: "/etc/ca.pem",
      SSL_CERT_FILE: "/etc/ssl/cert.pem",
      IS_SANDBOX: "1",
      DISABLE_TELEMETRY: "1",
    });
  });

  it("adds names from extraAllow, exact or as a PREFIX_* pattern", () => {
    const env = childEnvironment(
      { ...source, MY_TOOL_A: "a", MY_TOOL_B: "b" },
      ["GITHUB_TOKEN", "MY_TOOL_*"],
      CLAUDE,
    );
    expect(env.GITHUB_TOKEN).toBe("ghp_secret");
    expect(env.MY_TOOL_A).toBe("a");
    expect(env.MY_TOOL_B).toBe("b");
  });

  it("never passes DATABASE_URL or AGENT_BRIDGE_*, even when allow-listed", () => {
    const env = childEnvironment(
      source,
      ["DATABASE_URL", "AGENT_BRIDGE_ADMIN_TOKEN", "AGENT_BRIDGE_*"],
      CLAUDE,
    );
    expect(env.DATABASE_URL).toBeUndefined();
    expect(Object.keys(env).filter((k) => k.startsWith("AGENT_BRIDGE_"))).toEqual([]);
  });

  it("passes cloud credentials only when the CLI is switched to that provider", () => {
    expect(childEnvironment(source, [], CLAUDE).AWS_SECRET_ACCESS_KEY).toBeUndefined();
    const bedrock = childEnvironment({ ...source, CLAUDE_CODE_USE_BEDROCK: "1" }, [], CLAUDE);
    expect(bedrock.AWS_SECRET_ACCESS_KEY).toBe("aws-secret");
    expect(bedrock.GOOGLE_APPLICATION_CREDENTIALS).toBeUndefined();
    const vertex = childEnvironment({ ...source, CLAUDE_CODE_USE_VERTEX: "true" }, [], CLAUDE);
    expect(vertex.GOOGLE_APPLICATION_CREDENTIALS).toBe("/gcp.json");
    expect(vertex.CLOUD_ML_REGION).toBe("us-east5");
    expect(vertex.AWS_SECRET_ACCESS_KEY).toBeUndefined();
    const off = childEnvironment({ ...source, CLAUDE_CODE_USE_BEDROCK: "0" }, [], CLAUDE);
    expect(off.AWS_SECRET_ACCESS_KEY).toBeUndefined();
  });

  it("passes OTEL_* to claude only once its own telemetry is on (CLAUDE_CODE_ENABLE_TELEMETRY)", () => {
    const otel = {
      ...source,
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
      OTEL_EXPORTER_OTLP_HEADERS: "x-vendor-key=secret",
      OTEL_RESOURCE_ATTRIBUTES: "team=infra",
    };
    expect(
      Object.keys(childEnvironment(otel, [], CLAUDE)).filter((k) => k.startsWith("OTEL_")),
    ).toEqual([]);
    const on = childEnvironment({ ...otel, CLAUDE_CODE_ENABLE_TELEMETRY: "1" }, [], CLAUDE);
    expect(on).toMatchObject({
      CLAUDE_CODE_ENABLE_TELEMETRY: "1",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
      OTEL_EXPORTER_OTLP_HEADERS: "x-vendor-key=secret",
      OTEL_RESOURCE_ATTRIBUTES: "team=infra",
    });
    const codex = childEnvironment({ ...otel, CLAUDE_CODE_ENABLE_TELEMETRY: "1" }, [], CODEX);
    expect(Object.keys(codex).filter((k) => k.startsWith("OTEL_"))).toEqual([]);
  });

  it("gives each agent its own credentials and never another's", () => {
    const both = { ...source, OPENAI_API_KEY: "sk-openai", CODEX_HOME: "/srv/codex" };
    const claude = childEnvironment(both, [], CLAUDE);
    expect(claude.ANTHROPIC_API_KEY).toBeDefined();
    expect(claude.OPENAI_API_KEY).toBeUndefined();
    expect(claude.CODEX_HOME).toBeUndefined();
    const codex = childEnvironment(both, [], CODEX);
    expect(codex).toMatchObject({ OPENAI_API_KEY: "sk-openai", CODEX_HOME: "/srv/codex" });
    expect(Object.keys(codex).filter((k) => /^(ANTHROPIC_|CLAUDE_)/.test(k))).toEqual([]);
    expect(codex.PATH).toBe(source.PATH);
  });

  it("does not read process.env: the result depends only on its arguments", () => {
    expect(childEnvironment({}, ["PATH"], CLAUDE)).toEqual({});
  });
});

describe("bypassProxyFor", () => {
  it("adds the host to NO_PROXY and no_proxy when a proxy is set, since the CLI would send even loopback calls through it", () => {
    expect(
      bypassProxyFor({ HTTPS_PROXY: "http://proxy:3128", NO_PROXY: "corp" }, "127.0.0.1"),
    ).toEqual({
      HTTPS_PROXY: "http://proxy:3128",
      NO_PROXY: "corp,127.0.0.1",
      no_proxy: "127.0.0.1",
    });
  });

  it("leaves an environment without a proxy as it is", () => {
    expect(bypassProxyFor({ PATH: "/bin" }, "127.0.0.1")).toEqual({ PATH: "/bin" });
  });
});
