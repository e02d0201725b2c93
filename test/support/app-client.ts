import { type AgentBridgeClient, createClient, type Problem } from "../../src/client/index.js";
import type { TestApp } from "./app.js";

/**
 * The project's typed client (openapi-fetch over the `paths` of openapi.yaml, src/client) calling
 * the app in process, no socket, with `key` as its API key. Its `GET`, `POST`, `PUT` and `DELETE`
 * take the contract's paths and bodies and answer `{ data, error, response }`: the answer and the
 * problem+json as the contract types them, and the raw Response for status and headers (its body
 * already read, except with `parseAs: "stream"`). Its helpers (`createSession`, `sendAsync`, …)
 * throw ApiProblem on an error answer, for a test's set-up.
 *
 * A test that must send what the contract's types forbid (a wrong type, an unknown field, a
 * method or route the API lacks, a body that is not JSON) keeps `app.request`, and may read its
 * error answer with `untyped`.
 */
export function appClient(app: TestApp["app"], key?: string): AgentBridgeClient {
  return createClient({
    // What `app.request` puts before a bare path.
    baseUrl: "http://localhost",
    ...(key ? { key } : {}),
    fetch: async (request) => app.fetch(request),
  });
}

/** A raw request's error answer, read as the typed client reads one: `{ response, error }`. */
export async function untyped(answer: Response | Promise<Response>) {
  const response = await answer;
  return { response, error: (await response.json()) as Problem };
}
