// An agent's separate messages are separate paragraphs: joined as they came, "Writing the file."
// and "Done." would read "Writing the file.Done.". So the first text of each new message in a
// scope (the main thread, or one subagent) brings the line breaks that make a blank line between
// it and the scope's earlier text, counting those the texts already have.

const BLANK_LINE = 2;

function trailingNewlines(text: string): number {
  let n = 0;
  while (n < BLANK_LINE && text[text.length - 1 - n] === "\n") n++;
  return n;
}

function leadingNewlines(text: string): number {
  let n = 0;
  while (n < BLANK_LINE && text[n] === "\n") n++;
  return n;
}

export class MessageJoiner {
  /** Per scope: the message whose text came last, and the end of the scope's text so far. */
  private readonly scopes = new Map<string, { message: string; tail: string }>();

  /** Whether any text has been joined in the scope. */
  has(scope: string): boolean {
    return this.scopes.has(scope);
  }

  /** `text` (not empty) of message `messageId` in `scope`, as it continues the scope's text. */
  join(scope: string, messageId: string, text: string): string {
    const last = this.scopes.get(scope);
    if (last === undefined) {
      this.scopes.set(scope, { message: messageId, tail: text.slice(-BLANK_LINE) });
      return text;
    }
    const separator =
      last.message === messageId
        ? ""
        : "\n".repeat(
            Math.max(0, BLANK_LINE - trailingNewlines(last.tail) - leadingNewlines(text)),
          );
    // Only the end is kept: a long text is never copied for it.
    last.message = messageId;
    last.tail = (text.length >= BLANK_LINE ? text : last.tail + separator + text).slice(
      -BLANK_LINE,
    );
    return separator + text;
  }
}
