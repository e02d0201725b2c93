import { type Command, InvalidArgumentError } from "commander";
import { type AgentBridgeClient, createClient } from "../client/index.js";

// The options every command that talks to a server shares (--url, --key), and the parsers of the
// options' values.

export interface GlobalOptions {
  url: string;
  key?: string;
}

/** A client of the server the command's --url and --key name. */
export function clientOf(command: Command): AgentBridgeClient {
  const { url, key } = command.optsWithGlobals<GlobalOptions>();
  return createClient({ baseUrl: url, ...(key ? { key } : {}) });
}

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected a whole number");
  return n;
}
