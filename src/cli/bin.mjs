#!/usr/bin/env node
// The `agent-bridge` command. The project runs from source (as `npm start` does, through tsx),
// so this registers tsx's loader and starts the TypeScript entry point in the same process.
import { register } from "tsx/esm/api";

register();
const { run } = await import("./main.ts");
await run();
