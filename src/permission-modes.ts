// The permission modes a session can run in, as plain values: the command line lists them in its
// help without loading the API's schemas, which settings.ts builds its enum of them into.
export const PERMISSION_MODES = [
  "default",
  "acceptEdits",
  "auto",
  "plan",
  "dontAsk",
  "bypassPermissions",
  "dangerously-skip-permissions",
] as const;
