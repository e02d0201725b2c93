import { createRoute, z } from "@hono/zod-openapi";
import { STREAM_TOKEN_TTL_SECONDS } from "../../../auth/stream-tokens.js";
import { Run } from "../../../wire/run.js";
import { PageQuery } from "../../cursor.js";
import { problemResponses } from "../../errors.js";
import { SessionId } from "../sessions/sessions.schemas.js";
import {
  EventStream,
  EventsHeaders,
  EventsQuery,
  FinishedRun,
  MessageHeaders,
  MessageQuery,
  PostMessageBody,
  RetryRunBody,
  RunId,
  RunPage,
  StreamToken,
} from "./runs.schemas.js";

const tags = ["Runs"];

/** How a request that starts a run (a message, a retry) is answered. */
const runAnswers = {
  200: {
    description:
      "The run's events as SSE (the default, or `Accept: text/event-stream`), ending with its `completion`, or with an `event: error` frame when the server cannot continue the stream; or with `Accept: application/json`, the finished run.",
    headers: z.object({ "X-Run-Id": z.string(), "Preference-Applied": z.string().optional() }),
    content: {
      "text/event-stream": { schema: EventStream },
      "application/json": { schema: FinishedRun },
    },
  },
  202: {
    description: "With `Prefer: respond-async`: the run, accepted; follow `Location`.",
    headers: z.object({ Location: z.string(), "Preference-Applied": z.string() }),
    content: { "application/json": { schema: Run } },
  },
  ...problemResponses(400, 401, 402, 403, 404, 409, 410, 413, 415, 422, 429, 503),
};

export const postMessage = createRoute({
  method: "post",
  path: "/v1/sessions/{id}/messages",
  operationId: "postMessage",
  tags,
  summary: "Send a message: starts a run of the agent",
  description: [
    "Starts one run of the CLI on the session. The run belongs to the server: a client that",
    "disconnects leaves it going and can follow it again at `/v1/runs/{run_id}/events`.",
    "One active run per session (a second message is a 409 naming it). With several instances",
    "on one database, a run this one has no free slot for is queued for any instance to claim,",
    "and a worktree session's runs run on the host that holds its worktree (409",
    "`worktree_host_gone` when no instance of that host is alive); beyond the run slots and",
    "queue, 429 with `Retry-After`. The answer follows `Prefer: respond-async`",
    "(202 at once), else `Accept`: `text/event-stream` or none streams the run's events (in",
    "the view `?events=` asks for, with its ids), `application/json` waits and returns the",
    "finished run. A message sent while the session has a live run is a 409 `session_busy`",
    "unless it asks to wait its turn (`when_busy: queue`, or `Prefer: when-busy=queue`): then",
    "it is stored (its run `queued`) and runs after the live run and the messages queued before",
    "it, in the order they were stored, whichever instance each reached; it is answered in the",
    "mode asked (202 at once with `respond-async`; a stream that starts with `run_started` once",
    "it runs; or the finished run).",
  ].join(" "),
  request: {
    params: z.object({ id: SessionId }),
    query: MessageQuery,
    headers: MessageHeaders,
    body: { content: { "application/json": { schema: PostMessageBody } }, required: true },
  },
  responses: runAnswers,
});

export const retryRun = createRoute({
  method: "post",
  path: "/v1/runs/{id}/retry",
  operationId: "retryRun",
  tags,
  summary: "Retry a run: a new run of its session without the run's turn",
  description: [
    "Starts a new run of the session that resumes the agent's conversation at the last message",
    "a run before this one confirmed (its `resume_at`), so that the turn of this run,",
    "e.g. one that failed on an API error, is left out of it; with `text`, a new prompt, else",
    "this run's. Only for the session's latest run, once it has finished (409 otherwise), and",
    "only for an agent that can resume at an earlier message (Claude Code; a codex session gets",
    "400 `retry_unsupported`). Otherwise as a message: the same admission (a busy session is a",
    "409), `Idempotency-Key`, and answers (SSE, `Accept: application/json`, `Prefer:",
    "respond-async`).",
  ].join(" "),
  request: {
    params: z.object({ id: RunId }),
    query: MessageQuery,
    headers: MessageHeaders,
    body: { content: { "application/json": { schema: RetryRunBody } } },
  },
  responses: runAnswers,
});

