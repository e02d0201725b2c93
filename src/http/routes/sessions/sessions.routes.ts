import { createRoute, z } from "@hono/zod-openapi";
import { PageQuery } from "../../cursor.js";
import { problemResponses } from "../../errors.js";
import {
  CreateSessionBody,
  DeleteSessionQuery,
  Session,
  SessionId,
  SessionPage,
} from "./sessions.schemas.js";

const tags = ["Sessions"];
const params = z.object({ id: SessionId });

export const createSession = createRoute({
  method: "post",
  path: "/v1/sessions",
  operationId: "createSession",
  tags,
  summary: "Create a session",
  description:
    "A session is one conversation with the agent. Options left out take the server's defaults, which are then fixed for the session. An empty body creates a session with all defaults.",
  request: {
    body: { content: { "application/json": { schema: CreateSessionBody } } },
  },
  responses: {
    201: {
      description: "The new session; `Location` names it.",
      headers: z.object({ Location: z.string() }),
      content: { "application/json": { schema: Session } },
    },
    ...problemResponses(400, 401, 403, 413, 415, 429),
  },
});

export const listSessions = createRoute({
  method: "get",
  path: "/v1/sessions",
  operationId: "listSessions",
  tags,
  summary: "List sessions, newest first",
  request: { query: PageQuery },
  responses: {
    200: {
      description: "One page of sessions",
      content: { "application/json": { schema: SessionPage } },
    },
    ...problemResponses(400, 401, 429),
  },
});

export const getSession = createRoute({
  method: "get",
  path: "/v1/sessions/{id}",
  operationId: "getSession",
  tags,
  summary: "Get a session with its usage totals",
  request: { params },
  responses: {
    200: { description: "The session", content: { "application/json": { schema: Session } } },
    ...problemResponses(400, 401, 404, 429),
  },
});

export const deleteSession = createRoute({
  method: "delete",
  path: "/v1/sessions/{id}",
  operationId: "deleteSession",
  tags,
  summary: "Delete a session with its runs and their events",
  description:
    "A run still active on the session is cancelled first. A session's git worktree and its branch `worktree-<id>` are removed with it; when the worktree has uncommitted changes the answer is 409 `worktree_dirty` and nothing is deleted, unless `force=true`.",
  request: { params, query: DeleteSessionQuery },
  responses: {
    204: { description: "Deleted" },
    ...problemResponses(400, 401, 404, 409, 429),
  },
});
