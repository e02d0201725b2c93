import type { BridgeEvent } from "../../events.js";
import { int, isRecord, type Json, str } from "../line-fields.js";

// The CLI's own notices that a client is told of: the `system` `init` line (the session, its
// model, tools, MCP servers and slash commands), the API being retried (`system` `api_retry`) and
// rate limits (`rate_limit_event`). Retries and limits are `status` events in the default view:
// they are why a run has gone quiet, sometimes for minutes (a 401 is retried for about 3).

type StatusEvent = Extract<BridgeEvent, { type: "status" }>;

const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];

/** `session_status` and `available_commands` from the init line. */
export function initEvents(line: Json, resumed: boolean): BridgeEvent[] {
  const servers = Array.isArray(line.mcp_servers) ? line.mcp_servers.filter(isRecord) : [];
  return [
    {
      type: "session_status",
      status: resumed ? "resumed" : "new",
      agent_session_id: str(line.session_id) ?? null,
      model: str(line.model) ?? null,
      tools: strings(line.tools),
      mcp_servers: servers.flatMap((s) => {
        const name = str(s.name);
        return name === undefined ? [] : [{ name, status: str(s.status) ?? "unknown" }];
      }),
    },
    {
      type: "available_commands",
      commands: strings(line.slash_commands).map((name) => ({ name })),
    },
  ];
}

/** "8 s", "0.6 s": a delay as a person reads it. */
function seconds(ms: number): string {
  const s = ms / 1000;
  return `${s < 10 ? Number(s.toFixed(1)) : Math.round(s)} s`;
}

/** "API error (529 overloaded), retrying 3/10 in 8 s" from an `api_retry` line. */
export function apiRetryStatus(line: Json): StatusEvent {
  const status = typeof line.error_status === "number" ? line.error_status : undefined;
  const error = str(line.error);
  const named = error !== undefined && error !== "unknown" ? error : undefined;
  const what =
    status !== undefined
      ? `API error (${[status, named].filter((p) => p !== undefined).join(" ")})`
      : `API unreachable${named ? ` (${named})` : ""}`;
  const max = int(line.max_retries);
  const attempt = `${int(line.attempt)}${max > 0 ? `/${max}` : ""}`;
  return {
    type: "status",
    message: `${what}, retrying ${attempt} in ${seconds(int(line.retry_delay_ms))}`,
  };
}

/**
 * A status for a rate limit the run is close to or has hit (none while the limit allows it, as
 * with most subscription runs): "Rate limited (five hour limit) until 2026-05-01T17:00:00.000Z".
 */
export function rateLimitStatus(info: Json): StatusEvent | undefined {
  const what =
    info.status === "rejected"
      ? "Rate limited"
      : info.status === "allowed_warning"
        ? "Close to the rate limit"
        : undefined;
  if (what === undefined) return undefined;
  const limit = str(info.rateLimitType);
  const resets = typeof info.resetsAt === "number" ? new Date(info.resetsAt * 1000) : undefined;
  const until = resets && !Number.isNaN(resets.getTime()) ? resets.toISOString() : undefined;
  return {
    type: "status",
    message: [
      what,
      limit ? ` (${limit.replaceAll("_", " ")} limit)` : "",
      until ? `${what === "Rate limited" ? " until" : "; it resets at"} ${until}` : "",
    ].join(""),
  };
}
