import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TranscriptLocation } from "../../src/agents/agent.js";
import { restoreTranscript, saveTranscript } from "../../src/runs/transcripts.js";
import { getTranscript } from "../../src/store/transcripts.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// The transcript store's rules, with a location of the test's making: what is stored after a
// run, and which copy wins before a resume.

const RELATIVE = join("projects", "-work", "cli-session.jsonl");

describe.each(BACKENDS)("session transcripts on %s", (backend) => {
  let database: TestDatabase;
  let dir: string;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    dir = await mkdtemp(join(tmpdir(), "transcripts-"));
  });
  afterAll(async () => {
    await database.destroy();
    await rm(dir, { recursive: true, force: true });
  });

  /** A CLI state dir of its own: an instance's disk. */
  async function disk(name: string): Promise<TranscriptLocation & { file: string }> {
    const root = join(dir, name);
    const file = join(root, RELATIVE);
    return {
      root,
      file,
      find: async (id) => {
        const exists = await stat(file).catch(() => undefined);
        return exists && id === "cli-session" ? RELATIVE : undefined;
      },
    };
  }
  const write = async (file: string, text: string) => {
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, text);
  };
  const newSession = async () => (await insertSessionRun(database.db)).sessionId;

  it("stores a run's transcript, and only again once it changed", async () => {
    const session = await newSession();
    const a = await disk(`a-${session}`);
    await saveTranscript(database.db, session, "cli-session", a);
    expect(await getTranscript(database.db, session)).toBeUndefined();
    await write(a.file, '{"turn":1}\n');
    await saveTranscript(database.db, session, "cli-session", a);
    const stored = await getTranscript(database.db, session);
    expect(stored).toMatchObject({ path: RELATIVE });
    await saveTranscript(database.db, session, "cli-session", a);
    expect((await getTranscript(database.db, session))?.updatedAt).toEqual(stored?.updatedAt);
  });

  it("writes the stored copy where it is missing or behind, and keeps a copy that extends it", async () => {
    const session = await newSession();
    const [a, b] = [await disk(`a-${session}`), await disk(`b-${session}`)];
    await write(a.file, '{"turn":1}\n');
    await saveTranscript(database.db, session, "cli-session", a);

    // Missing: written, with the directories it needs.
    await restoreTranscript(database.db, session, b, undefined);
    expect(await readFile(b.file, "utf8")).toBe('{"turn":1}\n');
    expect((await stat(b.file)).mode & 0o777).toBe(0o600);

    // B runs the session on: A's copy is behind, and is brought up to date.
    await write(b.file, '{"turn":1}\n{"turn":2}\n');
    await saveTranscript(database.db, session, "cli-session", b);
    await restoreTranscript(database.db, session, a, undefined);
    expect(await readFile(a.file, "utf8")).toBe('{"turn":1}\n{"turn":2}\n');

    // A ran a turn whose transcript could not be stored: its longer copy is kept.
    await write(a.file, '{"turn":1}\n{"turn":2}\n{"turn":3}\n');
    await restoreTranscript(database.db, session, a, undefined);
    expect(await readFile(a.file, "utf8")).toBe('{"turn":1}\n{"turn":2}\n{"turn":3}\n');

    // A copy that went another way: the stored one wins.
    await write(b.file, '{"turn":1}\n{"other":2}\n');
    await restoreTranscript(database.db, session, b, undefined);
    expect(await readFile(b.file, "utf8")).toBe('{"turn":1}\n{"turn":2}\n');
  });

  it.skipIf(process.getuid?.() !== 0)(
    "writes it as the tenant's agent's, directories it made included, for an agent run as another user",
    async () => {
      const session = await newSession();
      const [a, b] = [await disk(`a-${session}`), await disk(`b-${session}`)];
      await write(a.file, '{"turn":1}\n');
      await saveTranscript(database.db, session, "cli-session", a);
      const agent = { runAs: { uid: 4321, gid: 4322 }, env: {} };
      await restoreTranscript(database.db, session, b, agent);
      for (const path of [b.file, dirname(b.file), dirname(dirname(b.file)), b.root]) {
        expect(await stat(path)).toMatchObject({ uid: 4321, gid: 4322 });
      }
    },
  );
});
