import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";

// The README's and docs/ pages' sections and code blocks, as the tests that run their examples
// read them.

const ROOT = resolve(import.meta.dirname, "../..");

/**
 * The text of the heading `title` in `page` (a path from the repository's root, e.g.
 * "docs/api.md"), at whatever level, up to the next heading of the same or a higher level: a
 * section with its subsections. Lines inside fenced blocks are not headings.
 */
export async function docSection(page: string, title: string): Promise<string> {
  const lines = (await readFile(join(ROOT, page), "utf8")).split("\n");
  let start = -1;
  let level = 0;
  let fenced = false;
  for (const [i, line] of lines.entries()) {
    if (line.trimStart().startsWith("```")) fenced = !fenced;
    const heading = fenced ? null : /^(#{1,6}) (.*)$/.exec(line);
    if (!heading) continue;
    const depth = heading[1]?.length ?? 0;
    if (start < 0 && heading[2] === title) [start, level] = [i, depth];
    else if (start >= 0 && depth <= level) return lines.slice(start, i).join("\n");
  }
  if (start < 0) throw new Error(`${page} has no "${title}" heading`);
  return lines.slice(start).join("\n");
}

/** The bodies of the section's fenced blocks in this language, in order. */
export function codeBlocks(section: string, lang: string): string[] {
  const blocks: string[] = [];
  const fence = new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, "g");
  for (const match of section.matchAll(fence)) blocks.push(match[1] ?? "");
  return blocks;
}
