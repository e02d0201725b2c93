// Apart from sandbox-start.ts, which reads the config: the config's schema reads these.

/** `AGENT_BRIDGE_SANDBOX`: on when bubblewrap works (`auto`), required (`on`), or not at all. */
export const SANDBOX_MODES = ["auto", "on", "off"] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];
