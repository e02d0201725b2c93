import type { Command } from "commander";
import type { FeedEventType, FeedItem } from "../client/index.js";
import { clientOf, positiveInt } from "./options.js";
import type { Output } from "./render.js";

// `agent-bridge watch`: the live feed (GET /v1/events), one line per event, until Ctrl-C (or
// `--count` events): what a dashboard would show, in a terminal or a log.

/** One line of an event: its time, type, ids and what it says. */
export function feedLine(item: FeedItem): string {
  const fields: string[] = [];
  switch (item.type) {
    case "session_created":
      fields.push(
        `agent=${item.agent}`,
        ...(item.title ? [`title=${JSON.stringify(item.title)}`] : []),
      );
      break;
    case "run_queued":
      fields.push(`status=${item.status}`, `trigger=${item.trigger}`);
      break;
    case "run_finished":
      fields.push(
        `status=${item.status}`,
        ...(item.error_code ? [`error_code=${item.error_code}`] : []),
        `cost=${item.cost_usd === null ? "-" : `$${item.cost_usd.toFixed(4)}`}`,
        `duration=${(item.duration_ms / 1000).toFixed(1)}s`,
      );
      break;
    case "permission_requested":
      fields.push(`request=${item.request_id}`, `tool=${item.tool_name}`);
      break;
    case "permission_resolved":
      fields.push(
        `request=${item.request_id}`,
        `state=${item.state}`,
        ...(item.by ? [`by=${item.by}`] : []),
      );
      break;
    case "feed_reset":
      return `${item.at}  ${item.type}  ${item.message}`;
    default:
      break;
  }
  const ids = [`session=${item.session_id}`, ...("run_id" in item ? [`run=${item.run_id}`] : [])];
  return [item.at, item.type, ...ids, ...fields].join("  ");
}

export function addWatchCommand(program: Command, out: Output): void {
  program
    .command("watch")
    .description(
      "print the live feed, one line per event: runs queued, started and finished, permission requests, sessions (every session for an admin key)",
    )
    .option("--session <id>", "only this session's events")
    .option("--types <types>", "only these event types, comma-separated (e.g. run_finished)")
    .option(
      "--after <position>",
      "start after this feed position: an event's id, as --json prints it (0: everything the feed holds); default: now",
    )
    .option("--count <n>", "stop after this many events", positiveInt)
    .option("--json", "print each event as one line of JSON (with its id)")
    .action(async (options, command: Command) => {
      const controller = new AbortController();
      const stop = () => controller.abort();
      process.once("SIGINT", stop);
      let seen = 0;
      try {
        for await (const item of clientOf(command).watch({
          ...(options.session ? { sessionId: options.session } : {}),
          ...(options.types
            ? { types: String(options.types).split(",") as Exclude<FeedEventType, "feed_reset">[] }
            : {}),
          ...(options.after !== undefined ? { after: String(options.after) } : {}),
          signal: controller.signal,
        })) {
          out.stdout.write(`${options.json ? JSON.stringify(item) : feedLine(item)}\n`);
          if (options.count !== undefined && ++seen >= options.count) break;
        }
      } catch (err) {
        // Ctrl-C ends the watch; nothing failed.
        if (!controller.signal.aborted) throw err;
      } finally {
        process.off("SIGINT", stop);
      }
    });
}
