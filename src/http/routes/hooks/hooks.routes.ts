import { createRoute, z } from "@hono/zod-openapi";
import { requireAdmin } from "../../auth.js";
import { PageQuery } from "../../cursor.js";
import { problemResponses } from "../../errors.js";
import {
  CreateHookBody,
  DeliveryHeaders,
  DeliveryReceipt,
  Hook,
  HookDeliveryPage,
  HookList,
  HookName,
  UpdateHookBody,
} from "./hooks.schemas.js";

const tags = ["Hooks"];
const params = z.object({ name: HookName });

export const createHook = createRoute({
  method: "post",
  path: "/v1/hooks",
  operationId: "createHook",
  tags,
  summary: "Create a hook (admin)",
  description:
    "A hook turns signed webhook deliveries (and, with a `schedule`, the ticks of a cron pattern) into runs of the agent. The sessions it starts belong to the key that created it. Secrets are write-only.",
  middleware: [requireAdmin] as const,
  request: {
    body: { content: { "application/json": { schema: CreateHookBody } }, required: true },
  },
  responses: {
    201: {
      description: "The new hook, without its secrets",
      headers: z.object({ Location: z.string() }),
      content: { "application/json": { schema: Hook } },
    },
    ...problemResponses(400, 401, 403, 409, 413, 415, 429),
  },
});

export const listHooks = createRoute({
  method: "get",
  path: "/v1/hooks",
  operationId: "listHooks",
  tags,
  summary: "List hooks (admin)",
  middleware: [requireAdmin] as const,
  responses: {
    200: {
      description: "Every hook, by name",
      content: { "application/json": { schema: HookList } },
    },
    ...problemResponses(401, 403, 429),
  },
});

export const getHook = createRoute({
  method: "get",
  path: "/v1/hooks/{name}",
  operationId: "getHook",
  tags,
  summary: "Get a hook (admin)",
  middleware: [requireAdmin] as const,
  request: { params },
  responses: {
    200: { description: "The hook", content: { "application/json": { schema: Hook } } },
    ...problemResponses(400, 401, 403, 404, 429),
  },
});

export const updateHook = createRoute({
  method: "put",
  path: "/v1/hooks/{name}",
  operationId: "updateHook",
  tags,
  summary: "Replace a hook's definition (admin)",
  description:
    "Every field takes the value given, or its default when left out, except the secrets, which are kept when left out. Sessions already made from session keys go on.",
  middleware: [requireAdmin] as const,
  request: {
    params,
    body: { content: { "application/json": { schema: UpdateHookBody } }, required: true },
  },
  responses: {
    200: { description: "The hook", content: { "application/json": { schema: Hook } } },
    ...problemResponses(400, 401, 403, 404, 413, 415, 429),
  },
});

export const deleteHook = createRoute({
  method: "delete",
  path: "/v1/hooks/{name}",
  operationId: "deleteHook",
  tags,
  summary: "Delete a hook and its delivery records (admin)",
  description: "Its sessions and runs stay, and callbacks already owed are still sent.",
  middleware: [requireAdmin] as const,
  request: { params },
  responses: {
    204: { description: "Deleted" },
    ...problemResponses(400, 401, 403, 404, 429),
  },
});

export const listHookDeliveries = createRoute({
  method: "get",
  path: "/v1/hooks/{name}/deliveries",
  operationId: "listHookDeliveries",
  tags,
  summary: "List a hook's deliveries and ticks, newest first (admin)",
  middleware: [requireAdmin] as const,
  request: { params, query: PageQuery },
  responses: {
    200: {
      description: "One page of deliveries",
      content: { "application/json": { schema: HookDeliveryPage } },
    },
    ...problemResponses(400, 401, 403, 404, 429),
  },
});

export const deliverHook = createRoute({
  method: "post",
  path: "/v1/hooks/{name}/deliveries",
  operationId: "deliverHook",
  tags,
  summary: "Deliver a webhook: starts a run (no API key; signed)",
  description: [
    "For CI and other senders: no API key, but the delivery must verify against the hook's",
    "secret, computed over the body's exact bytes (see the hook's `verification`). A bad or",
    "missing signature is a 401 and starts nothing. The body is JSON (for `github`, also",
    "`application/x-www-form-urlencoded` with a `payload` field). The answer comes at once:",
    "202 with the run, which waits in line if its session is busy. The same delivery id again",
    "answers 200 with the first delivery's run and starts nothing; for a `github` hook, so does",
    "the same body under another delivery id within 24 hours (GitHub's signature does not cover",
    "the id). A delivery whose event the hook does not take is recorded and answered 200 with",
    "outcome `ignored`. A prompt that renders past `AGENT_BRIDGE_HOOK_PROMPT_MAX_BYTES` is a 422",
    "`prompt_too_large`; the body may be up to `AGENT_BRIDGE_DELIVERY_LIMIT_BYTES` (25 MiB).",
  ].join(" "),
  security: [],
  request: {
    params,
    headers: DeliveryHeaders,
    body: {
      required: true,
      content: {
        // A plain schema, not zod: the handler verifies the raw bytes before it parses them.
        "application/json": {
          schema: {
            type: "object",
            additionalProperties: true,
            description: "The sender's payload",
          },
        },
      },
    },
  },
  responses: {
    202: {
      description: "Verified; the run is queued",
      headers: z.object({ Location: z.string() }),
      content: { "application/json": { schema: DeliveryReceipt } },
    },
    200: {
      description: "A duplicate delivery (nothing started), or an event the hook ignores",
      content: { "application/json": { schema: DeliveryReceipt } },
    },
    ...problemResponses(400, 401, 402, 403, 404, 413, 422, 429, 503),
  },
});
