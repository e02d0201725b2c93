import { createHash } from "node:crypto";
import path from "node:path";
import { promisify } from "node:util";
import { gunzip, gzip } from "node:zlib";
import type { TranscriptLocation } from "../agents/agent.js";
import { errorText, type Logger } from "../log.js";
import { AgentFileError } from "../process/agent-files.js";
import type { Database } from "../store/db.js";
import { getTranscript, putTranscript, transcriptDigest } from "../store/transcripts.js";

// A session's CLI transcript follows it between instances: stored after each run, written back
// before a resume on an instance whose copy is missing or older. The CLIs only ever append to a
// transcript, so a copy on disk that extends the stored one is newer (its run's store failed) and
// is kept; any other difference means another instance ran the session since, and the stored
// copy wins. The file is the agent's, in a directory it can write to: it is read and written
// through the location's `files`, as the agent (src/process/agent-files.ts says why).

/**
 * The longest transcript read: the agent can make its own as long as it likes (or a FIFO it
 * feeds without end), and the server holds it in memory to store it.
 */
export const TRANSCRIPT_MAX_BYTES = 64 * 1024 * 1024;

const gzipped = promisify(gzip);
const gunzipped = promisify(gunzip);

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

/** Before a resume: the session's stored transcript on this instance's disk, unless it is there. */
export async function restoreTranscript(
  db: Database,
  sessionId: string,
  location: TranscriptLocation,
  logger: Logger,
): Promise<void> {
  const digest = await transcriptDigest(db, sessionId);
  if (!digest) return;
  const file = path.join(location.root, digest.path);
  // What stands in the transcript's place and cannot be read as one (a link, a FIFO, a file over
  // the bound) is no copy of it: the stored copy replaces it.
  const local = await location.files.read(file, TRANSCRIPT_MAX_BYTES).catch((err: unknown) => {
    if (!(err instanceof AgentFileError)) throw err;
    logger.warn("replacing what is in the place of the session's transcript", {
      session_id: sessionId,
      error: errorText(err),
    });
    return undefined;
  });
  if (local && sha256(local) === digest.sha256) return;
  const row = await getTranscript(db, sessionId);
  if (!row) return;
  const stored = await gunzipped(row.gzipped);
  if (local && local.length > stored.length && local.subarray(0, stored.length).equals(stored)) {
    return;
  }
  await location.files.write(file, stored);
}

/** After a run: the session's transcript stored, when it changed. */
export async function saveTranscript(
  db: Database,
  sessionId: string,
  agentSessionId: string,
  location: TranscriptLocation,
): Promise<void> {
  const relative = await location.find(agentSessionId);
  if (!relative) return;
  const bytes = await location.files.read(path.join(location.root, relative), TRANSCRIPT_MAX_BYTES);
  if (!bytes) return;
  const digest = sha256(bytes);
  const stored = await transcriptDigest(db, sessionId);
  if (stored?.sha256 === digest && stored.path === relative) return;
  await putTranscript(db, {
    sessionId,
    path: relative,
    sha256: digest,
    gzipped: await gzipped(bytes),
  });
}
