import { afterAll, describe, expect, it } from "vitest";
import { type Cleanups, undo } from "../support/cleanups.js";
import { clusterDatabase, completions, heldCli, instance, post } from "../support/instances.js";

// An Idempotency-Key names one run of its session, whichever instance each try reaches: the same
// request sent at once to several instances on one Postgres answers that run every time, never a
// 409 `session_busy` for the run the key itself made.

const cleanups: Cleanups = [];
afterAll(async () => {
  await undo(cleanups);
});

describe.skipIf(!process.env.TEST_DATABASE_URL)("an Idempotency-Key across instances", () => {
  it("nine simultaneous tries over three instances all answer the one run", async () => {
    const url = await clusterDatabase(cleanups);
    const { fake, release } = await heldCli(cleanups);
    const env = { DATABASE_URL: url, ...fake.bridgeEnv };
    const urls = [
      (await instance(cleanups, env)).url,
      (await instance(cleanups, env)).url,
      (await instance(cleanups, env)).url,
    ];
    const [first] = urls as [string, string, string];
    const runIds: string[] = [];
    // Several sessions, so that the tries meet in every order the race allows.
    for (let round = 0; round < 6; round++) {
      const session = (await (await post(first, "/v1/sessions", {})).json()) as {
        id: string;
      };
      const tries = await Promise.all(
        Array.from({ length: 9 }, (_, i) =>
          fetch(`${urls[i % 3]}/v1/sessions/${session.id}/messages`, {
            method: "POST",
            headers: {
              "Content-Type": "application/json",
              Prefer: "respond-async",
              "Idempotency-Key": `once-${session.id}`,
            },
            body: JSON.stringify({ text: "the same message" }),
          }),
        ),
      );
      const answers = await Promise.all(
        tries.map(async (res) => ({ status: res.status, body: await res.json() })),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(9).fill(202));
      const ids = new Set(answers.map((a) => a.body.id));
      expect(ids.size).toBe(1);
      runIds.push(...ids);
    }
    await release();
    for (const id of runIds) {
      const ends = await completions(first, id);
      expect(ends.map((f) => f.data)).toEqual([expect.objectContaining({ status: "succeeded" })]);
    }
    // One CLI start per session: no try ran the message twice.
    expect((await fake.invocations()).length).toBe(runIds.length);
  });
});
