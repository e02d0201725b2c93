import { Hono } from "hono";
import { describe, expect, expectTypeOf, it } from "vitest";
import { DomainError, type ErrorCode } from "../../src/errors.js";
import type { AppEnv } from "../../src/http/context.js";
import { ERROR_CODES, ERROR_MAP } from "../../src/http/error-map.js";
import { onError, Problem } from "../../src/http/errors.js";

describe("the error map", () => {
  // ERROR_MAP is a Record<ErrorCode, …>: a code of the union without an entry, or an entry for no
  // code, does not compile. These say the same where a test run shows it.
  it("has one entry for every code the service emits, and none other", () => {
    expectTypeOf<keyof typeof ERROR_MAP>().toEqualTypeOf<ErrorCode>();
    expectTypeOf<(typeof ERROR_CODES)[number]>().toEqualTypeOf<ErrorCode>();
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
    expect(Problem.shape.code.options).toEqual(ERROR_CODES);
  });

  it("gives every code an error status and a title of its own", () => {
    const titles = new Set<string>();
    for (const code of ERROR_CODES) {
      const { status, title } = ERROR_MAP[code];
      expect(status, code).toBeGreaterThanOrEqual(400);
      expect(status, code).toBeLessThan(600);
      expect(title, code).not.toBe("");
      titles.add(title);
    }
    expect(titles.size).toBe(ERROR_CODES.length);
  });

  it("answers a thrown domain error of each code with that code's status and title", async () => {
    const app = new Hono<AppEnv>();
    app.onError(onError);
    app.get("/:code", (c) => {
      throw new DomainError(c.req.param("code") as ErrorCode, "what happened");
    });
    for (const code of ERROR_CODES) {
      const res = await app.request(`/${code}`);
      expect(res.status, code).toBe(ERROR_MAP[code].status);
      expect(res.headers.get("content-type")).toBe("application/problem+json");
      expect(await res.json()).toEqual({
        type: `urn:agent-bridge:problem:${code}`,
        title: ERROR_MAP[code].title,
        status: ERROR_MAP[code].status,
        detail: "what happened",
        code,
        request_id: "",
      });
    }
  });

  it("sends a refusal's wait as Retry-After and the run in the way as fields", async () => {
    const app = new Hono<AppEnv>();
    app.onError(onError);
    app.get("/full", () => {
      throw new DomainError("queue_full", "all taken", {
        detail: "all taken; retry later",
        retryAfterSeconds: 7,
      });
    });
    app.get("/busy", () => {
      throw new DomainError("session_busy", "busy", { activeRunId: "r1" });
    });
    const full = await app.request("/full");
    expect(full.headers.get("retry-after")).toBe("7");
    expect(await full.json()).toMatchObject({ status: 429, detail: "all taken; retry later" });
    const busy = await app.request("/busy");
    expect(JSON.stringify(await busy.json())).toBe(
      JSON.stringify({
        type: "urn:agent-bridge:problem:session_busy",
        title: "Session has an active run",
        status: 409,
        detail: "busy",
        code: "session_busy",
        request_id: "",
        active_run_id: "r1",
        events_url: "/v1/runs/r1/events",
      }),
    );
  });
});
