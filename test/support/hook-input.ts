import { randomUUID } from "node:crypto";
import type { HookInput } from "../../src/store/hooks.js";

// A hook as stored, for tests that write one straight to the database: a GitHub hook with
// nothing set but what `over` sets.

export function hookInput(over: Partial<HookInput> = {}): HookInput {
  return {
    name: `hook-${randomUUID()}`,
    ownerKeyId: null,
    verification: "github",
    secret: "s".repeat(16),
    promptTemplate: "x",
    systemPromptTemplate: null,
    sessionKeyTemplate: null,
    agent: null,
    workDir: null,
    worktree: null,
    checkout: null,
    checkoutOrigin: null,
    permissionMode: null,
    model: null,
    effort: null,
    mcpServers: [],
    approvals: "deny",
    events: [],
    outputSchema: null,
    callbackUrl: null,
    callbackSecret: null,
    forge: "github",
    forgeApiUrl: null,
    forgeToken: null,
    triggers: null,
    trusted: null,
    fork: null,
    reply: null,
    schedule: null,
    timezone: null,
    ...over,
  };
}
