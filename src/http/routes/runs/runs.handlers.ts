import type { RouteHandler } from "@hono/zod-openapi";
import type { Context } from "hono";
import { issueStreamToken } from "../../../auth/stream-tokens.js";
import { DomainError, InvalidRequestError, NotFoundError } from "../../../errors.js";
import type { CompletionEvent } from "../../../events.js";
import { restrictionOf } from "../../../forges/fork.js";
import type { Principal } from "../../../principal.js";
import {
  type Message,
  NO_RUN_OPTIONS,
  type RunOptions,
  runSettings,
} from "../../../runs/message.js";
import { readStoredLog } from "../../../runs/stored-log.js";
import type { AdmissionRead } from "../../../runs/submit.js";
import { callbacksOf } from "../../../store/callbacks.js";
import { type Database, inOneSnapshot } from "../../../store/db.js";
import { completionEvents, type LogView } from "../../../store/events.js";
import { meteredUsageOf } from "../../../store/model-calls.js";
import { runsWithPendingRequests } from "../../../store/permissions.js";
import { repliesOf } from "../../../store/replies.js";
import { admissionState } from "../../../store/run-admission.js";
import * as runStore from "../../../store/runs.js";
import type { RunRow, SessionRow } from "../../../store/schema.js";
import { getSession, isVisibleTo, sessionSettings } from "../../../store/sessions.js";
import { toRun } from "../../../wire/run.js";
import { settingIssues } from "../../agent-settings.js";
import type { AppEnv } from "../../context.js";
import { decodeCursor, pageOf } from "../../cursor.js";
import { sseResponse } from "../../sse.js";
import { admitStream } from "../../streams.js";
import type * as routes from "./runs.routes.js";
import type { PostMessageBody } from "./runs.schemas.js";
import { whenBusy } from "./when-busy.js";

/**
 * Runs as the API shows them: each row with its completion, its callback's state, its metered
 * calls, its replies and, while it runs, whether a permission request of its waits for an answer; a statement per part for all
 * of them. Read in the snapshot `db` the rows were read in (inOneSnapshot), so that the parts agree.
 */
async function showRuns(db: Database, rows: RunRow[]) {
  const ids = rows.map((row) => row.id);
  const completions = await completionEvents(db, ids);
  const callbacks = await callbacksOf(db, ids);
  const metered = await meteredUsageOf(db, ids);
  const replies = await repliesOf(db, ids);
  const awaiting = await runsWithPendingRequests(
    db,
    rows.filter((row) => row.status === "running").map((row) => row.id),
  );
  return rows.map((row) =>
    toRun(
      row,
      completions.get(row.id) ?? null,
      callbacks.get(row.id) ?? null,
      awaiting.has(row.id),
      metered.get(row.id) ?? null,
      replies.get(row.id),
    ),
  );
}

function loadRun(db: Database, id: string, principal: Principal) {
  return inOneSnapshot(db, async (tx) => {
    const row = await runStore.getVisibleRun(tx, id, principal);
    const [run] = row ? await showRuns(tx, [row]) : [];
    if (!run) throw new NotFoundError("run", id);
    return run;
  });
}

/** One page of the runs the caller may see, newest first; of one session when it is given. */
async function runPage(
  db: Database,
  principal: Principal,
  query: { limit: number; cursor?: string | undefined; sessionId?: string },
) {
  const { limit, cursor, sessionId } = query;
  const after = cursor === undefined ? undefined : decodeCursor(cursor);
  return inOneSnapshot(db, async (tx) => {
    // One row more than asked tells whether another page exists.
    const rows = await runStore.listRuns(tx, principal, {
      limit: limit + 1,
      after,
      ...(sessionId === undefined ? {} : { sessionId }),
    });
    const { page, next_cursor } = pageOf(rows, limit, (row) => row);
    return { data: await showRuns(tx, page), next_cursor };
  });
}

export const listRuns: RouteHandler<typeof routes.listRuns, AppEnv> = async (c) => {
  const { limit, cursor } = c.req.valid("query");
  return c.json(await runPage(c.var.db, c.var.principal, { limit, cursor }), 200);
};

export const listSessionRuns: RouteHandler<typeof routes.listSessionRuns, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const { limit, cursor } = c.req.valid("query");
  const { db, principal } = c.var;
  if (!(await getSession(db, id, principal))) throw new NotFoundError("session", id);
  return c.json(await runPage(db, principal, { limit, cursor, sessionId: id }), 200);
};

