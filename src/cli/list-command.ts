import type { Command } from "commander";
import type { AgentBridgeClient } from "../client/index.js";
import { clientOf, positiveInt } from "./options.js";
import { printJson } from "./print.js";
import type { Output } from "./render.js";

/**
 * `<group> ls`: one page of a list, as a table (or JSON with `--json`), and on stderr the option
 * that gets the next page.
 */
export function listCommand<T>(
  out: Output,
  group: Command,
  description: string,
  print: (out: Output, rows: T[]) => void,
  fetchPage: (
    client: AgentBridgeClient,
    page: { limit: number; cursor?: string },
    options: Record<string, string | undefined>,
  ) => Promise<{ data: T[]; next_cursor: string | null }>,
): Command {
  return group
    .command("ls")
    .description(description)
    .option("--limit <n>", "how many (1 to 100)", positiveInt, 20)
    .option("--cursor <cursor>", "next page: the cursor the previous page printed")
    .option("--json", "print the page as JSON")
    .action(async (options, command: Command) => {
      const page = await fetchPage(
        clientOf(command),
        { limit: options.limit, ...(options.cursor ? { cursor: options.cursor } : {}) },
        options,
      );
      if (options.json) return printJson(out, page);
      print(out, page.data);
      if (page.next_cursor) out.stderr.write(`more: --cursor ${page.next_cursor}\n`);
    });
}
