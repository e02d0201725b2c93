import { readFileSync } from "node:fs";
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

/** A file holding one JSON object (an output schema): read when the option is parsed. */
export function jsonObjectFile(path: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new InvalidArgumentError(`expected a file of JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new InvalidArgumentError("expected a file holding a JSON object");
  }
  return value as Record<string, unknown>;
}
