import type { ConversationItem } from "../client/index.js";
import type { Output } from "./render.js";

// `sessions show ID --messages`: a session's conversation as text, a run after another: who sent
// each message, the agent's text as it said it, one line per tool call with its outcome, each
// permission request with its answer, the user's input and switches written into the live run,
// and how the run ended.

/** At most this many characters of a tool's input or output on its line. */
const SHOWN = 200;

const clip = (text: string) => {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > SHOWN ? `${line.slice(0, SHOWN)}…` : line;
};

const cost = (usd: number | null) => (usd === null ? "cost unknown" : `$${usd.toFixed(4)}`);

/** The lines of one item. */
export function conversationLines(item: ConversationItem): string[] {
  const live = item.live ? " (live)" : "";
  switch (item.type) {
    case "user_message":
      return [
        `── run ${item.run_id} · ${item.trigger} · ${item.created_at}${live}`,
        ...item.text.split("\n").map((line) => `> ${line}`),
        ...item.images.map((i) => `> [${i.name}, ${i.media_type}, ${i.size_bytes} bytes]`),
      ];
    case "assistant_text":
      // A run's later texts start with the blank line that parts them from the earlier.
      return item.text.replace(/^\n+|\n+$/g, "").split("\n");
    case "tool_call": {
      const call = `• ${item.tool_name} (${item.kind}) ${clip(JSON.stringify(item.input))}`;
      if (!item.result) return [call, "  … no result yet"];
      const outcome = item.result.is_error ? "error" : "ok";
      const cut = item.result.truncated ? " (truncated)" : "";
      return [call, `  ${outcome}${cut}: ${clip(item.result.content)}`];
    }
    case "permission": {
      const asked = `? permission for ${item.tool_name} (request ${item.request_id})`;
      if (!item.answer) return [`${asked}: waiting`];
      const { decision, by, message } = item.answer;
      return [`${asked}: ${decision} by ${by}${message ? `: ${clip(message)}` : ""}`];
    }
    case "user_input": {
      // The user's next message, written into the live run: quoted as a message is.
      const images = item.image_count > 0 ? [`> [${item.image_count} image(s)]`] : [];
      return [...item.text.split("\n").map((line) => `> ${line}`), ...images];
    }
    case "control": {
      const to = [
        ...(item.model === null ? [] : [`model ${item.model}`]),
        ...(item.permission_mode === null ? [] : [`permission mode ${item.permission_mode}`]),
      ];
      return [`⇄ switched to ${to.join(", ")}`];
    }
    case "run_end": {
      const code = item.error_code ? ` (${item.error_code})` : "";
      const error = item.error ? `: ${clip(item.error)}` : "";
      return [`■ ${item.status}${code} · ${cost(item.cost_usd)}${error}`];
    }
  }
}

/** Prints the items on stdout as they come, a blank line between runs. */
export async function printConversation(
  out: Output,
  items: AsyncIterable<ConversationItem>,
): Promise<void> {
  let first = true;
  for await (const item of items) {
    if (item.type === "user_message" && !first) out.stdout.write("\n");
    first = false;
    for (const line of conversationLines(item)) out.stdout.write(`${line}\n`);
  }
}
