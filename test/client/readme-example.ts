import { createClient } from "agent-bridge/client";

// The server, and the API key it printed at its first start (or one from `agent-bridge keys create`).
const client = createClient({
  baseUrl: process.env.AGENT_BRIDGE_URL ?? "http://127.0.0.1:8787",
  key: process.env.AGENT_BRIDGE_KEY,
});
const session = await client.createSession({ title: "readme" });

for await (const event of client.stream(session.id, "Say hello")) {
  if (event.type === "text_delta") process.stdout.write(event.text);
  if (event.type === "status") console.error(event.message);
  if (event.type === "completion") console.log(`\n${event.status}, $${event.cost_usd}`);
}