export const getRun = createRoute({
  method: "get",
  path: "/v1/runs/{id}",
  operationId: "getRun",
  tags,
  summary: "Get a run: status, timings, usage and completion",
  request: { params: z.object({ id: RunId }) },
  responses: {
    200: { description: "The run", content: { "application/json": { schema: Run } } },
    ...problemResponses(400, 401, 404, 429),
  },
});

export const getRunEvents = createRoute({
  method: "get",
  path: "/v1/runs/{id}/events",
  operationId: "getRunEvents",
  tags,
  summary: "Replay a run's events, then follow it live",
  description:
    "Replays the run's log after `Last-Event-ID` (or `?after=N`), then streams new events until the `completion`. A finished run replays and closes; with `?follow=false` any run does, after the events stored so far.",
  request: { params: z.object({ id: RunId }), query: EventsQuery, headers: EventsHeaders },
  responses: {
    200: {
      description:
        "The run's events as SSE, ending with its `completion` (with `?follow=false`, at the end of what is stored), or with an `event: error` frame (a StreamError) when the server cannot continue the stream: reconnect with `Last-Event-ID`.",
      content: { "text/event-stream": { schema: EventStream } },
    },
    ...problemResponses(400, 401, 404, 429),
  },
});

export const cancelRun = createRoute({
  method: "post",
  path: "/v1/runs/{id}/cancel",
  operationId: "cancelRun",
  tags,
  summary: "Cancel a run",
  description: "Stops the run (its process group is gone when this answers); it ends `cancelled`.",
  request: { params: z.object({ id: RunId }) },
  responses: {
    200: { description: "The cancelled run", content: { "application/json": { schema: Run } } },
    ...problemResponses(400, 401, 404, 409, 429),
  },
});

export const interruptRun = createRoute({
  method: "post",
  path: "/v1/runs/{id}/interrupt",
  operationId: "interruptRun",
  tags,
  summary: "Interrupt a run: end its turn cleanly",
  description:
    "Asks the agent to end its turn (Claude Code's `interrupt` control request): the run ends `cancelled` with the usage and cost the CLI reported, and the conversation stays intact for the session's next message. An agent that has not ended within a short grace (or cannot be interrupted, as codex) is stopped as by a cancel. A run not started yet is cancelled.",
  request: { params: z.object({ id: RunId }) },
  responses: {
    200: { description: "The interrupted run", content: { "application/json": { schema: Run } } },
    ...problemResponses(400, 401, 404, 409, 429),
  },
});

export const listRuns = createRoute({
  method: "get",
  path: "/v1/runs",
  operationId: "listRuns",
  tags,
  summary: "List runs, newest first",
  description: "Every run of the sessions the key may see (an admin key: all).",
  request: { query: PageQuery },
  responses: {
    200: { description: "One page of runs", content: { "application/json": { schema: RunPage } } },
    ...problemResponses(400, 401, 429),
  },
});

export const listSessionRuns = createRoute({
  method: "get",
  path: "/v1/sessions/{id}/runs",
  operationId: "listSessionRuns",
  tags,
  summary: "List a session's runs, newest first",
  description:
    "Finds a run whose id was lost: the session's `active_run_id` names the one going on, this lists them all.",
  request: { params: z.object({ id: SessionId }), query: PageQuery },
  responses: {
    200: { description: "One page of runs", content: { "application/json": { schema: RunPage } } },
    ...problemResponses(400, 401, 404, 429),
  },
});

export const createStreamToken = createRoute({
  method: "post",
  path: "/v1/runs/{id}/stream-token",
  operationId: "createStreamToken",
  tags,
  summary: "A short-lived token to follow a run's events without an Authorization header",
  description: `For a browser's \`EventSource\`, which cannot send \`Authorization\`: the token is good for \`GET /v1/runs/{id}/events?token=…\` of this run alone, for ${STREAM_TOKEN_TTL_SECONDS / 60} minutes, and only while the key that made it is not revoked. Any other route, run or method refuses it (401). Reconnecting after it has expired needs a new one.`,
  request: { params: z.object({ id: RunId }) },
  responses: {
    201: {
      description: "The token",
      content: { "application/json": { schema: StreamToken } },
    },
    ...problemResponses(400, 401, 404, 429),
  },
});
