import { execFileSync } from "node:child_process";
import {
  chown,
  link,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { gunzipSync } from "node:zlib";
import { asc, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TranscriptLocation } from "../../src/agents/agent.js";
import { claudeTranscripts } from "../../src/agents/claude/transcripts.js";
import { silentLogger } from "../../src/log.js";
import { AgentFileError, type AgentFiles, agentFiles } from "../../src/process/agent-files.js";
import type { RunAs } from "../../src/process/agent-user.js";
import {
  restoreTranscript,
  saveTranscript,
  storedTranscript,
  TRANSCRIPT_MAX_BYTES,
} from "../../src/runs/transcripts.js";
import { agentTranscriptPieces } from "../../src/store/schema.js";
import { transcriptHead } from "../../src/store/transcripts.js";
import { ensureAgentUser, isRoot } from "../support/agent-user.js";
import { BACKENDS, insertSessionRun, openTestDatabase, type TestDatabase } from "../support/db.js";

// The transcript store's rules, on a CLI state dir of the test's making: what is stored after a
// run, and which copy wins before a resume; and, with the agent as another user, that what the
// agent puts in the transcript's place is never read or written by the server.

const RELATIVE = join("projects", "-work", "cli-session.jsonl");
const PATH = process.env.PATH ?? "/usr/bin:/bin";

describe.each(BACKENDS)("session transcripts on %s", (backend) => {
  let database: TestDatabase;
  let dir: string;
  /** The agent's user, with AGENT_BRIDGE_AGENT_USER (as root). */
  let runAs: RunAs;
  /** A HOME of the agent's: its own to change. */
  let home: string;
  /** Root's own file, readable by root alone, on the HOME's file system. */
  let secret: string;
  beforeAll(async () => {
    database = await openTestDatabase(backend);
    dir = await mkdtemp(join(tmpdir(), "transcripts-"));
    if (!isRoot) return;
    const agent = ensureAgentUser();
    runAs = { uid: agent.uid, gid: agent.gid, groups: [] };
    home = await mkdtemp(join(tmpdir(), "agent-home-"));
    await chown(home, agent.uid, agent.gid);
    secret = join(dir, "secret.txt");
    await writeFile(secret, "ROOT-SECRET\n", { mode: 0o600 });
  });
  afterAll(async () => {
    await database.destroy();
    await rm(dir, { recursive: true, force: true });
    if (home) await rm(home, { recursive: true, force: true });
  });

  /**
   * A CLI state dir of its own (an instance's disk), found and touched as `runAs` (the server's
   * user when undefined), in `parent`.
   */
  function disk(name: string, runAs?: RunAs, parent = dir): TranscriptLocation & { file: string } {
    const root = join(parent, name);
    const location = claudeTranscripts(
      { CLAUDE_CONFIG_DIR: root, PATH },
      agentFiles({ PATH }, runAs),
    );
    return { ...location, file: join(root, RELATIVE) };
  }
  /** `location`, with where each read of its files began, and how many listings and writes it made. */
  function watched<L extends TranscriptLocation>(location: L) {
    const seen = { readsFrom: [] as number[], writes: 0, listings: 0 };
    const files: AgentFiles = {
      ...location.files,
      read: (file, maxBytes, from = 0) => {
        seen.readsFrom.push(from);
        return location.files.read(file, maxBytes, from);
      },
      write: (file, content) => {
        seen.writes++;
        return location.files.write(file, content);
      },
    };
    const find = (agentSessionId: string) => {
      seen.listings++;
      return location.find(agentSessionId);
    };
    return { location: { ...location, files, find }, seen };
  }
  const write = async (file: string, text: string | Buffer) => {
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, text);
  };
  const append = async (file: string, text: string | Buffer) =>
    writeFile(file, text, { flag: "a" });
  const newSession = async () => (await insertSessionRun(database.db)).sessionId;
  /** The session's stored pieces, each unzipped on its own. */
  const pieces = async (session: string) =>
    (
      await database.db
        .select({ gzipped: agentTranscriptPieces.gzipped })
        .from(agentTranscriptPieces)
        .where(eq(agentTranscriptPieces.sessionId, session))
        .orderBy(asc(agentTranscriptPieces.seq))
    ).map((piece) => gunzipSync(piece.gzipped).toString("utf8"));
  /** A transcript line longer than the seam: read from the seam on, it is not read whole. */
  const turn = (n: number) => `${JSON.stringify({ turn: n, text: "x".repeat(6000) })}\n`;

  it("stores a run's transcript, then what each later run appended as a piece of its own, read from the seam on, where it was found first", async () => {
    const session = await newSession();
    const { location: a, seen } = watched(disk(`a-${session}`));
    await saveTranscript(database.db, session, "cli-session", a);
    expect(await transcriptHead(database.db, session)).toBeUndefined();
    await write(a.file, turn(1));
    await saveTranscript(database.db, session, "cli-session", a);
    const stored = await transcriptHead(database.db, session);
    expect(stored).toMatchObject({ path: RELATIVE, length: turn(1).length });
    expect(await pieces(session)).toEqual([turn(1)]);

    // Nothing appended: nothing stored.
    await saveTranscript(database.db, session, "cli-session", a);
    expect((await transcriptHead(database.db, session))?.updatedAt).toEqual(stored?.updatedAt);

    seen.readsFrom.length = 0;
    seen.listings = 0;
    await append(a.file, turn(2));
    await saveTranscript(database.db, session, "cli-session", a);
    await append(a.file, turn(3));
    await saveTranscript(database.db, session, "cli-session", a);
    expect(await pieces(session)).toEqual([turn(1), turn(2), turn(3)]);
    expect(await transcriptHead(database.db, session)).toMatchObject({
      length: turn(1).length + turn(2).length + turn(3).length,
    });
    // Each store read the file from 4 KiB before the stored copy's end, never from its start.
    expect(seen.readsFrom).toEqual([turn(1).length - 4096, turn(1).length + turn(2).length - 4096]);
    // The session's file is named after it: once stored, it is not looked for again.
    expect(seen.listings).toBe(0);
  });

  it("stores a file that does not continue the stored copy whole anew: shorter, or other bytes at its seam", async () => {
    const session = await newSession();
    const a = disk(`a-${session}`);
    await write(a.file, turn(1) + turn(2));
    await saveTranscript(database.db, session, "cli-session", a);
    await append(a.file, turn(3));
    await saveTranscript(database.db, session, "cli-session", a);
    expect(await pieces(session)).toHaveLength(2);

    // Shorter: another instance's copy, behind this one.
    await write(a.file, turn(1) + turn(2));
    await saveTranscript(database.db, session, "cli-session", a);
    expect(await pieces(session)).toEqual([turn(1) + turn(2)]);

    // Longer, but another turn where the stored copy ends.
    const other = turn(2).replace('x"', 'y"');
    await write(a.file, turn(1) + other + turn(3));
    await saveTranscript(database.db, session, "cli-session", a);
    expect(await pieces(session)).toEqual([turn(1) + other + turn(3)]);
    expect(await transcriptHead(database.db, session)).toMatchObject({
      length: (turn(1) + other + turn(3)).length,
    });
  });

  it("a run's later store (what its CLI wrote after its outcome) stores nothing once another instance's run has stored the session: that run's turn stays", async () => {
    const session = await newSession();
    const a = disk(`a-${session}`);
    const b = disk(`b-${session}`);
    await write(a.file, turn(1));
    const left = await saveTranscript(database.db, session, "cli-session", a);
    expect(left).toMatchObject({ length: turn(1).length });
    // The run's completion freed the session: the next run went to B, which stored its turn.
    await restoreTranscript(database.db, session, b, silentLogger);
    await append(b.file, turn(2));
    await saveTranscript(database.db, session, "cli-session", b);
    // A's CLI wrote a last line after its outcome; A's later store comes now.
    await append(a.file, '{"type":"summary"}\n');
    expect(await saveTranscript(database.db, session, "cli-session", a, left)).toBeUndefined();
    expect(await storedTranscript(database.db, session)).toEqual(Buffer.from(turn(1) + turn(2)));
    // Without B's run between, the later store appends what A's CLI wrote after its outcome.
    const alone = await newSession();
    const c = disk(`c-${alone}`);
    await write(c.file, turn(1));
    const first = await saveTranscript(database.db, alone, "cli-session", c);
    await append(c.file, '{"type":"summary"}\n');
    await saveTranscript(database.db, alone, "cli-session", c, first);
    expect(await pieces(alone)).toEqual([turn(1), '{"type":"summary"}\n']);
  });

  it("a run's later store, where its first found no transcript, stores the file whole while the session has no copy, and nothing once another store has made one", async () => {
    const session = await newSession();
    const a = disk(`a-${session}`);
    const b = disk(`b-${session}`);
    // A's first store came before its CLI wrote the file.
    expect(await saveTranscript(database.db, session, "cli-session", a)).toBeUndefined();
    // B's run stored the session first; A's CLI wrote its file as it exited.
    await write(b.file, turn(2));
    await saveTranscript(database.db, session, "cli-session", b);
    await write(a.file, turn(1));
    expect(await saveTranscript(database.db, session, "cli-session", a, null)).toBeUndefined();
    expect(await pieces(session)).toEqual([turn(2)]);
    // Without B's run between, A's later store stores its file whole.
    const alone = await newSession();
    const c = disk(`c-${alone}`);
    expect(await saveTranscript(database.db, alone, "cli-session", c)).toBeUndefined();
    await write(c.file, turn(1));
    expect(await saveTranscript(database.db, alone, "cli-session", c, null)).toMatchObject({
      length: turn(1).length,
    });
    expect(await pieces(alone)).toEqual([turn(1)]);
  });

  it("restores the pieces joined, byte for byte, where the copy is missing; where it was written, reads it from the seam on and writes nothing", async () => {
    const session = await newSession();
    const { location: a, seen } = watched(disk(`a-${session}`));
    // Stored before the CLI finished its line (the first store comes before the CLI exits),
    // the cut inside a character.
    const bytes = Buffer.from(`${turn(1)}{"turn":2,"text":"déjà vu"}\n${turn(3)}`);
    const cuts = [turn(1).length + 20, bytes.length - 100, bytes.length];
    expect(bytes.subarray(cuts[0], (cuts[0] ?? 0) + 1)).toEqual(Buffer.from([0xa9]));
    await write(a.file, bytes.subarray(0, cuts[0]));
    await saveTranscript(database.db, session, "cli-session", a);
    for (const [i, cut] of cuts.slice(1).entries()) {
      await append(a.file, bytes.subarray(cuts[i], cut));
      await saveTranscript(database.db, session, "cli-session", a);
    }
    expect(await pieces(session)).toHaveLength(3);
    expect(await storedTranscript(database.db, session)).toEqual(bytes);

    const b = disk(`b-${session}`);
    await restoreTranscript(database.db, session, b, silentLogger);
    expect(await readFile(b.file)).toEqual(bytes);

    seen.readsFrom.length = 0;
    seen.listings = 0;
    await restoreTranscript(database.db, session, a, silentLogger);
    expect(seen).toEqual({ readsFrom: [bytes.length - 4096], writes: 0, listings: 0 });
    expect(await readFile(a.file)).toEqual(bytes);
  });

  it("writes the stored copy where it is missing or behind, and keeps a copy that extends it", async () => {
    const session = await newSession();
    const [a, b] = [disk(`a-${session}`), disk(`b-${session}`)];
    await write(a.file, '{"turn":1}\n');
    await saveTranscript(database.db, session, "cli-session", a);

    // Missing: written, with the directories it needs.
    await restoreTranscript(database.db, session, b, silentLogger);
    expect(await readFile(b.file, "utf8")).toBe('{"turn":1}\n');
    expect((await stat(b.file)).mode & 0o777).toBe(0o600);

    // B runs the session on: A's copy is behind, and is brought up to date.
    await write(b.file, '{"turn":1}\n{"turn":2}\n');
    await saveTranscript(database.db, session, "cli-session", b);
    await restoreTranscript(database.db, session, a, silentLogger);
    expect(await readFile(a.file, "utf8")).toBe('{"turn":1}\n{"turn":2}\n');

    // A ran a turn whose transcript could not be stored: its longer copy is kept.
    await write(a.file, '{"turn":1}\n{"turn":2}\n{"turn":3}\n');
    await restoreTranscript(database.db, session, a, silentLogger);
    expect(await readFile(a.file, "utf8")).toBe('{"turn":1}\n{"turn":2}\n{"turn":3}\n');

    // A copy that went another way: the stored one wins.
    await write(b.file, '{"turn":1}\n{"other":2}\n');
    await restoreTranscript(database.db, session, b, silentLogger);
    expect(await readFile(b.file, "utf8")).toBe('{"turn":1}\n{"turn":2}\n');
  });

  describe.skipIf(!isRoot)("with the agent as another user", () => {
    const asAgent = (command: string) =>
      execFileSync("setpriv", [
        `--reuid=${runAs.uid}`,
        `--regid=${runAs.gid}`,
        "--clear-groups",
        "sh",
        "-ec",
        command,
      ]);
    const secretState = async () => {
      const { uid, gid, mode, nlink } = await stat(secret);
      return { uid, gid, mode, nlink, content: await readFile(secret, "utf8") };
    };
    const storedText = async (session: string) =>
      (await storedTranscript(database.db, session))?.toString("utf8");

    it("writes it as the agent, directories it made included", async () => {
      const session = await newSession();
      const [a, b] = [disk(`a-${session}`), disk(`b-${session}`, runAs, home)];
      await write(a.file, '{"turn":1}\n');
      await saveTranscript(database.db, session, "cli-session", a);
      await restoreTranscript(database.db, session, b, silentLogger);
      expect(await readFile(b.file, "utf8")).toBe('{"turn":1}\n');
      for (const path of [b.file, dirname(b.file), dirname(dirname(b.file)), b.root]) {
        expect(await stat(path)).toMatchObject({ uid: runAs.uid, gid: runAs.gid });
      }
    });

    it("stores nothing of what the agent put in the transcript's place, stored before or not, and says what it refused", async () => {
      // Each in the place of a transcript, or of one stored already (whose seam is read then).
      const plants = {
        "a symbolic link to a root file": (file: string) => asAgent(`ln -sfn ${secret} ${file}`),
        // The kernel's protected_hardlinks keeps the agent itself from making this one.
        "a hard link to a root file": async (file: string) => {
          asAgent(`rm -f ${file}`);
          await link(secret, file);
        },
        "a FIFO": (file: string) => asAgent(`rm -f ${file}; mkfifo ${file}`),
        "a file over the bound": (file: string) =>
          asAgent(`truncate -s ${TRANSCRIPT_MAX_BYTES + 1} ${file}`),
      };
      const before = await secretState();
      for (const storedBefore of [false, true]) {
        const refusals: Record<string, string> = {};
        for (const [what, plant] of Object.entries(plants)) {
          const session = await newSession();
          const location = disk(session, runAs, home);
          asAgent(`mkdir -p ${dirname(location.file)}`);
          if (storedBefore) {
            asAgent(`echo '{"turn":1}' > ${location.file}`);
            await saveTranscript(database.db, session, "cli-session", location);
          }
          const head = await transcriptHead(database.db, session);
          await plant(location.file);
          const refused = await saveTranscript(database.db, session, "cli-session", location).then(
            () => undefined,
            (err: unknown) => err,
          );
          expect(refused, what).toBeInstanceOf(AgentFileError);
          refusals[what] = (refused as Error).message.replace(`${location.file}: `, "");
          expect(await transcriptHead(database.db, session), what).toEqual(head);
          expect(await storedText(session), what).toBe(storedBefore ? '{"turn":1}\n' : undefined);
        }
        expect(refusals, `stored before: ${storedBefore}`).toEqual({
          "a symbolic link to a root file": "is a symbolic link",
          "a hard link to a root file": expect.stringMatching(/Permission denied$/),
          "a FIFO": "is not a regular file",
          "a file over the bound": `is larger than ${TRANSCRIPT_MAX_BYTES} bytes`,
        });
      }
      expect(await secretState()).toEqual({ ...before, nlink: 3 });
    });

    it("writes the stored copy back in place of a link, a hard link or a FIFO, and nowhere else", async () => {
      const before = await secretState();
      for (const plant of [
        (file: string) => asAgent(`ln -s ${secret} ${file}`),
        (file: string) => link(secret, file),
        (file: string) => asAgent(`mkfifo ${file}`),
      ]) {
        const session = await newSession();
        const a = disk(`a-${session}`);
        await write(a.file, '{"turn":1}\n');
        await saveTranscript(database.db, session, "cli-session", a);
        const b = disk(session, runAs, home);
        asAgent(`mkdir -p ${dirname(b.file)}`);
        await plant(b.file);
        await restoreTranscript(database.db, session, b, silentLogger);
        expect(await readFile(b.file, "utf8")).toBe('{"turn":1}\n');
        expect(await lstat(b.file)).toMatchObject({ uid: runAs.uid, nlink: 1 });
        expect(await storedText(session)).toBe('{"turn":1}\n');
      }
      expect(await secretState()).toEqual(before);
    });

    it("neither stores nor restores through a FIFO in the project directory's place", async () => {
      const session = await newSession();
      const a = disk(`a-${session}`);
      await write(a.file, '{"turn":1}\n');
      await saveTranscript(database.db, session, "cli-session", a);
      const b = disk(session, runAs, home);
      asAgent(`mkdir -p ${dirname(dirname(b.file))}`);
      asAgent(`mkfifo ${dirname(b.file)}`);
      await saveTranscript(database.db, session, "cli-session", b);
      await expect(restoreTranscript(database.db, session, b, silentLogger)).rejects.toThrow(
        AgentFileError,
      );
      expect(await storedText(session)).toBe('{"turn":1}\n');
    });
  });
});
