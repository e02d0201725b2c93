// The import rules `npm run check:imports` holds src/ to (dependency-cruiser). Folders import one
// way, top to bottom: index.ts/cli -> app.ts -> http -> hooks -> cluster -> runs -> agents ->
// worktrees -> gateway/auth -> process -> telemetry -> store -> net -> leaf files (log.ts, ...);
// a lower folder defines an interface or takes a function that a higher one implements and
// app.ts wires. The rules forbid the cycles; the order is what breaking one follows.
module.exports = {
  forbidden: [
    {
      name: "no-folder-cycles",
      comment:
        "These folders of src/ import each other, in the order listed (a type import counts too): " +
        "move what the lower one needs below it, or let it define an interface the higher one " +
        "implements. The files behind an arrow, src/store → src/agents for one: npm run " +
        "check:imports -- --output-type text | grep '^src/store/.* → src/agents/'",
      severity: "error",
      scope: "folder",
      from: { path: "^src/" },
      to: { circular: true },
    },
    {
      name: "no-file-cycles",
      comment:
        "These files of src/ import each other, in the order listed, and not by type imports " +
        "alone: which of them is evaluated first depends on which is imported first.",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true, dependencyTypesNot: ["type-only"] },
    },
  ],
  options: {
    // Only src/ is cruised: its imports of packages are not followed into node_modules.
    includeOnly: "^src/",
    // The sources import `./x.js` for `./x.ts` (NodeNext).
    enhancedResolveOptions: { extensions: [".ts", ".mjs", ".js"] },
    tsConfig: { fileName: "tsconfig.json" },
    // Type imports are seen (and marked type-only), not dropped as the compiled output drops them.
    tsPreCompilationDeps: true,
  },
};
