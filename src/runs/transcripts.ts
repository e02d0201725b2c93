import { createHash } from "node:crypto";
import { chmod, chown, mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { gunzip, gzip } from "node:zlib";
import type { TranscriptLocation } from "../agents/agent.js";
import type { AgentIdentity } from "../process/tenant-homes.js";
import type { Database } from "../store/db.js";
import { getTranscript, putTranscript, transcriptDigest } from "../store/transcripts.js";

// A session's CLI transcript follows it between instances: stored after each run, written back
// before a resume on an instance whose copy is missing or older. The CLIs only ever append to a
// transcript, so a copy on disk that extends the stored one is newer (its run's store failed) and
// is kept; any other difference means another instance ran the session since, and the stored
// copy wins.

const gzipped = promisify(gzip);
const gunzipped = promisify(gunzip);

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");

async function contents(file: string): Promise<Buffer | undefined> {
  return readFile(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
}

/** Before a resume: the session's stored transcript on this instance's disk, unless it is there. */
export async function restoreTranscript(
  db: Database,
  sessionId: string,
  location: TranscriptLocation,
  identity: AgentIdentity | undefined,
): Promise<void> {
  const digest = await transcriptDigest(db, sessionId);
  if (!digest) return;
  const file = path.join(location.root, digest.path);
  const local = await contents(file);
  if (local && sha256(local) === digest.sha256) return;
  const row = await getTranscript(db, sessionId);
  if (!row) return;
  const stored = await gunzipped(row.gzipped);
  if (local && local.length > stored.length && local.subarray(0, stored.length).equals(stored)) {
    return;
  }
  await writeAsAgent(location.root, digest.path, stored, identity);
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
  const bytes = await contents(path.join(location.root, relative));
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

/**
 * Writes the file under `root`, making the directories it needs; run as the agent user, they and
 * the file are that tenant's agent's (which appends to the transcript), as the CLI's own are.
 */
async function writeAsAgent(
  root: string,
  relative: string,
  bytes: Buffer,
  identity: AgentIdentity | undefined,
): Promise<void> {
  const file = path.join(root, relative);
  let dir = "";
  for (const part of [root, ...path.dirname(relative).split(path.sep)]) {
    dir = path.join(dir, part);
    const made = await mkdir(dir, { recursive: true, mode: 0o700 });
    if (made && identity) await chown(dir, identity.runAs.uid, identity.runAs.gid);
  }
  await writeFile(file, bytes, { mode: 0o600 });
  await chmod(file, 0o600);
  if (identity) await chown(file, identity.runAs.uid, identity.runAs.gid);
}
