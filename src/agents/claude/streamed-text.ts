import type { BridgeEvent } from "../../events.js";
import { MessageJoiner } from "../message-text.js";

// The text and thinking of each API message, as the stream's deltas and the assistant lines'
// whole blocks carry them. With --include-partial-messages the CLI streams deltas and then
// repeats each finished block whole: the whole block only contributes what the deltas did not
// already carry (all of it when none came), so the same text is never emitted twice. A message
// is known by its id, else by the current message of its scope ("" = the main thread, else the
// subagent's tool use id).

/** What one message has streamed on one channel, and how much of it whole blocks have matched. */
interface Streamed {
  text: string;
  consumed: number;
}

type Channel = "text" | "thinking";

export class StreamedText {
  /** Current message id of each scope. */
  private readonly currentMessage = new Map<string, string>();
  private readonly messages = new Map<string, Record<Channel, Streamed>>();
  private readonly joiner = new MessageJoiner();

  /** A message starts in `scope`: the whole blocks of its previous one have all arrived. */
  start(scope: string, id: string | undefined): void {
    const previous = this.currentMessage.get(scope);
    if (previous !== undefined && previous !== id) this.messages.delete(previous);
    if (id !== undefined) this.currentMessage.set(scope, id);
  }

  /** The key of a message: its id, else the current message of its scope. */
  key(scope: string, id: string | undefined): string {
    return id ?? this.currentMessage.get(scope) ?? `scope:${scope}`;
  }

  /** A delta streamed: it is emitted as it is, and remembered to match the whole block. */
  delta(key: string, channel: Channel, text: string): void {
    this.state(key)[channel].text += text;
  }

  /** The part of a whole block that the deltas have not already emitted. */
  unstreamed(key: string, channel: Channel, whole: string): string {
    const streamed = this.state(key)[channel];
    const rest = streamed.text.slice(streamed.consumed);
    if (rest.length === 0) return whole;
    if (whole.startsWith(rest)) {
      streamed.consumed = streamed.text.length;
      return whole.slice(rest.length);
    }
    if (rest.startsWith(whole)) {
      streamed.consumed += whole.length;
      return "";
    }
    // The deltas and the block disagree: what streamed stands, nothing is sent twice.
    streamed.consumed = streamed.text.length;
    return "";
  }

  /**
   * Text of a message: the user's (`text_delta`) on the main thread, else a subagent's. A new
   * message's text starts a new paragraph (message-text.ts).
   */
  event(messageKey: string, text: string, parent: string | null): BridgeEvent {
    return parent === null
      ? { type: "text_delta", text: this.joiner.join("", messageKey, text) }
      : {
          type: "subagent_text_delta",
          text: this.joiner.join(parent, messageKey, text),
          parent_tool_use_id: parent,
        };
  }

  /** Whether the main thread has said anything yet. */
  get mainSpoke(): boolean {
    return this.joiner.has("");
  }

  private state(key: string): Record<Channel, Streamed> {
    let state = this.messages.get(key);
    if (!state) {
      state = { text: { text: "", consumed: 0 }, thinking: { text: "", consumed: 0 } };
      this.messages.set(key, state);
    }
    return state;
  }
}
