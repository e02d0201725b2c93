import type { PermissionAnswer, PermissionRequest } from "../agents/agent.js";
import type { BridgeEvent } from "../events.js";
import { changedInput } from "../store/permissions.js";
import type { PermissionRequestRow } from "../store/schema.js";
import type { ActiveRun } from "./active-run.js";

// The events a permission request puts in its run's log: the request (and, for a question, the
// question a client answers), and how it was resolved.

export type Resolved = Extract<BridgeEvent, { type: "permission_resolved" }>;

/**
 * A recorded request's events: its `permission_request` and, for a question, the `user_question`
 * a client answers it by (with the request's id and expiry; neither when it cannot be answered).
 */
export function appendRequest(run: ActiveRun, request: PermissionRequest, expiresAt: Date | null) {
  run.log.append(requestEvent(request, expiresAt));
  if (request.questions.length === 0 || request.toolUseId === null) return;
  run.log.append({
    type: "user_question",
    tool_use_id: request.toolUseId,
    questions: request.questions,
    ...(expiresAt ? { request_id: request.requestId, expires_at: expiresAt.toISOString() } : {}),
    ...(request.parentToolUseId ? { parent_tool_use_id: request.parentToolUseId } : {}),
  });
}

export function requestEvent(request: PermissionRequest, expiresAt: Date | null): BridgeEvent {
  return {
    type: "permission_request",
    request_id: request.requestId,
    tool_name: request.toolName,
    tool_use_id: request.toolUseId,
    input: request.input,
    suggestions: request.suggestions,
    ...request.details,
    expires_at: expiresAt?.toISOString() ?? null,
  };
}

/**
 * How a client's recorded answer shows in `permission_resolved`: what was decided and by which
 * key, and the input the tool runs with when the answer changed it (the audit trail's record of
 * what ran).
 */
export function clientResolution(
  row: PermissionRequestRow,
  answer: PermissionAnswer,
): Omit<Resolved, "type" | "request_id"> {
  const updated = changedInput(row);
  return {
    decision: answer.behavior,
    by: "client",
    ...(row.scope === "session" || row.scope === "once" ? { scope: row.scope } : {}),
    ...(answer.behavior === "deny" && answer.message ? { message: answer.message } : {}),
    ...(updated ? { updated_input: updated } : {}),
    ...(row.answeredByKeyId ? { key_id: row.answeredByKeyId } : {}),
  };
}

export function resolvedEvent(
  requestId: string,
  how: Omit<Resolved, "type" | "request_id">,
): Resolved {
  return { type: "permission_resolved", request_id: requestId, ...how };
}
