#!/usr/bin/env node
// A tiny MCP server over stdio for tests, in plain JSON-RPC (one JSON message a line): it offers
// one tool, `echo`, that returns its `text` argument. `MCP_ECHO_TOOL` renames the tool, so that a
// test can tell which of several configured servers the CLI started.
import { createInterface } from "node:readline";

const tool = process.env.MCP_ECHO_TOOL || "echo";

function send(message) {
  process.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
}

function answer(method, params) {
  switch (method) {
    case "initialize":
      return {
        protocolVersion: params?.protocolVersion ?? "2024-11-05",
        capabilities: { tools: {} },
        serverInfo: { name: "mcp-echo", version: "1.0.0" },
      };
    case "tools/list":
      return {
        tools: [
          {
            name: tool,
            description: "Echoes its text back.",
            inputSchema: {
              type: "object",
              properties: { text: { type: "string" } },
              required: ["text"],
            },
          },
        ],
      };
    case "tools/call":
      return { content: [{ type: "text", text: String(params?.arguments?.text ?? "") }] };
    case "ping":
      return {};
    default:
      return undefined;
  }
}

createInterface({ input: process.stdin }).on("line", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  // Notifications (no id) need no answer.
  if (message.id === undefined || message.id === null) return;
  const result = answer(message.method, message.params);
  if (result === undefined) {
    send({ id: message.id, error: { code: -32601, message: `unknown method ${message.method}` } });
  } else {
    send({ id: message.id, result });
  }
});
