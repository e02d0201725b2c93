import { findBubblewrap } from "../../src/process/bubblewrap.js";
import { Sandbox } from "../../src/process/sandbox.js";

// The bridge's sandbox (src/process/sandbox.ts) for tests that start a CLI themselves, as the server
// would make it on this machine: none where bubblewrap does not work (the server then runs without
// one, AGENT_BRIDGE_SANDBOX=auto).

const found = findBubblewrap(process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin");

/** A sandbox that hides nothing of the server's (the tests' CLIs have nothing of it to hide). */
export const testSandbox: Sandbox | undefined =
  typeof found === "string"
    ? undefined
    : new Sandbox(found, { hidden: [], roots: [], tmpBytes: 64 * 1024 * 1024 });
