import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { streamedReply } from "../support/fake-scenarios.js";
import { runCommand } from "../support/process.js";
import { codeBlocks, docSection } from "../support/readme.js";
import { type UserServer, userServer } from "../support/user-server.js";

// The README's image example, run as a user runs it, with a screenshot's size: an image over
// about 96 KB put in curl's arguments failed with `Argument list too long` before any request.

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe("the README's image example", () => {
  let server: UserServer;
  let cwd: string;

  beforeAll(async () => {
    server = await userServer(streamedReply(["A login form."]), {}, "npm-start");
    cwd = await mkdtemp(join(tmpdir(), "agent-bridge-image-"));
  });
  afterAll(async () => {
    await server?.close();
    if (cwd) await rm(cwd, { recursive: true, force: true });
  });

  it("sends a 272 KB screenshot and gets the answer, the image reaching the CLI whole", async () => {
    const section = await docSection("docs/api.md", "Using the API");
    const block = codeBlocks(section, "sh").find((b) => b.includes("shot.png"));
    if (!block) throw new Error("docs/api.md has no image example under Using the API");
    const image = Buffer.concat([PNG_SIGNATURE, randomBytes(272 * 1024 - PNG_SIGNATURE.length)]);
    await writeFile(join(cwd, "shot.png"), image);
    const session = await (
      await fetch(`${server.url}/v1/sessions`, {
        method: "POST",
        headers: { Authorization: `Bearer ${server.key}` },
      })
    ).json();
    const vars = [`B=${server.url}`, `H="Authorization: Bearer ${server.key}"`, `S=${session.id}`];
    const res = await runCommand("bash", ["-c", [...vars, block].join("\n")], {
      // HOME: bash reads no .bashrc of this machine's.
      env: { PATH: process.env.PATH, HOME: cwd },
      cwd,
    });
    expect(res, block).toMatchObject({ code: 0, stderr: "" });
    expect(JSON.parse(res.stdout)).toMatchObject({
      run: { status: "succeeded" },
      text: "A login form.",
    });
    const [start] = await server.fake.startsFor(session.id);
    const sent = start?.stdin.map((line) => JSON.parse(line)).find((m) => m.type === "user");
    expect(sent?.message.content[0]).toEqual({
      type: "image",
      source: { type: "base64", media_type: "image/png", data: image.toString("base64") },
    });
  });
});
