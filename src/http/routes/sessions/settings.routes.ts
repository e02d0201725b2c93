import { createRoute, z } from "@hono/zod-openapi";
import { problemResponses } from "../../errors.js";
import { SessionDiff } from "./diff.schemas.js";
import { Session, SessionId } from "./sessions.schemas.js";
import { UpdateSessionBody } from "./settings.schemas.js";

const tags = ["Sessions"];
const params = z.object({ id: SessionId });

export const updateSession = createRoute({
  method: "patch",
  path: "/v1/sessions/{id}",
  operationId: "updateSession",
  tags,
  summary: "Change a session's settings",
  description:
    "A JSON merge patch (`application/json` or `application/merge-patch+json`): the fields given change, the rest stay; `null` sets a field back to what a session created without it gets. Checked as at creation (each setting one the agent can honour, the key's policy): a patch refused changes nothing. It takes effect from the session's next run: a run reads its session's settings as it is admitted, and a run that queued or waited for its session again when its turn comes; a run already started keeps its own. `agent`, `work_dir` and `worktree` are fixed for the session's life (400).",
  request: {
    params,
    body: {
      content: {
        "application/json": { schema: UpdateSessionBody },
        "application/merge-patch+json": { schema: UpdateSessionBody },
      },
      required: true,
    },
  },
  responses: {
    200: {
      description: "The session as changed",
      content: { "application/json": { schema: Session } },
    },
    ...problemResponses(400, 401, 403, 404, 410, 413, 415, 429),
  },
});

export const getSessionDiff = createRoute({
  method: "get",
  path: "/v1/sessions/{id}/diff",
  operationId: "getSessionDiff",
  tags,
  summary: "What the agent changed in the session's worktree",
  description:
    "For a `worktree` session: its worktree's changes against the commit it was made from (`git_worktree.base_commit`), committed, uncommitted and untracked (ignored files left out). JSON by default; `Accept: text/x-diff` gives the unified diff alone (with `X-Diff-Truncated: true` when cut). The diff is cut at 1 MiB (`truncated`). Answered by an instance on the host that holds the worktree (409 `worktree_elsewhere`, naming it, elsewhere); 409 `not_a_worktree_session` for a session without one, 409 `worktree_not_found` before its first run made it, 410 `worktree_removed` once it is removed.",
  request: { params },
  responses: {
    200: {
      description: "The changes",
      content: {
        "application/json": { schema: SessionDiff },
        "text/x-diff": { schema: z.string() },
      },
    },
    ...problemResponses(400, 401, 404, 409, 410, 429),
  },
});
