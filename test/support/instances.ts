import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect } from "vitest";
import { Doorbell } from "../../src/cluster/doorbell.js";
import { groupAlive } from "../../src/process/groups.js";
import type { DatabaseHandle } from "../../src/store/db.js";
import type { Cleanups } from "./cleanups.js";
import { type FakeCli, fakeCli } from "./fake-cli.js";
import { createServerDatabase } from "./postgres-databases.js";
import { waitUntil } from "./process.js";
import { type ServerProcess, startServer } from "./server.js";
import { SseReader } from "./sse.js";
import { result, systemInit, textDelta } from "./stream-json-lines.js";

// Several server processes on one Postgres (test/runs/instances.test.ts, test/cluster/): each
// helper registers what it makes with `cleanups`, undone in reverse order after the file.

/** A new database on the test Postgres server, migrated; its URL. */
export async function clusterDatabase(cleanups: Cleanups): Promise<string> {
  const { url, drop } = await createServerDatabase({ migrated: true });
  cleanups.push(drop);
  return url;
}

/** A CLI that says something, then holds until the test writes its `go` file, then answers. */
export async function heldCli(
  cleanups: Cleanups,
): Promise<{ fake: FakeCli; go: string; release(): Promise<void> }> {
  const fake = await fakeCli({ steps: [] });
  const go = join(fake.dir, "go");
  await fake.setScenario({
    steps: [
      { emit: systemInit() },
      { emit: textDelta("msg_1", 0, "working") },
      { mark: "holding" },
      { waitFile: go },
      { emit: result({ result: "done" }) },
    ],
  });
  cleanups.push(fake.cleanup);
  return { fake, go, release: () => writeFile(go, "") };
}

/** A server process; SIGKILLed after the file if the test left it running. */
export async function instance(
  cleanups: Cleanups,
  env: Record<string, string>,
): Promise<ServerProcess> {
  const server = await startServer(env);
  cleanups.push(async () => void (await server.stop("SIGKILL")));
  return server;
}

export async function post(url: string, path: string, body?: unknown) {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Prefer: "respond-async" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** A session on `url` with a run of the held CLI going; resolves once the CLI holds. */
export async function heldRun(url: string, fake: FakeCli) {
  const session = (await (await post(url, "/v1/sessions", {})).json()) as { id: string };
  const res = await post(url, `/v1/sessions/${session.id}/messages`, { text: "work" });
  expect(res.status).toBe(202);
  const run = (await res.json()) as { id: string };
  await fake.waitForMark("holding");
  const [pid] = (await fake.invocations()).map((i) => i.pid);
  return { session, run, pid: pid as number };
}

/** The run's event stream (`?events=full`) on the instance at `url`. */
export async function follow(url: string, runId: string): Promise<SseReader> {
  const res = await fetch(`${url}/v1/runs/${runId}/events?events=full`);
  expect(res.status).toBe(200);
  return SseReader.of(res);
}

export const completions = async (url: string, runId: string) =>
  (await (await follow(url, runId)).events()).filter((f) => f.event === "completion");

/**
 * Resolves once the process group is gone. A run's completion goes out before its CLI's group
 * is reaped (SIGTERM, then SIGKILL after the grace), so a test that saw the completion waits.
 */
export async function groupGone(pid: number): Promise<void> {
  await waitUntil(async () => !(await groupAlive(pid)), `process group ${pid} gone`, 20_000);
}

/** A doorbell listening on the database, as an instance on Postgres has, started. */
export async function listeningDoorbell(database: DatabaseHandle): Promise<Doorbell> {
  const doorbell = new Doorbell({
    mode: "notify",
    pollMs: 0,
    ...(database.listen ? { listen: database.listen } : {}),
    self: () => "",
    host: "test-host",
  });
  await doorbell.start();
  return doorbell;
}
