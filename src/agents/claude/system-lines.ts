import type { BridgeEvent } from "../../events.js";
import { str } from "../line-fields.js";
import type { CommandInfo } from "./hooks.js";
import type { SDKAPIRetryMessage, SDKRateLimitInfo, SDKSystemMessage } from "./sdk-messages.js";

// The CLI's own notices that a client is told of: the `system` `init` line (the session, its
// model, tools, MCP servers and slash commands), the API being retried (`system` `api_retry`) and
// rate limits (`rate_limit_event`). Retries and limits are `status` events in the default view:
// they are why a run has gone quiet, sometimes for minutes (a 401 is retried for about 3).

type StatusEvent = Extract<BridgeEvent, { type: "status" }>;

/**
 * `session_status` and `available_commands` from the init line, each command with what the
 * answer to `initialize` says of it (hooks.ts), when it did.
 */
export function initEvents(
  line: SDKSystemMessage,
  resumed: boolean,
  described: ReadonlyMap<string, CommandInfo> = new Map(),
): BridgeEvent[] {
  return [
    {
      type: "session_status",
      status: resumed ? "resumed" : "new",
      agent_session_id: line.session_id ?? null,
      model: line.model ?? null,
      tools: line.tools,
      mcp_servers: line.mcp_servers.map(({ name, status }) => ({
        name,
        status: status ?? "unknown",
      })),
    },
    {
      type: "available_commands",
      commands: line.slash_commands.map((name) => {
        const info = described.get(name);
        return {
          name,
          ...(info?.description ? { description: info.description } : {}),
          ...(info?.argumentHint ? { argument_hint: info.argumentHint } : {}),
        };
      }),
    },
  ];
}

/** "8 s", "0.6 s": a delay as a person reads it. */
function seconds(ms: number): string {
  const s = ms / 1000;
  return `${s < 10 ? Number(s.toFixed(1)) : Math.round(s)} s`;
}

/** "API error (529 overloaded), retrying 3/10 in 8 s" from an `api_retry` line. */
export function apiRetryStatus(line: SDKAPIRetryMessage): StatusEvent {
  const { error_status: status, error } = line;
  const named = error !== undefined && error !== "unknown" ? error : undefined;
  const what =
    status !== undefined
      ? `API error (${[status, named].filter((p) => p !== undefined).join(" ")})`
      : `API unreachable${named ? ` (${named})` : ""}`;
  const max = line.max_retries;
  const attempt = `${line.attempt}${max > 0 ? `/${max}` : ""}`;
  return {
    type: "status",
    message: `${what}, retrying ${attempt} in ${seconds(line.retry_delay_ms)}`,
  };
}

/**
 * A status for a rate limit the run is close to or has hit (none while the limit allows it, as
 * with most subscription runs): "Rate limited (five hour limit) until 2026-05-01T17:00:00.000Z".
 */
export function rateLimitStatus(info: SDKRateLimitInfo): StatusEvent | undefined {
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
