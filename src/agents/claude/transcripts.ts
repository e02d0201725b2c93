import { readdir, stat } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";
import type { TranscriptLocation } from "../agent.js";

// Claude Code keeps a session's transcript as `projects/<the work dir, made a name>/<session
// id>.jsonl` under its config dir (CLAUDE_CONFIG_DIR, else ~/.claude). The project's name is
// looked up, not derived: the CLI's rule for it is its own, and the same work dir gives the same
// name on every instance, so the path relative to the config dir is what travels.

export function claudeTranscripts(env: Record<string, string>): TranscriptLocation {
  const root = env.CLAUDE_CONFIG_DIR ?? path.join(env.HOME ?? homedir(), ".claude");
  return {
    root,
    async find(sessionId) {
      const projects = await readdir(path.join(root, "projects")).catch(() => []);
      for (const project of projects) {
        const file = path.join("projects", project, `${sessionId}.jsonl`);
        if (await isFile(path.join(root, file))) return file;
      }
      return undefined;
    },
  };
}

async function isFile(file: string): Promise<boolean> {
  return (await stat(file).catch(() => undefined))?.isFile() ?? false;
}
