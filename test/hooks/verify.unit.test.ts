import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { signStandard, verifyAgainstDecoy, verifyDelivery } from "../../src/hooks/verify.js";
import { newStandardSecret } from "./support.js";

// What the verification refuses, beyond the deliveries' tests; among them the cases where the
// maintained packages (standardwebhooks, @octokit/webhooks-methods) accept or throw, which is why
// they are not used (see src/hooks/verify.ts).

const headersOf =
  (values: Record<string, string>) =>
  (name: string): string | undefined =>
    values[name];

describe("a Standard Webhooks delivery", () => {
  const secret = newStandardSecret();
  const body = Buffer.from('{"a":1}');
  const seconds = 1_800_000_000;
  const now = seconds * 1000;
  const signed = (timestamp: string, signature = signStandard(secret, "msg_1", seconds, body)) =>
    headersOf({
      "webhook-id": "msg_1",
      "webhook-timestamp": timestamp,
      "webhook-signature": signature,
    });

  it("is accepted with its signature, also among several", () => {
    expect(verifyDelivery("standard", secret, body, signed(String(seconds)), now).ok).toBe(true);
    const several = `v1,${Buffer.alloc(32).toString("base64")} ${signStandard(secret, "msg_1", seconds, body)}`;
    expect(verifyDelivery("standard", secret, body, signed(String(seconds), several), now).ok).toBe(
      true,
    );
  });

  it("is refused with a timestamp that is not digits alone, though its number is right", () => {
    for (const timestamp of [`${seconds}abc`, `+${seconds}`, `${seconds}.9`, ` ${seconds}`]) {
      expect(verifyDelivery("standard", secret, body, signed(timestamp), now)).toEqual({
        ok: false,
        reason: "webhook-timestamp is more than 300 s from now",
      });
    }
  });

  it("is refused past 5 minutes by the clock's milliseconds, not its whole seconds", () => {
    const past = (seconds + 300) * 1000 + 500;
    const early = (seconds - 300) * 1000 - 500;
    expect(verifyDelivery("standard", secret, body, signed(String(seconds)), past).ok).toBe(false);
    expect(verifyDelivery("standard", secret, body, signed(String(seconds)), early).ok).toBe(false);
    expect(verifyDelivery("standard", secret, body, signed(String(seconds)), past - 500).ok).toBe(
      true,
    );
  });

  it("is refused with a signature cut short, of another version, or not base64", () => {
    const good = signStandard(secret, "msg_1", seconds, body);
    for (const signature of [good.slice(0, -4), good.replace("v1,", "v2,"), "v1,!!!!", "v1,"]) {
      expect(
        verifyDelivery("standard", secret, body, signed(String(seconds), signature), now),
      ).toEqual({ ok: false, reason: "webhook-signature does not match the body" });
    }
  });

  it("is refused without any of its three headers", () => {
    const all = {
      "webhook-id": "msg_1",
      "webhook-timestamp": String(seconds),
      "webhook-signature": signStandard(secret, "msg_1", seconds, body),
    };
    for (const name of Object.keys(all)) {
      const { [name as keyof typeof all]: _, ...rest } = all;
      expect(verifyDelivery("standard", secret, body, headersOf(rest), now).ok).toBe(false);
    }
  });
});

describe("a GitHub delivery", () => {
  const secret = "github-secret";
  const signature = (body: Buffer) =>
    `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
  const headers = (sig: string) => headersOf({ "x-hub-signature-256": sig });

  it("is verified on its bytes: bytes that read as the signed text are refused", () => {
    // A signed body holding U+FFFD, and the same with an invalid byte in its place: as text,
    // both read the same (a verifier taking a string accepts it), as bytes they differ.
    const signedBody = Buffer.from('{"a":"\uFFFD"}');
    const forged = Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff]), Buffer.from('"}')]);
    expect(forged.toString("utf8")).toBe(signedBody.toString("utf8"));
    expect(verifyDelivery("github", secret, signedBody, headers(signature(signedBody))).ok).toBe(
      true,
    );
    expect(verifyDelivery("github", secret, forged, headers(signature(signedBody)))).toEqual({
      ok: false,
      reason: "X-Hub-Signature-256 does not match the body",
    });
  });

  it("is answered, not thrown at, for an empty body", () => {
    const empty = Buffer.alloc(0);
    expect(verifyDelivery("github", secret, empty, headers(signature(empty))).ok).toBe(true);
    expect(verifyDelivery("github", secret, empty, headers(signature(Buffer.from("x")))).ok).toBe(
      false,
    );
  });

  it("is refused with a signature cut short or not hex, and without one", () => {
    const body = Buffer.from("{}");
    const good = signature(body);
    for (const sig of [good.slice(0, -2), good.replace(/.$/, "g"), good.replace("sha256=", "")]) {
      expect(verifyDelivery("github", secret, body, headers(sig)).ok).toBe(false);
    }
    expect(verifyDelivery("github", secret, body, headersOf({})).ok).toBe(false);
  });
});

describe("a delivery to a hook that does not exist", () => {
  it("is put through the same work, whatever its headers", () => {
    expect(() => verifyAgainstDecoy(Buffer.from("{}"), headersOf({}))).not.toThrow();
  });
});
