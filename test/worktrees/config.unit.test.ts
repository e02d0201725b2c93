import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.js";

describe("session expiry settings", () => {
  it("default to a 72 h TTL swept every 5 minutes", () => {
    expect(loadConfig({}).sessions).toEqual({ ttlMs: 259_200_000, sweepIntervalMs: 300_000 });
    expect(
      loadConfig({
        AGENT_BRIDGE_SESSION_TTL_SECONDS: "60",
        AGENT_BRIDGE_SESSION_SWEEP_INTERVAL_SECONDS: "5",
      }).sessions,
    ).toEqual({ ttlMs: 60_000, sweepIntervalMs: 5_000 });
  });

  it("name a bad value", () => {
    let problems: string[] = [];
    try {
      loadConfig({
        AGENT_BRIDGE_SESSION_TTL_SECONDS: "0",
        AGENT_BRIDGE_SESSION_SWEEP_INTERVAL_SECONDS: "often",
      });
    } catch (err) {
      if (err instanceof ConfigError) problems = err.problems;
    }
    expect(problems).toHaveLength(2);
    expect(problems.find((p) => p.startsWith("AGENT_BRIDGE_SESSION_TTL_SECONDS:"))).toContain(
      ">= 1",
    );
    expect(
      problems.find((p) => p.startsWith("AGENT_BRIDGE_SESSION_SWEEP_INTERVAL_SECONDS:")),
    ).toContain("whole number");
  });
});
