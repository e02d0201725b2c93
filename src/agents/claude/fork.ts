import type { ForkOf } from "../agent.js";

// A forked session's first run: the CLI copies the original's conversation, up to and including
// one message, into a new session of the fork's id, and answers the prompt there. The original's
// transcript is only read, so the original goes on as if nothing happened.
//
// Observed with claude 2.1.328 against the mock Messages API (HOME fresh, stream-json in and out):
// - `--resume=<A> --fork-session --session-id=<F> --resume-session-at=<uuid>` starts session F
//   (the init and result lines say F) whose first request holds A's messages up to the message
//   `uuid` (the `uuid` of an assistant line of A, which is what a run's `last_message_uuid` is) and
//   none after it; it writes F's transcript (`<F>.jsonl`) and leaves A's byte for byte as it was.
//   `--resume=<F>` then goes on with F's own conversation; `--resume=<A>` never sees F's turns.
// - Without `--session-id`, `--fork-session` picks a new random id; with it, that id.
// - With `-w <F>` the CLI finds A's transcript though it lives under another project directory
//   (A's worktree's), and runs in F's worktree, reusing one that exists.
// - A `--resume-session-at` uuid that A's transcript does not hold: a `result` with
//   `errors: ["No message found with message.uuid of: <uuid>"]`, exit code 1, no request made.
// - A fork whose first turn failed (an API error) has still written `<F>.jsonl` (the copied
//   messages and the failed prompt); the same fork command again then fails before it does
//   anything: "Error: Session ID <F> is already in use." on stderr, exit code 1, as
//   `--session-id` of a session that exists does. So the fork command is the fork's way to start
//   its session, and resume.ts falls back between it and `--resume=<F>` as it does for any session.
// - The fork's first `result` went on from A's running totals (`total_cost_usd` 0.0016 after A's
//   two turns, 0.0024 after the fork's one; `duration_api_ms` 2849 after A's two, 2935 after the
//   fork's), while its `model_usage_since_last_result` held the turn's own (0.0008): the bridge
//   prices a run from the latter. The totals are A's as its transcript last recorded them (a
//   `cost-state` line the CLI writes as it exits), all of A's turns, not those up to the message:
//   the fork keeps the API time A's runs had taken when it was made (`apiMsBefore`) and takes it
//   off, as a resumed run takes off its session's earlier runs' (backend.ts).

/** The flags that start session `sessionId` as a fork of `fork`'s conversation. */
export function forkArgs(sessionId: string, fork: ForkOf): string[] {
  // Uuids the CLI reported, as `--flag=value`: never read as flags.
  return [
    `--resume=${fork.agentSessionId}`,
    "--fork-session",
    `--session-id=${sessionId}`,
    `--resume-session-at=${fork.resumeAt}`,
  ];
}
