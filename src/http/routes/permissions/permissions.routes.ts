import { createRoute, z } from "@hono/zod-openapi";
import { problemResponses } from "../../errors.js";
import { RunId } from "../runs/runs.schemas.js";
import {
  AnswerPermissionBody,
  PermissionRequestInfo,
  PermissionRequestList,
  RequestId,
} from "./permissions.schemas.js";

const tags = ["Runs"];

export const listPermissions = createRoute({
  method: "get",
  path: "/v1/runs/{id}/permissions",
  operationId: "listPermissions",
  tags,
  summary: "List a run's permission requests with their state",
  request: { params: z.object({ id: RunId }) },
  responses: {
    200: {
      description: "The run's permission requests (`approvals: api`), oldest first",
      content: { "application/json": { schema: PermissionRequestList } },
    },
    ...problemResponses(400, 401, 404, 429),
  },
});

export const answerPermission = createRoute({
  method: "post",
  path: "/v1/runs/{id}/permissions/{request_id}",
  operationId: "answerPermission",
  tags,
  summary: "Answer a run's permission request",
  description:
    "Allows or denies the tool call of a `permission_request`, or answers an `AskUserQuestion` with `answers`. The run's stream then shows its `permission_resolved`. 409 when the request is no longer pending (answered, expired, withdrawn).",
  request: {
    params: z.object({ id: RunId, request_id: RequestId }),
    body: { content: { "application/json": { schema: AnswerPermissionBody } }, required: true },
  },
  responses: {
    200: {
      description: "The request, resolved",
      content: { "application/json": { schema: PermissionRequestInfo } },
    },
    ...problemResponses(400, 401, 404, 409, 415, 429),
  },
});
