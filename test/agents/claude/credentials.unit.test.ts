import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  anthropicUpstream,
  findCredentials,
  MissingCredentialsError,
} from "../../../src/agents/claude/credentials.js";

// Where the CLI (2.1.328) finds its credentials, as /readyz reports it: checked on a HOME of the
// test's own, without any call to the API.

describe("findCredentials", () => {
  let home: string;
  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "agent-bridge-home-"));
  });
  afterEach(() => rm(home, { recursive: true, force: true }));

  const find = (env: Record<string, string> = {}) =>
    findCredentials({ HOME: home, ...env }, "linux");

  it("finds none in an empty environment and HOME, and says which variable to set", async () => {
    await expect(find()).rejects.toThrow(MissingCredentialsError);
    await expect(find({ ANTHROPIC_API_KEY: " " })).rejects.toThrow(/set ANTHROPIC_API_KEY/);
  });

  it.each([
    ["ANTHROPIC_API_KEY", { ANTHROPIC_API_KEY: "k" }],
    ["ANTHROPIC_AUTH_TOKEN", { ANTHROPIC_AUTH_TOKEN: "t" }],
    ["CLAUDE_CODE_OAUTH_TOKEN", { CLAUDE_CODE_OAUTH_TOKEN: "t" }],
    ["CLAUDE_CODE_USE_BEDROCK", { CLAUDE_CODE_USE_BEDROCK: "1" }],
    ["CLAUDE_CODE_USE_VERTEX", { CLAUDE_CODE_USE_VERTEX: "true" }],
  ])("names %s when the environment has it", async (name, env) => {
    expect(await find(env)).toBe(name);
  });

  it("does not count a provider switch that is off", async () => {
    await expect(find({ CLAUDE_CODE_USE_BEDROCK: "0" })).rejects.toThrow(MissingCredentialsError);
  });

  it("finds the login file under HOME, or only under CLAUDE_CONFIG_DIR when that is set", async () => {
    await mkdir(join(home, ".claude"));
    await writeFile(join(home, ".claude", ".credentials.json"), "{}");
    expect(await find()).toBe(".credentials.json");
    const configDir = join(home, "elsewhere");
    await mkdir(configDir);
    await expect(find({ CLAUDE_CONFIG_DIR: configDir })).rejects.toThrow(MissingCredentialsError);
    await writeFile(join(configDir, ".credentials.json"), "{}");
    expect(await find({ CLAUDE_CONFIG_DIR: configDir })).toBe(".credentials.json");
  });

  it("finds a key saved by /login in ~/.claude.json, and an apiKeyHelper in the settings", async () => {
    await writeFile(join(home, ".claude.json"), JSON.stringify({ primaryApiKey: "" }));
    await expect(find()).rejects.toThrow(MissingCredentialsError);
    await writeFile(join(home, ".claude.json"), JSON.stringify({ primaryApiKey: "sk-ant-x" }));
    expect(await find()).toBe(".claude.json");
    await rm(join(home, ".claude.json"));
    await mkdir(join(home, ".claude"));
    await writeFile(join(home, ".claude", "settings.json"), '{"apiKeyHelper": "/bin/get-key"}');
    expect(await find()).toBe("apiKeyHelper");
  });

  it("assumes the Keychain login on macOS, where it cannot be seen", async () => {
    expect(await findCredentials({ HOME: home }, "darwin")).toBe("macOS Keychain (assumed)");
  });
});

// What the gateway sends upstream in the CLI's stead: the headers CLI 2.1.328 sends with the same
// variables (observed against the mock Messages API), and the variable the CLI gets its run's token
// in, which makes it authenticate as it would have.
describe("anthropicUpstream", () => {
  const API = "https://api.anthropic.com";

  it.each([
    [{ ANTHROPIC_API_KEY: "k" }, { "x-api-key": "k" }, "ANTHROPIC_API_KEY"],
    [{ ANTHROPIC_AUTH_TOKEN: "t" }, { authorization: "Bearer t" }, "ANTHROPIC_AUTH_TOKEN"],
    [{ CLAUDE_CODE_OAUTH_TOKEN: "o" }, { authorization: "Bearer o" }, "CLAUDE_CODE_OAUTH_TOKEN"],
    // Both go when both are set; an OAuth token is not used beside either.
    [
      { ANTHROPIC_API_KEY: "k", ANTHROPIC_AUTH_TOKEN: "t", CLAUDE_CODE_OAUTH_TOKEN: "o" },
      { "x-api-key": "k", authorization: "Bearer t" },
      "ANTHROPIC_API_KEY",
    ],
    [
      { ANTHROPIC_API_KEY: "k", CLAUDE_CODE_OAUTH_TOKEN: "o" },
      { "x-api-key": "k" },
      "ANTHROPIC_API_KEY",
    ],
    [
      { ANTHROPIC_AUTH_TOKEN: "t", CLAUDE_CODE_OAUTH_TOKEN: "o" },
      { authorization: "Bearer t" },
      "ANTHROPIC_AUTH_TOKEN",
    ],
  ])("%j: sends %j, and the CLI's token goes in %s", (env, credential, variable) => {
    expect(anthropicUpstream(env)).toEqual({
      baseUrl: API,
      credential,
      variable,
      source: variable,
    });
  });

  it("forwards to the operator's ANTHROPIC_BASE_URL when set", () => {
    expect(
      anthropicUpstream({ ANTHROPIC_API_KEY: "k", ANTHROPIC_BASE_URL: "http://llm:8080/x" })
        ?.baseUrl,
    ).toBe("http://llm:8080/x");
  });

  it("has none without a credential in the environment, or with a cloud provider switched on", () => {
    expect(anthropicUpstream({ ANTHROPIC_BASE_URL: "http://llm:8080" })).toBeUndefined();
    expect(anthropicUpstream({ ANTHROPIC_API_KEY: " " })).toBeUndefined();
    expect(
      anthropicUpstream({ ANTHROPIC_API_KEY: "k", CLAUDE_CODE_USE_BEDROCK: "1" }),
    ).toBeUndefined();
  });
});
