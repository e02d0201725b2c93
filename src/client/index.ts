import createFetchClient, { type Client } from "openapi-fetch";
import {
  type OpenEvents,
  parseEvents,
  type ReconnectOptions,
  readRunEvents,
  type StreamedEvent,
} from "./events.js";
import { type FeedEventType, type FeedItem, readFeed } from "./feed.js";
import { ApiProblem } from "./problem.js";
import type { components, paths } from "./schema.js";

// The typed client of agent-bridge (`agent-bridge/client`): openapi-fetch over the types that
// openapi-typescript generates from openapi.yaml, plus helpers that throw ApiProblem on error
// answers and an SSE reader that survives dropped connections.

export type {
  BridgeEvent,
  BridgeEventType,
  CompletionEvent,
  ReconnectOptions,
  StreamedEvent,
} from "./events.js";
export type { FeedEvent, FeedEventType, FeedItem } from "./feed.js";
export { ApiProblem, type Problem } from "./problem.js";
export type { components, paths };

type Schemas = components["schemas"];
export type Session = Schemas["Session"];
export type SessionPage = Schemas["SessionPage"];
export type CreateSession = Schemas["CreateSession"];
export type ForkSession = Schemas["ForkSession"];
export type UpdateSession = Schemas["UpdateSession"];
export type SessionDiff = Schemas["SessionDiff"];
export type RunStatus = Schemas["RunStatus"];
export type Run = Schemas["Run"];
export type FinishedRun = Schemas["FinishedRun"];
export type RunPage = Schemas["RunPage"];
/** What a hook's run posted where its delivery came from (`Run.replies`). */
export type ReplyState = Schemas["ReplyState"];
export type StreamToken = Schemas["StreamToken"];
export type AnswerPermission = Schemas["AnswerPermission"];
export type PermissionRequest = Schemas["PermissionRequest"];
/** An item of a session's conversation (`user_message`, `assistant_text`, `tool_call`…). */
export type ConversationItem = Schemas["ConversationItem"];
export type ConversationPage = Schemas["ConversationPage"];
export type RunInput = Schemas["RunInput"];
export type RunControl = Schemas["RunControl"];
export type UserInputEvent = Schemas["UserInputEvent"];
export type ControlEvent = Schemas["ControlEvent"];

/** JSON answers and problem+json errors; SSE bodies are read with `parseAs: "stream"`. */
type Media = "application/json" | "application/problem+json";

