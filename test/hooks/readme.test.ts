import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { streamedReply } from "../support/fake-scenarios.js";
import { type CommandResult, runCommand } from "../support/process.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { type UserServer, userServer } from "../support/user-server.js";
import { createHook, newStandardSecret } from "./support.js";

// The CI examples of docs/webhooks.md are run as they are shown: the GitHub Actions steps (their `run`
// scripts, with the environment the step gives them) and the plain shell script, against a server
// as a user has it (API keys on, the key it printed) and a scripted stand-in for the CLI.

const section = () => docSection("docs/webhooks.md", "Webhooks and schedules");

function sh(
  shell: string,
  script: string,
  args: string[],
  env: Record<string, string>,
): Promise<CommandResult> {
  // As GitHub runs a step (`bash --noprofile --norc -eo pipefail`), and sh -e for the script.
  const flags = shell === "bash" ? ["--noprofile", "--norc", "-eo", "pipefail"] : ["-e"];
  return runCommand(shell, [...flags, "-c", script, "script", ...args], {
    env: { PATH: process.env.PATH, ...env },
  });
}

describe("the README's CI examples", () => {
  let server: UserServer;
  let key: string;
  let dir: string;
  const hookSecret = newStandardSecret();

  beforeAll(async () => {
    server = await userServer(streamedReply(["Looks ", "good."]));
    key = server.key;
    dir = await mkdtemp(join(tmpdir(), "hooks-readme-"));
    await createHook(
      server.url,
      {
        name: "pr-review",
        verification: "standard",
        secret: hookSecret,
        prompt_template:
          "Review pull request #{{payload.pull_request.number}}: {{payload.pull_request.title}}",
        session_key_template: "{{payload.repository}}#{{payload.pull_request.number}}",
        events: ["pull_request"],
      },
      { Authorization: `Bearer ${key}` },
    );
  });
  afterAll(async () => {
    await server?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("the GitHub Actions steps deliver, wait, and write the review to the summary", async () => {
    const [yaml] = codeBlocks(await section(), "yaml");
    const steps = parse(yaml ?? "") as { run: string }[];
    const [deliverStep, waitStep] = steps;
    if (!deliverStep || !waitStep) throw new Error("two steps expected");
    const output = join(dir, "output");
    const summary = join(dir, "summary");
    const delivered = await sh("bash", deliverStep.run, [], {
      HOOK_URL: `${server.url}/v1/hooks/pr-review/deliveries`,
      HOOK_SECRET: hookSecret,
      PR_NUMBER: "12",
      PR_TITLE: `Quote ' and "double" and $(not run)`,
      GITHUB_REPOSITORY: "acme/widgets",
      GITHUB_RUN_ID: String(Date.now()),
      GITHUB_RUN_ATTEMPT: "1",
      GITHUB_OUTPUT: output,
    });
    expect(delivered.stderr).toBe("");
    expect(delivered.code).toBe(0);
    const runId = /^run_id=(\S+)$/m.exec(await readFile(output, "utf8"))?.[1];
    expect(runId).toMatch(/^[0-9a-f-]{36}$/);

    const waited = await sh("bash", waitStep.run, [], {
      AGENT_BRIDGE_URL: server.url,
      AGENT_BRIDGE_KEY: key,
      RUN_ID: runId ?? "",
      GITHUB_STEP_SUMMARY: summary,
    });
    expect(waited.code).toBe(0);
    expect(await readFile(summary, "utf8")).toBe("Looks good.\n");
    const run = await (
      await fetch(`${server.url}/v1/runs/${runId}`, { headers: { Authorization: `Bearer ${key}` } })
    ).json();
    expect(run.prompt).toBe(`Review pull request #12: Quote ' and "double" and $(not run)`);
  });

  it("the plain shell script does the same", async () => {
    const script = codeBlocks(await section(), "sh").find((b) => b.startsWith("#!/bin/sh"));
    if (!script) throw new Error("no shell script in the section");
    const result = await sh("sh", script, ["acme/widgets", "13", "Add a thing"], {
      AGENT_BRIDGE_URL: server.url,
      AGENT_BRIDGE_HOOK_SECRET: hookSecret,
      AGENT_BRIDGE_KEY: key,
    });
    expect(result.stderr).toBe("");
    expect(result).toMatchObject({ code: 0, stdout: "Looks good.\n" });
  });
});
