import { homedir } from "node:os";
import path from "node:path";
import { type AgentFiles, globLiteral } from "../../process/agent-files.js";
import type { TranscriptLocation } from "../agent.js";

// Claude Code keeps a session's transcript as `projects/<the work dir, made a name>/<session
// id>.jsonl` under its config dir (CLAUDE_CONFIG_DIR, else ~/.claude). The project's name is
// looked up, not derived: the CLI's rule for it is its own, and the same work dir gives the same
// name on every instance, so the path relative to the config dir is what travels.

export function claudeTranscripts(
  env: Record<string, string>,
  files: AgentFiles,
): TranscriptLocation {
  const root = env.CLAUDE_CONFIG_DIR ?? path.join(env.HOME ?? homedir(), ".claude");
  return {
    root,
    files,
    async find(sessionId) {
      const found = await files.find(
        path.join(root, "projects"),
        2,
        globLiteral(`${sessionId}.jsonl`),
      );
      const first = found.sort()[0];
      return first && path.join("projects", first);
    },
    // One file per session, named after it, in the work dir's project, which a session keeps.
    stays: (sessionId, relative) => path.basename(relative) === `${sessionId}.jsonl`,
  };
}
