import { createRoute, z } from "@hono/zod-openapi";
import { problemResponses } from "../../errors.js";
import { RunId } from "../runs/runs.schemas.js";
import { ControlEvent, RunControlBody, RunInputBody, UserInputEvent } from "./steering.schemas.js";

const tags = ["Runs"];

export const postRunInput = createRoute({
  method: "post",
  path: "/v1/runs/{id}/input",
  operationId: "postRunInput",
  tags,
  summary: "Steer a live run: write the user's next message to its agent",
  description: [
    "Writes the text to the running agent as the user's next message. Claude Code answers it",
    "after the turn in progress, in the same run: the run ends at the result that answers the",
    "last input it took, and its completion covers every turn (usage and cost added up, `result`",
    "the last turn's text). Recorded in the run's log as a `user_input` event. 409",
    "`input_unsupported` for an agent that takes no input while it runs (codex),",
    "`run_not_running` before its agent has started, `run_finished` once the run is over or its",
    "agent has given its last answer (nothing was written).",
  ].join(" "),
  request: {
    params: z.object({ id: RunId }),
    body: { content: { "application/json": { schema: RunInputBody } }, required: true },
  },
  responses: {
    202: {
      description: "Written to the agent; the event its log records",
      content: { "application/json": { schema: UserInputEvent } },
    },
    ...problemResponses(400, 401, 404, 409, 413, 415, 429, 502),
  },
});

export const postRunControl = createRoute({
  method: "post",
  path: "/v1/runs/{id}/control",
  operationId: "postRunControl",
  tags,
  summary: "Switch a live run's model or permission mode",
  description: [
    "Asks the running agent to switch (Claude Code's `set_model` / `set_permission_mode`",
    "control requests), under the session's key's policy as at session creation (403",
    "`policy_denied`): it answers at once, even while a tool runs, and its next API request uses",
    "the new model. Answered with the `control` event the run's log records (the model as the",
    "agent resolved it). 409 `control_failed` when the agent refused, 502 `agent_no_answer` when",
    "it did not answer within 10 s; 409 `control_unsupported`, `run_not_running` and",
    "`run_finished` as for input.",
  ].join(" "),
  request: {
    params: z.object({ id: RunId }),
    body: { content: { "application/json": { schema: RunControlBody } }, required: true },
  },
  responses: {
    200: {
      description: "The agent switched; the event its log records",
      content: { "application/json": { schema: ControlEvent } },
    },
    ...problemResponses(400, 401, 403, 404, 409, 415, 429, 502),
  },
});
