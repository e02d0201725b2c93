// Preloaded into the server by the bench (`node --expose-gc --import bench/gc-probe.mjs`): on
// SIGUSR2 it collects garbage and writes process.memoryUsage() to BENCH_MEMORY_FILE, so that
// memory is compared after a full collection rather than wherever the collector happened to be.
import { writeFileSync } from "node:fs";

const file = process.env.BENCH_MEMORY_FILE;
if (file && typeof globalThis.gc === "function") {
  process.on("SIGUSR2", () => {
    globalThis.gc();
    writeFileSync(file, JSON.stringify(process.memoryUsage()));
  });
}
