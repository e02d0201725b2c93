import { mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { crashBeforeResult, toolThenReply } from "../client/live.js";
import { runCommand } from "../support/process.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { type UserServer, userServer } from "../support/user-server.js";
import { BIN, ROOT } from "./run-cli.js";

// The README's examples are the ones that run: the client example is a file the tests execute
// and the README must show it verbatim; the terminal session is replayed command by command and
// its output compared (ids and timestamps may differ); the CI step's script is run as a step.

const PARTS = ["Hello", ", world!"];

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;
const TIMESTAMP = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/;

/**
 * A regular expression for a transcript as the README shows it: literal, except that each
 * UUID stands for some id (the same README id for the same actual id throughout) and each
 * timestamp for any timestamp.
 */
function transcriptPattern(text: string): RegExp {
  const names = new Map<string, string>();
  const token = new RegExp(`(${UUID.source}|${TIMESTAMP.source})`);
  const pattern = text
    .split(token)
    .map((part, i) => {
      if (i % 2 === 0) return part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      if (TIMESTAMP.test(part)) return TIMESTAMP.source;
      const known = names.get(part);
      if (known) return `\\k<${known}>`;
      const name = `id${names.size}`;
      names.set(part, name);
      return `(?<${name}>${UUID.source})`;
    })
    .join("");
  return new RegExp(`^${pattern}$`);
}

/**
 * What npm needs of this machine's environment to reach its registry, as a user's shell has it:
 * the CA and proxy settings. Under a Node other than the system's (Node 24 in CI) npm reads no
 * system npmrc, whose `cafile` it otherwise finds, and hung on the registry without them.
 */
function registryEnv(): NodeJS.ProcessEnv {
  const names = ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR"];
  for (const proxy of ["HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"])
    names.push(proxy, proxy.toLowerCase());
  return Object.fromEntries(
    names.flatMap((name) => (process.env[name] ? [[name, process.env[name]]] : [])),
  );
}

/** The README's stand-in for the key `npm start` printed. */
const KEY_PLACEHOLDER = "ab_…";

describe("the README examples", () => {
  let server: UserServer;
  /** For the terminal session alone, whose `sessions ls` shows every session of its server. */
  let fresh: UserServer;
  let dir: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    [server, fresh] = await Promise.all([
      userServer(toolThenReply(PARTS)),
      userServer(toolThenReply(PARTS)),
    ]);
    // `agent-bridge` on PATH, as `npm link` would put it.
    dir = await mkdtemp(join(tmpdir(), "agent-bridge-readme-"));
    await symlink(BIN, join(dir, "agent-bridge"));
    env = {
      PATH: `${dir}:${process.env.PATH}`,
      HOME: process.env.HOME,
      AGENT_BRIDGE_URL: server.url,
      AGENT_BRIDGE_KEY: server.key,
    };
  });
  afterAll(async () => {
    await Promise.all([server?.close(), fresh?.close()]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("the client example is test/client/readme-example.ts, and it runs in a new `npm init -y` project set up as the README says", async () => {
    const section = await docSection("docs/client.md", "Client");
    const [example] = codeBlocks(section, "ts");
    expect(example).toBe(await readFile(join(ROOT, "test/client/readme-example.ts"), "utf8"));
    // The README's front page shows the same example.
    expect(codeBlocks(await docSection("README.md", "The client"), "ts")).toEqual([example]);
    const [setup] = codeBlocks(section, "sh");
    if (!setup?.includes("/path/to/agent-bridge")) throw new Error("README shows no set-up");

    const project = await mkdtemp(join(tmpdir(), "agent-bridge-client-"));
    try {
      await writeFile(join(project, "example.ts"), example ?? "");
      // tsx comes from the npm registry (or npm's cache); this checkout is linked, as a user's is.
      const res = await runCommand(
        "bash",
        ["-e", "-c", setup.replaceAll("/path/to/agent-bridge", ROOT)],
        {
          cwd: project,
          env: {
            ...env,
            ...registryEnv(),
            npm_config_audit: "false",
            npm_config_fund: "false",
            npm_config_update_notifier: "false",
          },
        },
      );
      expect(res.code, res.stderr).toBe(0);
      // After what npm printed: the example's own output.
      expect(res.stdout).toMatch(/\nHello, world!\nsucceeded, \$0\.0123\n$/);
      expect(res.stderr).toMatch(/(^|\n)Using Bash…\n$/);
    } finally {
      await rm(project, { recursive: true, force: true });
    }
  });

  it("the terminal session prints what the README shows", async () => {
    const [block] = codeBlocks(await docSection("docs/cli.md", "Command line"), "console");
    if (!block) throw new Error("docs/cli.md has no console block under Command line");
    // The README's front page shows this session's start.
    const [start] = codeBlocks(await docSection("README.md", "The command line"), "console");
    if (!start || !block.startsWith(start))
      throw new Error("the README's session is not the start of docs/cli.md's");
    const steps: { command: string; expected: string[] }[] = [];
    for (const line of block.trimEnd().split("\n")) {
      if (line.startsWith("$ ")) steps.push({ command: line.slice(2), expected: [] });
      else steps.at(-1)?.expected.push(line);
    }
    expect(steps.length).toBeGreaterThan(5);

    // One shell for the whole session (its variables carry over); each command's output
    // follows a marker line naming it, stderr merged into stdout in the order written.
    const script = steps
      // `$?` must still be the previous command's after the marker.
      .map(({ command }) =>
        [`__rc=$?`, `echo ${shellQuote(`@@ ${command}`)}`, "(exit $__rc)", command].join("\n"),
      )
      .join("\n");
    // The session sets the key itself, as the user does with the one their server printed.
    const { AGENT_BRIDGE_KEY: _, ...withoutKey } = env;
    expect(script).toContain(`export AGENT_BRIDGE_KEY=${KEY_PLACEHOLDER}`);
    const res = await runCommand(
      "bash",
      ["-c", `exec 2>&1\n${script.replaceAll(KEY_PLACEHOLDER, fresh.key)}`],
      { cwd: dir, env: { ...withoutKey, AGENT_BRIDGE_URL: fresh.url } },
    );
    const expected = steps
      .map(({ command, expected }) =>
        [`@@ ${command.replaceAll(KEY_PLACEHOLDER, fresh.key)}`, ...expected].join("\n"),
      )
      .join("\n");
    expect(res.stdout).toMatch(transcriptPattern(`${expected}\n`));
  });

  it("the CI step's script succeeds with the review, and fails with the run's exit code", async () => {
    const [block] = codeBlocks(await docSection("docs/cli.md", "Command line"), "yaml");
    const [step] = parse(block ?? "") as { env: Record<string, string>; run: string }[];
    if (!step) throw new Error("README has no CI step");
    expect(Object.keys(step.env)).toEqual(["AGENT_BRIDGE_URL", "AGENT_BRIDGE_KEY"]);

    const summary = join(dir, "summary.md");
    await writeFile(summary, "");
    // As a GitHub Actions `run:` step: bash -e, the step's env from the (here local) settings.
    // The repository's variable and secret: the server's URL and the key it printed.
    const stepEnv = { ...env, GITHUB_STEP_SUMMARY: summary };
    const ok = await runCommand("bash", ["-e", "-c", step.run], { cwd: dir, env: stepEnv });
    expect(ok.code).toBe(0);
    expect(await readFile(join(dir, "review.md"), "utf8")).toBe("Hello, world!\n");
    expect(await readFile(summary, "utf8")).toBe("Hello, world!\n");
    expect(ok.stderr).toMatch(/^succeeded in /m);

    await server.fake.setScenario(crashBeforeResult());
    const failed = await runCommand("bash", ["-e", "-c", step.run], {
      cwd: dir,
      env: stepEnv,
    }).finally(() => server.fake.setScenario(toolThenReply(PARTS)));
    expect(failed.code).toBe(3);
    expect(failed.stderr).toMatch(/^failed in /m);
  });
});
