import { API_VERSION } from "../version.js";
import { PROBLEM_CONTENT_TYPE } from "./errors.js";
import { createRouter } from "./router.js";
import { mountRoutes } from "./routes/index.js";

type OpenApiDocument = ReturnType<ReturnType<typeof createRouter>["getOpenAPI31Document"]>;
let memo: OpenApiDocument | undefined;

/**
 * The OpenAPI 3.1 document of every route. A pure function of the code, built once: the same
 * object is served at /openapi.json and written to openapi.yaml.
 */
export function openApiDocument(): OpenApiDocument {
  if (memo) return memo;
  const router = createRouter();
  router.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "An API key, `ab_…`, made with `agent-bridge keys create` or `POST /v1/keys`.",
  });
  const doc = mountRoutes(router).getOpenAPI31Document({
    openapi: "3.1.0",
    security: [{ bearerAuth: [] }],
    // Relative: the server that serves this document (GET /openapi.json); a client generated
    // from openapi.yaml is given the server's address instead.
    servers: [{ url: "/", description: "The server that serves this document" }],
    info: {
      title: "agent-bridge",
      version: API_VERSION,
      description: [
        "The Claude Code CLI behind a durable HTTP API. Create a session, post a message, and read the agent's work back as Server-Sent Events.",
        "",
        `Errors are \`${PROBLEM_CONTENT_TYPE}\` (RFC 9457) with a stable \`code\` and the \`request_id\` (also in the \`X-Request-Id\` header).`,
      ].join("\n"),
    },
    tags: [
      { name: "Sessions", description: "Conversations with the agent and their usage totals" },
      { name: "Runs", description: "Messages, the runs they start, and their event streams" },
      { name: "Usage", description: "Token and cost totals" },
      { name: "Keys", description: "API keys (admin)" },
      {
        name: "Hooks",
        description: "Signed webhooks from CI, schedules, and callbacks with the outcome",
      },
      { name: "Health", description: "Liveness, readiness and metrics" },
    ],
  });
  // As package.json says (UNLICENSED): no licence is granted. Set here because the generator's
  // input type is OpenAPI 3.0's, whose licence has no SPDX `identifier`.
  doc.info.license = {
    name: "Proprietary: all rights reserved",
    identifier: "LicenseRef-Proprietary",
  };
  memo = doc;
  return memo;
}