/** How the client asked to be answered: `Prefer` first, then `Accept`; SSE by default. */
function responseMode(
  prefer: string | undefined,
  accept: string | undefined,
): "async" | "json" | "sse" {
  if (prefer && /(^|[,;\s])respond-async($|[,;\s])/i.test(prefer)) return "async";
  if (accept?.includes("application/json") && !accept.includes("text/event-stream")) return "json";
  return "sse";
}

/** What the message sets for its run, refused (400) where the session's agent cannot honour it. */
function runOptions(c: Context<AppEnv>, session: SessionRow, body: PostMessageBody): RunOptions {
  const options: RunOptions = {
    maxTurns: body.max_turns ?? null,
    maxBudgetUsd: body.max_budget_usd ?? null,
    approvals: body.approvals ?? null,
    permissionMode: body.permission_mode ?? null,
    model: body.model ?? null,
    effort: body.effort ?? null,
    attachments: (body.attachments ?? []).map((a) => ({ mediaType: a.media_type, data: a.data })),
  };
  // A session of an agent this server no longer runs is a 503, as when it is admitted.
  const refused = settingIssues(
    c.var.agents.get(session.agent),
    runSettings(sessionSettings(session), options),
  );
  if (refused.length > 0) throw new InvalidRequestError(refused);
  return options;
}

/** The stream's view: `?events=full` shows every event of the run's log. */
const viewOf = (events: "default" | "full"): LogView => (events === "full" ? "full" : "public");

/**
 * Starts a run of `message` on the session and answers as the client asked: at once with 202
 * (`Prefer: respond-async`), with the finished run as JSON (`Accept: application/json`), or with
 * its events as SSE in the asked view. What a message and a retry share.
 */
async function startRun(
  c: Context<AppEnv>,
  session: SessionRow,
  message: Message,
  view: LogView,
  /** Preferences of `Prefer` besides `respond-async` that decided the request. */
  applied: string[] = [],
  /** The route's read of the session's admission state, when it made one. */
  read?: AdmissionRead,
): Promise<Response> {
  const { db, runs, config, logger, principal } = c.var;
  const mode = responseMode(c.req.header("prefer"), c.req.header("accept"));
  // Before the run: a client refused its stream must not leave a run going that it never asked for.
  const releaseStream = mode === "sse" ? admitStream(c.var.streams, c.var.principal) : undefined;
  let run: Awaited<ReturnType<typeof runs.submit>>["run"];
  try {
    ({ run } = await runs.submit(session, message, read));
  } catch (err) {
    releaseStream?.();
    throw err;
  }

  const preferenceApplied = (extra: string[]): Record<string, string> => {
    const all = [...extra, ...applied];
    return all.length > 0 ? { "Preference-Applied": all.join(", ") } : {};
  };
  if (mode === "async") {
    return c.json(toRun(run, null), 202, {
      Location: `/v1/runs/${run.id}`,
      "Preference-Applied": "respond-async",
      ...preferenceApplied(["respond-async"]),
    });
  }
  if (mode === "json") {
    let text = "";
    let completion: CompletionEvent | undefined;
    for await (const batch of runs.events(run.id, "public", 0)) {
      for (const { type, json } of batch) {
        if (type === "text_delta") text += (JSON.parse(json) as { text: string }).text;
        if (type === "completion") completion = JSON.parse(json) as CompletionEvent;
      }
    }
    if (!completion) throw new Error(`run ${run.id} ended without a completion`);
    return c.json({ run: await loadRun(db, run.id, principal), completion, text }, 200, {
      "X-Run-Id": run.id,
      ...preferenceApplied([]),
    });
  }
  return sseResponse((signal) => runs.events(run.id, view, 0, signal), {
    view,
    keepAliveMs: config.runs.keepAliveMs,
    logger: logger.child({ run_id: run.id }),
    headers: {
      "X-Run-Id": run.id,
      "Content-Location": `/v1/runs/${run.id}/events`,
      ...preferenceApplied([]),
    },
    onClose: releaseStream,
  });
}

