import type { Run, Session } from "../client/index.js";
import type { Output } from "./render.js";

// What commands print of the server's answers: JSON, or a table of sessions or runs.

export function printJson(out: Output, value: unknown): void {
  out.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function printSessions(out: Output, sessions: Session[]): void {
  printTable(out, [
    ["ID", "TITLE", "RUNS", "COST", "LAST ACTIVITY"],
    ...sessions.map((s) => [
      s.id,
      s.title ?? "-",
      String(s.usage.runs),
      `$${s.usage.cost_usd.toFixed(4)}`,
      s.last_activity_at,
    ]),
  ]);
}

export function printRuns(out: Output, runs: Run[]): void {
  // Where a hook's run answered on its forge, and how that went (`comment:posted,check:failed`):
  // a column only when a run listed has replies.
  const replies = runs.some((r) => r.replies.length > 0);
  printTable(out, [
    ["ID", "SESSION", "STATUS", "TRIGGER", "COST", "CREATED", ...(replies ? ["REPLIES"] : [])],
    ...runs.map((r) => [
      r.id,
      r.session_id,
      r.status,
      r.trigger,
      r.cost_usd === null ? "-" : `$${r.cost_usd.toFixed(4)}`,
      r.created_at,
      ...(replies
        ? [r.replies.map((reply) => `${reply.kind}:${reply.state}`).join(",") || "-"]
        : []),
    ]),
  ]);
}

/** Rows as columns padded to their widest cell; the first row is the header. */
function printTable(out: Output, rows: string[][]): void {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  for (const row of rows)
    out.stdout.write(
      `${row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd()}\n`,
    );
}
