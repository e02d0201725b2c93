import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";

// The README's sections and code blocks, as the tests that run its examples read them.

const ROOT = resolve(import.meta.dirname, "../..");

/** The text of the README's `## <title>` section, up to the next `## ` heading. */
export async function readmeSection(title: string): Promise<string> {
  const readme = await readFile(join(ROOT, "README.md"), "utf8");
  const start = readme.indexOf(`\n## ${title}\n`);
  if (start < 0) throw new Error(`README has no "## ${title}" section`);
  const end = readme.indexOf("\n## ", start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

/** The bodies of the section's fenced blocks in this language, in order. */
export function codeBlocks(section: string, lang: string): string[] {
  const blocks: string[] = [];
  const fence = new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, "g");
  for (const match of section.matchAll(fence)) blocks.push(match[1] ?? "");
  return blocks;
}