export const postMessage: RouteHandler<typeof routes.postMessage, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const body = c.req.valid("json");
  const headers = c.req.valid("header");
  const { db, runs, principal } = c.var;
  // What its admission reads, read here: the admission need not read it again.
  const mark = runs.readMark(id);
  const state = await admissionState(db, id);
  if (!state || !isVisibleTo(principal, state.session)) throw new NotFoundError("session", id);
  const { session } = state;
  const message: Message = {
    text: body.text,
    systemPrompt: body.system_prompt ?? null,
    options: runOptions(c, session, body),
    trigger: "message",
    idempotencyKey: headers["idempotency-key"] ?? null,
    outputSchema: body.output_schema ?? null,
  };
  const busy = whenBusy(body.when_busy, headers.prefer);
  if (busy.queue) message.waitForSession = true;
  const applied = busy.applied ? [busy.applied] : [];
  return startRun(c, session, message, viewOf(c.req.valid("query").events), applied, {
    state,
    mark,
  });
};

export const retryRun: RouteHandler<typeof routes.retryRun, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const body = c.req.valid("json");
  const headers = c.req.valid("header");
  const { db, principal, agents } = c.var;
  const run = await runStore.getVisibleRun(db, id, principal);
  const session = run && (await getSession(db, run.sessionId, principal));
  if (!run || !session) throw new NotFoundError("run", id);
  if (!agents.get(session.agent).resumesAtMessage) {
    throw new DomainError(
      "retry_unsupported",
      `Runs of a ${session.agent} session cannot be retried: its CLI can only continue a conversation from its end, not from the message before the run`,
    );
  }
  const message: Message = {
    text: body.text ?? run.prompt,
    systemPrompt: run.systemPrompt,
    trigger: "retry",
    idempotencyKey: headers["idempotency-key"] ?? null,
    retryOf: run.id,
    outputSchema: body.output_schema ?? run.outputSchema,
    // A fork's run stays restricted when retried: its own egress list, and no bypass.
    ...(run.egress !== null && {
      egress: run.egress,
      options: {
        ...NO_RUN_OPTIONS,
        permissionMode: restrictionOf(null, sessionSettings(session).permissionMode).permissionMode,
      },
    }),
  };
  return startRun(c, session, message, viewOf(c.req.valid("query").events));
};

export const getRun: RouteHandler<typeof routes.getRun, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const { db, runs, principal } = c.var;
  const run = await loadRun(db, id, principal);
  // Read again once a completion this instance held unstored has been tried.
  if (await runs.storeWaitingCompletion(id)) return c.json(await loadRun(db, id, principal), 200);
  return c.json(run, 200);
};

export const getRunEvents: RouteHandler<typeof routes.getRunEvents, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const query = c.req.valid("query");
  const lastEventId = c.req.valid("header")["last-event-id"];
  const { db, runs, config, logger, principal } = c.var;
  if (!(await runStore.getVisibleRun(db, id, principal))) throw new NotFoundError("run", id);
  const view = query.events === "full" ? "full" : "public";
  const after = lastEventId ?? query.after ?? 0;
  // A live run publishes an event only once it is stored: the stored log is all it has shown.
  const open =
    query.follow === "false"
      ? () => readStoredLog(db, id, view, after)
      : (signal: AbortSignal) => runs.events(id, view, after, signal);
  return sseResponse(open, {
    view,
    keepAliveMs: config.runs.keepAliveMs,
    logger: logger.child({ run_id: id }),
    onClose: admitStream(c.var.streams, c.var.principal),
  });
};

export const cancelRun: RouteHandler<typeof routes.cancelRun, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const { db, runs, principal } = c.var;
  if (!(await runStore.getVisibleRun(db, id, principal))) throw new NotFoundError("run", id);
  await runs.cancel(id);
  return c.json(await loadRun(db, id, principal), 200);
};

export const interruptRun: RouteHandler<typeof routes.interruptRun, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const { db, runs, principal } = c.var;
  if (!(await runStore.getVisibleRun(db, id, principal))) throw new NotFoundError("run", id);
  await runs.interrupt(id);
  return c.json(await loadRun(db, id, principal), 200);
};

export const createStreamToken: RouteHandler<typeof routes.createStreamToken, AppEnv> = async (
  c,
) => {
  const { id } = c.req.valid("param");
  const { db, principal } = c.var;
  if (!(await runStore.getVisibleRun(db, id, principal))) throw new NotFoundError("run", id);
  const { token, expiresAt } = await issueStreamToken(db, id, principal.keyId);
  return c.json(
    {
      token,
      expires_at: expiresAt.toISOString(),
      events_url: `/v1/runs/${id}/events?token=${token}`,
    },
    201,
  );
};
