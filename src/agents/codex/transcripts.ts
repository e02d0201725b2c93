import { readdir } from "node:fs/promises";
import path from "node:path";
import type { TranscriptLocation } from "../agent.js";
import { operatorCodexHome } from "./tenant-config.js";

// Codex keeps a thread as `sessions/<yyyy>/<mm>/<dd>/rollout-<time>-<thread id>.jsonl` under its
// CODEX_HOME, dated by the thread's first turn. Looked for newest day first: a session's runs are
// mostly recent.

export function codexTranscripts(env: Record<string, string>): TranscriptLocation {
  const root = operatorCodexHome(env);
  return {
    root,
    async find(threadId) {
      const suffix = `-${threadId}.jsonl`;
      const newestFirst = async (dir: string) =>
        (await readdir(path.join(root, dir)).catch(() => [] as string[])).sort().reverse();
      for (const year of await newestFirst("sessions")) {
        for (const month of await newestFirst(path.join("sessions", year))) {
          for (const day of await newestFirst(path.join("sessions", year, month))) {
            const dir = path.join("sessions", year, month, day);
            const file = (await newestFirst(dir)).find((name) => name.endsWith(suffix));
            if (file) return path.join(dir, file);
          }
        }
      }
      return undefined;
    },
  };
}
