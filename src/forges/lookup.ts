import { DomainError } from "../errors.js";
import type { ForgeAnswer } from "./api.js";

// A GET of the forge's API that a delivery's gate makes with the hook's token (who may trigger,
// whether a pull request comes from a fork), and what becomes of a failure.

/** A GET below the API's URL; null when the hook has no token to ask with. */
export type ForgeLookup = ((path: string) => Promise<ForgeAnswer>) | null;

/**
 * The forge could not answer what the gate had to know: the delivery is `failed`, so that the
 * sender's redelivery of the same id asks again.
 */
export class ForgeLookupError extends DomainError {
  constructor(what: string, answer: Extract<ForgeAnswer, { ok: false }>, now: number) {
    const retryAfterSeconds =
      answer.retryAt === null ? undefined : Math.max(1, Math.ceil((answer.retryAt - now) / 1000));
    super(
      "forge_unavailable",
      `the forge's API could not tell ${what} (${answer.error}); a redelivery of this delivery asks again`,
      retryAfterSeconds === undefined ? {} : { retryAfterSeconds },
    );
  }
}

/** `owner/name` as a path below `/repos/`, or null for anything else a payload may hold. */
export function repoPath(repository: string | null): string | null {
  const parts = repository?.split("/") ?? [];
  if (parts.length !== 2 || !parts.every((p) => /^[A-Za-z0-9._-]{1,100}$/.test(p))) return null;
  return parts.map(encodeURIComponent).join("/");
}
