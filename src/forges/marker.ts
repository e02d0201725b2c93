// Every body the bridge posts on a forge carries this hidden line (an HTML comment: Markdown on
// GitHub and GitLab shows nothing of it), so that a trigger can tell the bridge's own comments
// from a person's and never answer itself.
export const REPLY_MARKER = "<!-- agent-bridge -->";
