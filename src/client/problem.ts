import type { components } from "./schema.js";

export type Problem = components["schemas"]["Problem"];

/**
 * An error answer from the server, carrying its problem+json (RFC 9457). `code` is the stable
 * code to switch on (`session_not_found`, `session_busy`, ...); `detail` is for people.
 */
export class ApiProblem extends Error {
  override readonly name = "ApiProblem";
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  /** The body as the server sent it; absent when it was not problem+json (e.g. from a proxy). */
  readonly problem: Problem | undefined;

  constructor(status: number, problem: Problem | undefined, fallbackDetail = "") {
    const detail = problem?.detail ?? (fallbackDetail || `HTTP ${status}`);
    super(`${detail} (${problem?.code ?? `http_${status}`})`);
    this.status = status;
    this.code = problem?.code ?? `http_${status}`;
    this.detail = detail;
    this.problem = problem;
  }

  /** From an error response whose body openapi-fetch has already read (parsed JSON or text). */
  static from(response: Response, body: unknown): ApiProblem {
    if (isProblem(body)) return new ApiProblem(response.status, body);
    const text = typeof body === "string" ? body.trim().slice(0, 200) : "";
    return new ApiProblem(response.status, undefined, text || response.statusText);
  }
}

function isProblem(body: unknown): body is Problem {
  return (
    typeof body === "object" &&
    body !== null &&
    typeof (body as { code?: unknown }).code === "string" &&
    typeof (body as { detail?: unknown }).detail === "string" &&
    typeof (body as { status?: unknown }).status === "number"
  );
}
