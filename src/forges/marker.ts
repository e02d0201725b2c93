// What the bridge writes into every comment or note it posts on a forge, so that it can tell its
// own replies from what a person wrote: a reply that quotes the prompt (`@agent-bridge …`) must
// never trigger another run. Invisible in rendered Markdown on GitHub and GitLab.

export const REPLY_MARKER = "<!-- agent-bridge -->";

/** Whether a comment's text carries the bridge's marker: one of its own replies. */
export const carriesMarker = (text: string): boolean => text.includes(REPLY_MARKER);
