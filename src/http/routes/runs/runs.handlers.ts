import type { RouteHandler } from "@hono/zod-openapi";
import type { Principal } from "../../../auth/principal.js";
import type { CompletionEvent } from "../../../events.js";
import type { Database } from "../../../store/db.js";
import { getCompletionEvent } from "../../../store/events.js";
import { getCallback } from "../../../store/hooks.js";
import * as runStore from "../../../store/runs.js";
import { getSession } from "../../../store/sessions.js";
import type { AppEnv } from "../../context.js";
import { ApiError } from "../../errors.js";
import { sseResponse } from "../../sse.js";
import { admitStream } from "../../streams.js";
import type * as routes from "./runs.routes.js";
import { toRun } from "./runs.schemas.js";

const runNotFound = (id: string) => new ApiError(404, "run_not_found", `No run with id ${id}`);

async function loadRun(db: Database, id: string, principal: Principal) {
  const row = await runStore.getVisibleRun(db, id, principal);
  if (!row) throw runNotFound(id);
  return toRun(
    row,
    (await getCompletionEvent(db, id)) ?? null,
    (await getCallback(db, id)) ?? null,
  );
}

/** How the client asked to be answered: `Prefer` first, then `Accept`; SSE by default. */
function responseMode(
  prefer: string | undefined,
  accept: string | undefined,
): "async" | "json" | "sse" {
  if (prefer && /(^|[,;\s])respond-async($|[,;\s])/i.test(prefer)) return "async";
  if (accept?.includes("application/json") && !accept.includes("text/event-stream")) return "json";
  return "sse";
}

export const postMessage: RouteHandler<typeof routes.postMessage, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const body = c.req.valid("json");
  const headers = c.req.valid("header");
  const { db, runs, config, logger, principal } = c.var;
  const session = await getSession(db, id, principal);
  if (!session) throw new ApiError(404, "session_not_found", `No session with id ${id}`);

  const mode = responseMode(headers.prefer, c.req.header("accept"));
  // Before the run: a client refused its stream must not leave a run going that it never asked for.
  const releaseStream = mode === "sse" ? admitStream(c) : undefined;
  let run: Awaited<ReturnType<typeof runs.submit>>["run"];
  try {
    ({ run } = await runs.submit(session, {
      text: body.text,
      systemPrompt: body.system_prompt ?? null,
      trigger: "message",
      idempotencyKey: headers["idempotency-key"] ?? null,
    }));
  } catch (err) {
    releaseStream?.();
    throw err;
  }

  if (mode === "async") {
    return c.json(toRun(run, null), 202, {
      Location: `/v1/runs/${run.id}`,
      "Preference-Applied": "respond-async",
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
    });
  }
  return sseResponse((signal) => runs.events(run.id, "public", 0, signal), {
    view: "public",
    keepAliveMs: config.runs.keepAliveMs,
    logger: logger.child({ run_id: run.id }),
    headers: { "X-Run-Id": run.id, "Content-Location": `/v1/runs/${run.id}/events` },
    onClose: releaseStream,
  });
};

export const getRun: RouteHandler<typeof routes.getRun, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  return c.json(await loadRun(c.var.db, id, c.var.principal), 200);
};

export const getRunEvents: RouteHandler<typeof routes.getRunEvents, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const query = c.req.valid("query");
  const lastEventId = c.req.valid("header")["last-event-id"];
  const { db, runs, config, logger, principal } = c.var;
  if (!(await runStore.getVisibleRun(db, id, principal))) throw runNotFound(id);
  const view = query.events === "full" ? "full" : "public";
  const after = lastEventId ?? query.after ?? 0;
  return sseResponse((signal) => runs.events(id, view, after, signal), {
    view,
    keepAliveMs: config.runs.keepAliveMs,
    logger: logger.child({ run_id: id }),
    onClose: admitStream(c),
  });
};

export const cancelRun: RouteHandler<typeof routes.cancelRun, AppEnv> = async (c) => {
  const { id } = c.req.valid("param");
  const { db, runs, principal } = c.var;
  if (!(await runStore.getVisibleRun(db, id, principal))) throw runNotFound(id);
  await runs.cancel(id);
  return c.json(await loadRun(db, id, principal), 200);
};
