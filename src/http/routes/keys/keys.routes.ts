import { createRoute, z } from "@hono/zod-openapi";
import { requireAdmin } from "../../auth.js";
import { problemResponses } from "../../errors.js";
import {
  ApiKey,
  ApiKeyList,
  CreateKeyBody,
  KeyId,
  NewApiKey,
  UpdateKeyBody,
} from "./keys.schemas.js";

const tags = ["Keys"];

export const createKey = createRoute({
  method: "post",
  path: "/v1/keys",
  operationId: "createKey",
  tags,
  summary: "Create an API key (admin)",
  description:
    "409 `sandbox_required` when the server runs its agents without a sandbox (`AGENT_BRIDGE_SANDBOX=auto` found none) and a key can run agents already: a second tenant's agent could reach the first's work. Install bubblewrap and socat and restart, or set `AGENT_BRIDGE_SANDBOX=off`.",
  middleware: [requireAdmin] as const,
  request: { body: { content: { "application/json": { schema: CreateKeyBody } }, required: true } },
  responses: {
    201: {
      description: "The new key, shown this once",
      content: { "application/json": { schema: NewApiKey } },
    },
    ...problemResponses(400, 401, 403, 409, 413, 415, 429),
  },
});

export const listKeys = createRoute({
  method: "get",
  path: "/v1/keys",
  operationId: "listKeys",
  tags,
  summary: "List API keys, revoked ones included (admin)",
  middleware: [requireAdmin] as const,
  responses: {
    200: {
      description: "Every key, without its secret",
      content: { "application/json": { schema: ApiKeyList } },
    },
    ...problemResponses(401, 403, 429),
  },
});

export const updateKey = createRoute({
  method: "patch",
  path: "/v1/keys/{id}",
  operationId: "updateKey",
  tags,
  summary: "Change an API key's policy (admin)",
  description:
    "Sets what the key's sessions and hooks may ask for and spend; fields left out stay as they are, null restores a field's default. It holds from the key's next request and run on.",
  middleware: [requireAdmin] as const,
  request: {
    params: z.object({ id: KeyId }),
    body: { content: { "application/json": { schema: UpdateKeyBody } }, required: true },
  },
  responses: {
    200: { description: "The key as changed", content: { "application/json": { schema: ApiKey } } },
    ...problemResponses(400, 401, 403, 404, 413, 415, 429),
  },
});

export const revokeKey = createRoute({
  method: "delete",
  path: "/v1/keys/{id}",
  operationId: "revokeKey",
  tags,
  summary: "Revoke an API key (admin)",
  description: "The key stops working at once; it stays listed with its `revoked_at`.",
  middleware: [requireAdmin] as const,
  request: { params: z.object({ id: KeyId }) },
  responses: {
    200: { description: "The revoked key", content: { "application/json": { schema: ApiKey } } },
    ...problemResponses(400, 401, 403, 404, 429),
  },
});