export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:8787`. */
  baseUrl: string;
  /** An API key, sent as `Authorization: Bearer <key>`. */
  key?: string;
  /** A fetch to use instead of the global one (tests, proxies, instrumentation). */
  fetch?: (request: Request) => Promise<Response>;
  /** How `stream` and `follow` reconnect after a dropped connection. */
  reconnect?: ReconnectOptions;
}

/** Which events a stream shows: `full` adds the internal ones (see FollowOptions). */
export type EventsView = "default" | "full";

export interface StreamOptions {
  /** Stops reading (the run goes on on the server; cancel it with `cancelRun`). */
  signal?: AbortSignal;
  /** Appended to the system prompt for this message only. */
  systemPrompt?: string;
  /** The JSON Schema of the answer: the completion's `structured_output` (see `MessageOptions`). */
  outputSchema?: Record<string, unknown>;
  /** `full` also yields the internal events, numbered in that view. */
  events?: EventsView;
}

export interface FollowOptions {
  /** Start after this event id (0, the default, replays the whole run). */
  after?: number;
  signal?: AbortSignal;
  /**
   * `full` adds reasoning, subagent_text_delta, tool_call, tool_result, tool_update,
   * session_status, available_commands, tool_rule, context_window and rate_limit events.
   */
  events?: EventsView;
}

export interface WatchOptions {
  /**
   * Start after this feed position: an event's `id` (opaque), `"0"` for everything the feed
   * holds; by default, from now on.
   */
  after?: string;
  /** Only the events of this session. */
  sessionId?: string;
  /** Only events of these types (a `feed_reset` always comes). */
  types?: Exclude<FeedEventType, "feed_reset">[];
  signal?: AbortSignal;
}

export interface MessageOptions {
  systemPrompt?: string;
  /** Who answers the run's permission requests, in place of the session's `approvals`. */
  approvals?: "deny" | "api";
  /** How the run's agent may use tools, in place of the session's `permission_mode`. */
  permissionMode?: Schemas["PermissionMode"];
  /**
   * The JSON Schema the agent's answer must match: the completion then carries it, checked, as
   * `structured_output` (typed `unknown`: check it against your own type); a run without a valid
   * answer fails with `error_code: "output_invalid"`.
   */
  outputSchema?: Record<string, unknown>;
  /** The same key within 24 h returns the first request's run instead of starting another. */
  idempotencyKey?: string;
  /**
   * When the session has a live run: `reject` (the server's default) fails with ApiProblem 409
   * `session_busy`; `queue` waits its turn, after the live run and the messages queued before it.
   */
  whenBusy?: "reject" | "queue";
  signal?: AbortSignal;
}

export interface RetryOptions {
  /** A new prompt; by default the retried run's own. */
  text?: string;
  /** A new output schema; by default the retried run's own. */
  outputSchema?: Record<string, unknown>;
  /** The same key within 24 h returns the first request's run instead of starting another. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export type AgentBridgeClient = Client<paths, Media> & {
  createSession(body?: CreateSession): Promise<Session>;
  listSessions(query?: { limit?: number; cursor?: string }): Promise<SessionPage>;
  getSession(id: string): Promise<Session>;
  deleteSession(id: string): Promise<void>;
  /**
   * A new session that goes on from the end of `at_run` (default: the newest finished run) while
   * this one goes on untouched (`POST /v1/sessions/{id}/fork`).
   */
  forkSession(id: string, body?: ForkSession): Promise<Session>;
  /** Changes the session's settings (a merge patch: `null` sets a field back); its next run takes them. */
  updateSession(id: string, patch: UpdateSession): Promise<Session>;
  /** What the agent changed in a worktree session's worktree: the files, and the unified diff. */
  sessionDiff(id: string): Promise<SessionDiff>;
  /** The same diff as git's unified diff text alone (`Accept: text/x-diff`). */
  sessionDiffText(id: string): Promise<string>;
  /** Sends a message and waits for the run to finish (`Accept: application/json`). */
  send(sessionId: string, text: string, options?: MessageOptions): Promise<FinishedRun>;
  /** Sends a message and returns the queued run at once (`Prefer: respond-async`). */
  sendAsync(sessionId: string, text: string, options?: MessageOptions): Promise<Run>;
  getRun(id: string): Promise<Run>;
  /** One page of the session's conversation, oldest first (`GET /v1/sessions/{id}/messages`). */
  listMessages(
    sessionId: string,
    query?: { limit?: number; cursor?: string },
  ): Promise<ConversationPage>;
  /**
   * Yields the session's whole conversation, item by item, fetching page after page (of `limit`
   * items) until the last; a live run's items are those stored so far.
   */
  messages(
    sessionId: string,
    options?: { limit?: number; signal?: AbortSignal },
  ): AsyncGenerator<ConversationItem>;
  /** Runs newest first: of one session with `sessionId`, else every run the key may see. */
  listRuns(query?: { limit?: number; cursor?: string; sessionId?: string }): Promise<RunPage>;
  cancelRun(id: string): Promise<Run>;
  /** Ends the run's turn cleanly: `cancelled`, with its usage and cost (`POST …/interrupt`). */
  interruptRun(id: string): Promise<Run>;
  /**
   * Writes the user's next message to the live run's agent, which answers it in the same run
   * (`POST …/input`); the `user_input` event its log records.
   */
  sendInput(runId: string, input: RunInput): Promise<UserInputEvent>;
  /** Switches the live run's model or permission mode (`POST …/control`); its `control` event. */
  controlRun(runId: string, change: RunControl): Promise<ControlEvent>;
  /**
   * Answers a `permission_request` of the run: `{decision: "allow" | "deny", …}`, or
   * `{answers: {…}}` for a question. Throws ApiProblem 409 when it is no longer pending.
   */
  answer(runId: string, requestId: string, answer: AnswerPermission): Promise<PermissionRequest>;
  /** The run's permission requests with their state. */
  listPermissions(runId: string): Promise<PermissionRequest[]>;
  /**
   * Retries the session's latest run from the last message a run before it confirmed, and
   * waits for the new run to finish (`POST /v1/runs/{id}/retry`, `Accept: application/json`).
   */
  retry(runId: string, options?: RetryOptions): Promise<FinishedRun>;
  /** Retries a run (see `retry`) and returns the queued run at once (`Prefer: respond-async`). */
  retryAsync(runId: string, options?: RetryOptions): Promise<Run>;
  /** A token for `EventSource` (no headers): the run's `events_url` for a few minutes. */
  createStreamToken(runId: string): Promise<StreamToken>;
  /**
   * Sends a message and yields the run's events as they happen, ending after the `completion`.
   * A dropped connection is resumed at `/v1/runs/{run_id}/events` with `Last-Event-ID`.
   */
  stream(sessionId: string, text: string, options?: StreamOptions): AsyncGenerator<StreamedEvent>;
  /** Yields the events of an existing run (replay, then live), ending after the `completion`. */
  follow(runId: string, options?: FollowOptions): AsyncGenerator<StreamedEvent>;
  /**
   * Yields the events the run's log holds now and ends, also while the run goes on (then without
   * a `completion`): `GET /v1/runs/{id}/events?follow=false`. No reconnect: a dropped connection
   * throws.
   */
  storedEvents(runId: string, options?: FollowOptions): AsyncGenerator<StreamedEvent>;
  /**
   * Yields the live feed of the key's sessions (all of them for an admin key) as it happens:
   * `GET /v1/events`. Never ends by itself (break, or abort `signal`); a dropped connection is
   * resumed with `Last-Event-ID`.
   */
  watch(options?: WatchOptions): AsyncGenerator<FeedItem>;
};

/** Resolves to the answer's data, or throws ApiProblem for an error answer. */
async function ok<T>(
  request: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
  const { data, error, response } = await request;
  if (!response.ok) throw ApiProblem.from(response, error);
  return data as T;
}

export function createClient(clientOptions: ClientOptions): AgentBridgeClient {
  const { baseUrl, key, fetch, reconnect } = clientOptions;
  const api = createFetchClient<paths, Media>({
    baseUrl,
    ...(fetch ? { fetch } : {}),
    headers: key ? { Authorization: `Bearer ${key}` } : {},
  });

  const runEvents = (runId: string, view: EventsView, follow = true): OpenEvents => {
    return async (after, signal) => {
      const { data, error, response } = await api.GET("/v1/runs/{id}/events", {
        params: {
          path: { id: runId },
          query: { events: view, ...(follow ? {} : { follow: "false" as const }) },
          header: after > 0 ? { "last-event-id": String(after) } : {},
        },
        headers: { Accept: "text/event-stream" },
        parseAs: "stream",
        signal,
      });
      if (!response.ok || !data) throw ApiProblem.from(response, error);
      return data;
    };
  };

  const message = (sessionId: string, text: string, options: MessageOptions) => ({
    params: {
      path: { id: sessionId },
      header: options.idempotencyKey ? { "idempotency-key": options.idempotencyKey } : {},
    },
    body: {
      text,
      ...(options.systemPrompt !== undefined ? { system_prompt: options.systemPrompt } : {}),
      ...(options.approvals !== undefined ? { approvals: options.approvals } : {}),
      ...(options.permissionMode !== undefined ? { permission_mode: options.permissionMode } : {}),
      ...(options.outputSchema !== undefined ? { output_schema: options.outputSchema } : {}),
      ...(options.whenBusy !== undefined ? { when_busy: options.whenBusy } : {}),
    },
    ...(options.signal ? { signal: options.signal } : {}),
  });

  const retryRequest = (runId: string, options: RetryOptions) => ({
    params: {
      path: { id: runId },
      header: options.idempotencyKey ? { "idempotency-key": options.idempotencyKey } : {},
    },
    body: {
      ...(options.text !== undefined ? { text: options.text } : {}),
      ...(options.outputSchema !== undefined ? { output_schema: options.outputSchema } : {}),
    },
    ...(options.signal ? { signal: options.signal } : {}),
  });

  // The message and retry endpoints answer 200 FinishedRun or 202 Run, as the request's headers
  // choose; the types cannot see the headers, hence the casts in `send`, `retry` and the like.
  return {
    ...api,
    createSession: (body = {}) => ok(api.POST("/v1/sessions", { body })),
    listSessions: (query = {}) => ok(api.GET("/v1/sessions", { params: { query } })),
    getSession: (id) => ok(api.GET("/v1/sessions/{id}", { params: { path: { id } } })),
    deleteSession: async (id) => {
      await ok(api.DELETE("/v1/sessions/{id}", { params: { path: { id } } }));
    },
    forkSession: (id, body = {}) =>
      ok(api.POST("/v1/sessions/{id}/fork", { params: { path: { id } }, body })),
    updateSession: (id, patch) =>
      ok(api.PATCH("/v1/sessions/{id}", { params: { path: { id } }, body: patch })),
    sessionDiff: (id) => ok(api.GET("/v1/sessions/{id}/diff", { params: { path: { id } } })),
    sessionDiffText: (id) =>
      ok(
        api.GET("/v1/sessions/{id}/diff", {
          params: { path: { id } },
          headers: { Accept: "text/x-diff" },
          parseAs: "text",
        }),
      ),
    send: (sessionId, text, options = {}) =>
      ok(
        api.POST("/v1/sessions/{id}/messages", {
          ...message(sessionId, text, options),
          headers: { Accept: "application/json" },
        }),
      ) as Promise<FinishedRun>,
    sendAsync: (sessionId, text, options = {}) =>
      ok(
        api.POST("/v1/sessions/{id}/messages", {
          ...message(sessionId, text, options),
          headers: { Prefer: "respond-async" },
        }),
      ) as Promise<Run>,
    getRun: (id) => ok(api.GET("/v1/runs/{id}", { params: { path: { id } } })),
    listMessages: (sessionId, query = {}) =>
      ok(api.GET("/v1/sessions/{id}/messages", { params: { path: { id: sessionId }, query } })),
    async *messages(sessionId, options = {}) {
      let cursor: string | undefined;
      do {
        const page: ConversationPage = await ok(
          api.GET("/v1/sessions/{id}/messages", {
            params: {
              path: { id: sessionId },
              query: {
                ...(options.limit === undefined ? {} : { limit: options.limit }),
                ...(cursor === undefined ? {} : { cursor }),
              },
            },
            ...(options.signal ? { signal: options.signal } : {}),
          }),
        );
        yield* page.data;
        cursor = page.next_cursor ?? undefined;
      } while (cursor !== undefined);
    },
    listRuns: ({ sessionId, ...query } = {}) =>
      sessionId === undefined
        ? ok(api.GET("/v1/runs", { params: { query } }))
        : ok(api.GET("/v1/sessions/{id}/runs", { params: { path: { id: sessionId }, query } })),
    createStreamToken: (runId) =>
      ok(api.POST("/v1/runs/{id}/stream-token", { params: { path: { id: runId } } })),
    cancelRun: (id) => ok(api.POST("/v1/runs/{id}/cancel", { params: { path: { id } } })),
    interruptRun: (id) => ok(api.POST("/v1/runs/{id}/interrupt", { params: { path: { id } } })),
    sendInput: (runId, body) =>
      ok(api.POST("/v1/runs/{id}/input", { params: { path: { id: runId } }, body })),
    controlRun: (runId, body) =>
      ok(api.POST("/v1/runs/{id}/control", { params: { path: { id: runId } }, body })),
    answer: (runId, requestId, body) =>
      ok(
        api.POST("/v1/runs/{id}/permissions/{request_id}", {
          params: { path: { id: runId, request_id: requestId } },
          body,
        }),
      ),
    listPermissions: async (runId) =>
      (await ok(api.GET("/v1/runs/{id}/permissions", { params: { path: { id: runId } } }))).data,
    retry: (runId, options = {}) =>
      ok(
        api.POST("/v1/runs/{id}/retry", {
          ...retryRequest(runId, options),
          headers: { Accept: "application/json" },
        }),
      ) as Promise<FinishedRun>,
    retryAsync: (runId, options = {}) =>
      ok(
        api.POST("/v1/runs/{id}/retry", {
          ...retryRequest(runId, options),
          headers: { Prefer: "respond-async" },
        }),
      ) as Promise<Run>,

    async *stream(sessionId, text, options = {}) {
      const view = options.events ?? "default";
      const request = message(sessionId, text, options);
      const { data, error, response } = await api.POST("/v1/sessions/{id}/messages", {
        ...request,
        params: { ...request.params, ...(options.events ? { query: { events: view } } : {}) },
        headers: { Accept: "text/event-stream" },
        parseAs: "stream",
      });
      const runId = response.headers.get("x-run-id");
      if (!response.ok || !data || !runId) throw ApiProblem.from(response, error);
      yield* readRunEvents(data, runEvents(runId, view), {
        ...(options.signal ? { signal: options.signal } : {}),
        ...(reconnect ? { reconnect } : {}),
      });
    },

    async *follow(runId, options = {}) {
      yield* readRunEvents(undefined, runEvents(runId, options.events ?? "default"), {
        after: options.after ?? 0,
        ...(options.signal ? { signal: options.signal } : {}),
        ...(reconnect ? { reconnect } : {}),
      });
    },

    async *watch(options = {}) {
      const query = {
        ...(options.sessionId ? { session_id: options.sessionId } : {}),
        ...(options.types?.length ? { types: options.types.join(",") } : {}),
      };
      yield* readFeed(
        async (after, signal) => {
          const { data, error, response } = await api.GET("/v1/events", {
            params: {
              query,
              header: after !== undefined ? { "last-event-id": after } : {},
            },
            headers: { Accept: "text/event-stream" },
            parseAs: "stream",
            signal,
          });
          if (!response.ok || !data) throw ApiProblem.from(response, error);
          return { body: data, position: response.headers.get("x-feed-position") ?? "0" };
        },
        {
          ...(options.after !== undefined ? { after: options.after } : {}),
          ...(options.signal ? { signal: options.signal } : {}),
          ...(reconnect ? { reconnect } : {}),
        },
      );
    },

    async *storedEvents(runId, options = {}) {
      const open = runEvents(runId, options.events ?? "default", false);
      yield* parseEvents(await open(options.after ?? 0, options.signal));
    },
  };
}
