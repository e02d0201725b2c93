// What a message asks for when its session has a live run: `reject` (409 `session_busy`, the
// default) or `queue` (it waits its turn, behind the session's live run and any message queued
// before it). Asked in the body (`when_busy`) or as the preference `Prefer: when-busy=queue`
// (RFC 7240); the body wins when both say.

export type WhenBusy = "reject" | "queue";

/** The preference's name in `Prefer` and `Preference-Applied`. */
export const WHEN_BUSY_PREFERENCE = "when-busy";

/**
 * The `when-busy` preference of a `Prefer` header, if it names a known value. Preferences are
 * comma-separated `name[=value][;param…]`, names case-insensitive, values optionally quoted; an
 * unknown value is ignored, as RFC 7240 has a server do with a preference it does not understand.
 */
export function preferredWhenBusy(prefer: string | undefined): WhenBusy | undefined {
  if (!prefer) return undefined;
  for (const preference of prefer.split(",")) {
    const [nameValue = ""] = preference.split(";");
    const at = nameValue.indexOf("=");
    if (at < 0) continue;
    const name = nameValue.slice(0, at).trim().toLowerCase();
    const value = nameValue
      .slice(at + 1)
      .trim()
      .replace(/^"(.*)"$/, "$1")
      .toLowerCase();
    if (name === WHEN_BUSY_PREFERENCE && (value === "reject" || value === "queue")) return value;
  }
  return undefined;
}

/**
 * Whether the message waits its turn, and the preference applied (for `Preference-Applied`) when
 * it was the `Prefer` header that said so.
 */
export function whenBusy(
  body: WhenBusy | undefined,
  prefer: string | undefined,
): { queue: boolean; applied: string | null } {
  if (body !== undefined) return { queue: body === "queue", applied: null };
  const preferred = preferredWhenBusy(prefer);
  if (preferred === undefined) return { queue: false, applied: null };
  return { queue: preferred === "queue", applied: `${WHEN_BUSY_PREFERENCE}=${preferred}` };
}
