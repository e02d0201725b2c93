import { createRequire } from "node:module";
import "../../src/app.js";
import { loadConfig } from "../../src/config.js";
import { bareCompletion } from "../../src/events.js";
import { silentLogger } from "../../src/log.js";
import { startTracing } from "../../src/telemetry/start-tracing.js";

// Run as a process of its own (`node --import tsx`), with the environment a server would have:
// loads the app's modules and starts tracing as src/index.ts does, traces one run if tracing is
// on, and prints the OpenTelemetry packages the process loaded (the SDK's are CommonJS, so they
// are in require's cache once loaded) as a JSON array.

const tracing = await startTracing(loadConfig(), silentLogger);
const run = tracing.startRun({
  runId: "probe-run",
  sessionId: "probe-session",
  agent: "claude",
  model: null,
  trigger: "api",
  parent: undefined,
});
run?.observe(bareCompletion("succeeded", ""));
await tracing.shutdown(10_000);

const packages = Object.keys(createRequire(import.meta.url).cache)
  .map((path) => /node_modules\/(@opentelemetry\/[^/]+)\//.exec(path)?.[1])
  .filter((name): name is string => name !== undefined);
process.stdout.write(JSON.stringify([...new Set(packages)]));
