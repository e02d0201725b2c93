import { createRoute, z } from "@hono/zod-openapi";
import { problemResponses } from "../../errors.js";
import { CreateSessionBody, Session, SessionId } from "./sessions.schemas.js";

export const ForkSessionBody = z
  .strictObject({
    at_run: z.uuid({ error: "expected a run id (a UUID)" }).optional().openapi({
      description:
        "A finished run of this session whose end the fork branches after. Default: the session's newest finished run. A run that failed confirmed no message of its own: the fork then branches after the last message a run before it confirmed.",
    }),
    title: CreateSessionBody.shape.title.openapi({ description: "Default: the session's." }),
    metadata: CreateSessionBody.shape.metadata.openapi({ description: "Default: the session's." }),
  })
  .openapi("ForkSession", { example: { title: "try the other way" } });

export const forkSession = createRoute({
  method: "post",
  path: "/v1/sessions/{id}/fork",
  operationId: "forkSession",
  tags: ["Sessions"],
  summary: "Fork a session: a new session that goes on from one of its runs",
  description:
    "A new session, with the session's settings and owner, whose first message continues the conversation as it was at the end of `at_run`; the session itself goes on untouched, and neither sees the other's later turns. A worktree session's fork gets a worktree of its own, on a branch made from the session's at its current commit, with the session's uncommitted changes (untracked files too, ignored ones not) as its own uncommitted changes. A session with an active run may be forked at a finished run. Claude Code only: a codex session gets 400 `fork_unsupported`. 404 `run_not_found` when `at_run` is not a run of this session; 409 `run_not_finished` when it has not finished; 409 `no_fork_point` when no run up to it confirmed a message (or the session has no finished run); 410 for an expired session; 409 `worktree_elsewhere` when the session's worktree is on another host than the instance asked.",
  request: {
    params: z.object({ id: SessionId }),
    body: { content: { "application/json": { schema: ForkSessionBody } } },
  },
  responses: {
    201: {
      description: "The new session; `Location` names it.",
      headers: z.object({ Location: z.string() }),
      content: { "application/json": { schema: Session } },
    },
    ...problemResponses(400, 401, 403, 404, 409, 410, 413, 415, 429),
  },
});
