import { createHash } from "node:crypto";
import path from "node:path";
import { promisify } from "node:util";
import { gunzip, gzip } from "node:zlib";
import type { TranscriptLocation } from "../agents/agent.js";
import { errorText, type Logger } from "../log.js";
import { AgentFileError, type AgentFiles } from "../process/agent-files.js";
import type { Database } from "../store/db.js";
import {
  appendTranscript,
  putTranscript,
  type StoredCopy,
  transcriptGzipped,
  transcriptHead,
} from "../store/transcripts.js";

// A session's CLI transcript follows it between instances: stored after each run, written back
// before a resume on an instance whose copy is missing or older. The CLIs only ever append to a
// transcript, so a copy on disk that extends the stored one is newer (its run's store failed) and
// is kept; any other difference means another instance ran the session since, and the stored
// copy wins. The file is the agent's, in a directory it can write to: it is read and written
// through the location's `files`, as the agent (src/process/agent-files.ts says why).
//
// A long session's transcript grows by each run, and each run should cost what it added, not
// what the session holds: a file is taken to continue the stored copy when it holds the copy's
// last bytes (its seam: their digest is stored) where the copy ends, which is read from there on
// alone. What it holds past them is stored as one more piece. A file that does not (shorter, or
// other bytes at the seam: another instance ran the session, or the agent rewrote the file) is
// stored whole anew. What the seam cannot see, a change before it that keeps the length, only the
// agent can make, to its own session.

/**
 * The longest transcript read: the agent can make its own as long as it likes (or a FIFO it
 * feeds without end), and the server holds it in memory to store it.
 */
export const TRANSCRIPT_MAX_BYTES = 64 * 1024 * 1024;

/** A copy's last bytes whose digest is its seam: a few lines, read again by each store. */
const SEAM_BYTES = 4096;

const gzipped = promisify(gzip);
const gunzipped = promisify(gunzip);

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

/** The seam of the copy that ends with `end`. */
const seamOf = (end: Buffer) => sha256(end.subarray(Math.max(0, end.length - SEAM_BYTES)));

interface Copy {
  length: number;
  seam: string;
}

/**
 * When the file continues `copy`: what it holds past it and the seam of the file as it is;
 * "differs" when it does not; undefined when nothing is there. Reads from the copy's seam on.
 */
async function continuation(
  files: AgentFiles,
  file: string,
  copy: Copy,
): Promise<{ appended: Buffer; seam: string } | "differs" | undefined> {
  const from = Math.max(0, copy.length - SEAM_BYTES);
  const tail = await files.read(file, TRANSCRIPT_MAX_BYTES, from);
  if (!tail) return undefined;
  const seam = tail.subarray(0, copy.length - from);
  if (seam.length < copy.length - from || sha256(seam) !== copy.seam) return "differs";
  return { appended: tail.subarray(seam.length), seam: seamOf(tail) };
}

/** The session's stored transcript, its pieces joined; undefined when none is stored. */
export async function storedTranscript(
  db: Database,
  sessionId: string,
): Promise<Buffer | undefined> {
  const stream = await transcriptGzipped(db, sessionId);
  return stream.length > 0 ? gunzipped(stream) : undefined;
}

/** Before a resume: the session's stored transcript on this instance's disk, unless it is there. */
export async function restoreTranscript(
  db: Database,
  sessionId: string,
  location: TranscriptLocation,
  logger: Logger,
): Promise<void> {
  const head = await transcriptHead(db, sessionId);
  if (!head) return;
  const file = path.join(location.root, head.path);
  // A head is stored with its pieces: there is a copy.
  const stored = async () => (await storedTranscript(db, sessionId)) ?? Buffer.alloc(0);
  // A copy stored whole before pieces were has no seam yet: it is read to find it.
  let bytes: Buffer | undefined;
  let copy: Copy;
  if (head.seam === null) {
    bytes = await stored();
    copy = { length: bytes.length, seam: seamOf(bytes) };
  } else {
    copy = { length: head.length, seam: head.seam };
  }
  // What stands in the transcript's place and cannot be read as one (a link, a FIFO, a file over
  // the bound) is no copy of it: the stored copy replaces it.
  const local = await continuation(location.files, file, copy).catch((err: unknown) => {
    if (!(err instanceof AgentFileError)) throw err;
    logger.warn("replacing what is in the place of the session's transcript", {
      session_id: sessionId,
      error: errorText(err),
    });
    return undefined;
  });
  if (local && local !== "differs") return;
  await location.files.write(file, bytes ?? (await stored()));
}

/**
 * After a run: what the session's transcript gained stored, or the transcript whole. Resolves
 * with the stored copy as this store leaves it (undefined: none, or another store came between
 * and its copy stays). With `after`, the copy the run's first store left (null: it left none), it
 * is the run's later store (of what the CLI wrote after its outcome, once the run's completion has
 * freed the session for any instance), and stores nothing once another store has come between:
 * over that copy it only appends what the file gained since; where there was none, it stores the
 * file whole (a CLI may write a session's first transcript only as it exits).
 */
export async function saveTranscript(
  db: Database,
  sessionId: string,
  agentSessionId: string,
  location: TranscriptLocation,
  after?: StoredCopy | null,
): Promise<StoredCopy | undefined> {
  // Where the first store left none, a copy another store made since keeps the whole file's
  // insert from storing: it is not read first, as the look for the file most often finds none.
  const head = after === null ? undefined : await transcriptHead(db, sessionId);
  const left = head && { length: head.length, seam: head.seam };
  if (after && !(left && left.length === after.length && left.seam === after.seam)) return;
  const known = head && location.stays?.(agentSessionId, head.path) ? head.path : undefined;
  const relative = known ?? (await location.find(agentSessionId));
  if (!relative) return left;
  const file = path.join(location.root, relative);
  // Every store is made over the copy read here, or not at all (another store came between).
  if (head?.path === relative && head.seam !== null) {
    const next = await continuation(location.files, file, { length: head.length, seam: head.seam });
    if (!next) return left;
    if (next !== "differs") {
      if (next.appended.length === 0) return left;
      const grown = { length: head.length + next.appended.length, seam: next.seam };
      const piece = await gzipped(next.appended);
      return (await appendTranscript(db, { sessionId, ...grown }, head, piece)) ? grown : undefined;
    }
  }
  if (after) return;
  const bytes = await location.files.read(file, TRANSCRIPT_MAX_BYTES);
  if (!bytes) return left;
  const whole = { length: bytes.length, seam: seamOf(bytes) };
  const stored = { sessionId, path: relative, ...whole };
  return (await putTranscript(db, stored, await gzipped(bytes), left)) ? whole : undefined;
}
