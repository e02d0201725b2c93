import path from "node:path";
import { type AgentFiles, globLiteral } from "../../process/agent-files.js";
import type { TranscriptLocation } from "../agent.js";
import { operatorCodexHome } from "./credentials.js";

// Codex keeps a thread as `sessions/<yyyy>/<mm>/<dd>/rollout-<time>-<thread id>.jsonl` under its
// CODEX_HOME, dated by the thread's first turn; should there be several, the newest is taken.

export function codexTranscripts(
  env: Record<string, string>,
  files: AgentFiles,
): TranscriptLocation {
  const root = operatorCodexHome(env);
  return {
    root,
    files,
    async find(threadId) {
      const found = await files.find(
        path.join(root, "sessions"),
        4,
        `*-${globLiteral(threadId)}.jsonl`,
      );
      const newest = found.sort().at(-1);
      return newest && path.join("sessions", newest);
    },
  };
}
