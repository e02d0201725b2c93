import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, listen, type TestApp } from "../support/app.js";
import { type ClaudeEnv, makeClaudeEnv } from "../support/claude-env.js";
import { REAL_CLI_BACKENDS } from "../support/db.js";
import {
  type MockAnthropic,
  startMockAnthropic,
  toolResultText,
} from "../support/mock-anthropic.js";
import { git, makeRepo, type TestRepo } from "../worktrees/repo.js";
import { createHook, deliver, getRun, githubHeaders, isFinished, until } from "./support.js";

// A checkout hook whose tenant's repository an earlier agent has rewritten: its config may name
// another origin, rewrite addresses, or plant commands that git runs while it fetches. The head is
// fetched by the server from the hook's pinned origin into its own cache, and the tenant's
// repository takes it from there offline: none of the planted settings redirects the fetch or runs
// (each planted command would write a marker file), and the run sees the pull request's real head.

const SECRET = "github-secret-0123456789";
const TOKEN = "ghs_planted-test-token-0123456789";
const SAME_REPO = { full_name: "acme/widgets" };
const HEADER = Buffer.from(`x-access-token:${TOKEN}`).toString("base64");

describe.each(REAL_CLI_BACKENDS)(
  "a checkout whose repository's config an agent planted, on %s",
  (backend) => {
    let mock: MockAnthropic;
    let ce: ClaudeEnv;
    let repo: TestRepo;
    let dataDir: string;
    let t: TestApp;
    let server: { url: string; close(): Promise<void> };
    /** Where the pull requests' commits are pushed from. */
    let author: string;
    /** Another repository, holding every pull request's ref at a commit of the attacker's. */
    let decoy: string;
    let decoyAuthor: string;
    let sent = 0;

    /** Commits `pr-only.txt` holding `content` in `clone` and pushes it to `ref`; its commit. */
    const push = async (clone: string, content: string, ref: string): Promise<string> => {
      await writeFile(join(clone, "pr-only.txt"), `${content}\n`);
      git(clone, "add", "pr-only.txt");
      git(clone, "commit", "-q", "-m", content);
      git(clone, "push", "-q", "--force", "origin", `HEAD:${ref}`);
      return git(clone, "rev-parse", "HEAD");
    };

    /** Pushes a head to pull request `pr` at origin, and the decoy's own head to the decoy. */
    const pushHeads = async (pr: number, content: string) => {
      await push(decoyAuthor, `decoy ${content}`, `refs/pull/${pr}/head`);
      return push(author, content, `refs/pull/${pr}/head`);
    };

    beforeAll(async () => {
      mock = await startMockAnthropic({ quiet: true });
      ce = await makeClaudeEnv(mock.url);
      // Out of the temp dir, which the sandbox replaces with its own (see checkout.real.test.ts).
      repo = await makeRepo("complete", "/var/tmp");
      author = join(repo.root, "author");
      git(repo.root, "clone", "-q", repo.origin, author);
      decoy = join(repo.root, "decoy.git");
      git(repo.root, "clone", "-q", "--bare", repo.origin, decoy);
      decoyAuthor = join(repo.root, "decoy-author");
      git(repo.root, "clone", "-q", decoy, decoyAuthor);
      dataDir = await mkdtemp(join("/var/tmp", "agent-bridge-data-"));
      t = await createTestApp(backend, {
        ...ce.env,
        AGENT_BRIDGE_WORK_DIR: repo.clone,
        AGENT_BRIDGE_DATA_DIR: dataDir,
        AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS: repo.root,
      });
      server = await listen(t.app);
      await createHook(server.url, {
        name: "review",
        verification: "github",
        secret: SECRET,
        forge_token: TOKEN,
        checkout: "pull_request",
        checkout_origin: repo.origin,
        prompt_template: "Review #{{pull_request.number}}",
        session_key_template: "{{pull_request.number}}",
        permission_mode: "bypassPermissions",
      });
    });
    afterAll(async () => {
      await server?.close();
      await t?.close();
      await mock?.close();
      await ce?.cleanup();
      await repo?.cleanup();
      if (dataDir) await rm(dataDir, { recursive: true, force: true });
    });

    /**
     * Delivers pull request `pr` with the agent running `command` (none: the run is not expected to
     * reach the agent); the run and the tool's output, if the agent ran.
     */
    const review = async (pr: number, command?: string) => {
      if (command) {
        mock.script(
          { blocks: [{ type: "tool_use", name: "Bash", input: { command } }] },
          { blocks: [{ type: "text", text: "Reviewed." }] },
        );
      }
      const requests = mock.mainRequests().length;
      // Each delivery's body its own: the same body again is a replay, and starts nothing.
      sent += 1;
      // A pull request from a branch of the repository itself: a fork's would run restricted.
      const body = JSON.stringify({
        action: "synchronize",
        sent,
        pull_request: { number: pr, head: { repo: SAME_REPO }, base: { repo: SAME_REPO } },
      });
      const res = await deliver(server.url, "review", body, githubHeaders(SECRET, body));
      expect(res.status).toBe(202);
      const receipt = (await res.json()) as { run_id: string; session_id: string };
      const run = await until(
        async () => {
          const r = await getRun(server.url, receipt.run_id);
          return isFinished(r) && r;
        },
        60_000,
        "the run",
      );
      const ran = mock.mainRequests().length > requests;
      const output = ran ? toolResultText(mock.mainRequests().at(-1)) : undefined;
      return { run, output, sessionId: receipt.session_id };
    };

    /** Sets `settings` in the tenant's repository for the length of `body`. */
    const planted = async (settings: [string, string][], body: () => Promise<void>) => {
      for (const [key, value] of settings) git(repo.clone, "config", key, value);
      try {
        await body();
      } finally {
        for (const [key] of settings) git(repo.clone, "config", "--unset-all", key);
        git(repo.clone, "config", "remote.origin.url", repo.origin);
      }
    };

    it("shows the origin the hook pins", async () => {
      const hook = await (await fetch(`${server.url}/v1/hooks/review`)).json();
      expect(hook).toMatchObject({ checkout: "pull_request", checkout_origin: repo.origin });
    });

    const marker = () => join(repo.clone, ".git", "planted-marker");
    it.each<[string, number, () => [string, string][]]>([
      ["remote.origin.url naming another repository", 21, () => [["remote.origin.url", decoy]]],
      ["url.<x>.insteadOf rewriting origin", 22, () => [[`url.${decoy}.insteadOf`, repo.origin]]],
      [
        "remote.origin.uploadpack running a command",
        23,
        () => [["remote.origin.uploadpack", `touch ${marker()}; git-upload-pack`]],
      ],
      [
        "core.sshCommand behind an ssh origin",
        24,
        () => [
          ["remote.origin.url", "ssh://git.invalid/acme/widgets.git"],
          ["core.sshCommand", `touch ${marker()}; false`],
        ],
      ],
      [
        "credential.helper=!command behind an https origin",
        25,
        () => [
          ["remote.origin.url", "https://127.0.0.1:9/acme/widgets.git"],
          ["credential.helper", `!touch ${marker()}`],
        ],
      ],
    ])("fetches the real head past %s, running nothing planted", async (_what, pr, settings) => {
      const head = await pushHeads(pr, `head of ${pr}`);
      await planted(settings(), async () => {
        const { run, output } = await review(pr, "git rev-parse HEAD && cat pr-only.txt");
        expect(run).toMatchObject({ status: "succeeded", result: "Reviewed." });
        expect(output).toBe(`${head}\nhead of ${pr}`);
      });
      expect(existsSync(marker())).toBe(false);
    });

    it("fails the run rather than check out another head, when the tenant's config redirects its fetch from the cache", async () => {
      const first = await pushHeads(31, "first of 31");
      const one = await review(31, "git rev-parse HEAD");
      expect(one.output).toBe(first);
      // What an agent of that session could do: find the cache, and have its repository take the
      // session's next head from a repository of its own, with the ref the cache would hold.
      const [cache] = (await readdir(join(dataDir, "checkouts"))).filter((f) => f.endsWith(".git"));
      const forged = await push(decoyAuthor, "forged", `refs/checkouts/${one.sessionId}`);
      await pushHeads(31, "second of 31");
      await planted(
        [[`url.${decoy}.insteadOf`, join(dataDir, "checkouts", cache ?? "none")]],
        async () => {
          const two = await review(31);
          expect(two.sessionId).toBe(one.sessionId);
          expect(two.run).toMatchObject({ status: "failed" });
          expect(two.output).toBeUndefined();
        },
      );
      expect(git(repo.clone, "rev-parse", `worktree-${one.sessionId}`)).not.toBe(forged);
    });

    it("keeps the hook's forge token out of the tenant's repository and the agent's environment", async () => {
      const head = await pushHeads(41, "head of 41");
      const { run, output } = await review(
        41,
        "git rev-parse HEAD; env; cat ~/.gitconfig; git config --list --show-origin",
      );
      expect(run).toMatchObject({ status: "succeeded" });
      expect(output).toContain(head);
      for (const secret of [TOKEN, HEADER]) {
        expect(output).not.toContain(secret);
        for (const file of await filesUnder(repo.clone)) {
          expect((await readFile(file)).includes(secret), file).toBe(false);
        }
        for (const file of await filesUnder(join(dataDir, "checkouts"))) {
          expect((await readFile(file)).includes(secret), file).toBe(false);
        }
      }
    });
  },
);

/** Every file under `dir`, .git included. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}
