// Summarises a .cpuprofile (from `npm run bench -- --profile`): the functions with the most
// self time, and self time per file. Usage:
//   node bench/profile-top.mjs <file.cpuprofile> [n] [--from SECONDS]
// `--from` skips the samples before that many seconds into the profile (e.g. the server's start).
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: { from: { type: "string", default: "0" } },
});
const [file, n = "25"] = positionals;
const from = Number(values.from) * 1e6;
const profile = JSON.parse(readFileSync(file, "utf8"));
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const self = new Map();
const dt = profile.timeDeltas;
let at = 0;
for (let i = 0; i < profile.samples.length; i++) {
  at += dt[i] ?? 0;
  if (at < from) continue;
  self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + (dt[i] ?? 0));
}
const total = [...self.values()].reduce((a, b) => a + b, 0);
const fn = new Map();
const files = new Map();
for (const [id, us] of self) {
  const { callFrame: f } = byId.get(id);
  const where = f.url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*\/main\//, "");
  const key = `${f.functionName || "(anonymous)"}  ${where}:${f.lineNumber + 1}`;
  fn.set(key, (fn.get(key) ?? 0) + us);
  const short = where || f.functionName;
  files.set(short, (files.get(short) ?? 0) + us);
}
const pct = (us) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
const top = (map) =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, Number(n))
    .map(([k, us]) => `${pct(us)}  ${k}`)
    .join("\n");
console.log(
  `total ${(total / 1e6).toFixed(2)} s sampled\n\nself time by function:\n${top(fn)}\n\nself time by file:\n${top(files)}`,
);
