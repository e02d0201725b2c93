import type { Command } from "commander";
import { PERMISSION_MODES } from "../permission-modes.js";
import type { PolicyOptions } from "./local-actions.js";
import type { Output } from "./render.js";

// Commands that act on the server's own database (same configuration as the server: DATABASE_URL
// or the embedded database under AGENT_BRIDGE_DATA_DIR) rather than through its API. They work
// while the server is down, which is how the first key of a fresh install is made. What they do
// (./local-actions.ts) is loaded when one of them runs: the server's configuration and database
// code (Drizzle, PGlite, postgres.js) were most of what every other command loaded, and took
// most of its start.
const actions = () => import("./local-actions.js");

/** The options of a key's policy (src/auth/policy.ts), shared by `keys create` and `keys update`. */
function withPolicyOptions(command: Command): Command {
  return command
    .option(
      "--permission-modes <modes>",
      `comma-separated modes its sessions may use (${PERMISSION_MODES.join(", ")}), or "default"`,
    )
    .option(
      "--work-roots <dirs>",
      'comma-separated dirs (inside AGENT_BRIDGE_ALLOWED_ROOTS) its sessions may work in, or "default"',
    )
    .option("--max-budget-usd <usd>", 'spending cap per calendar month (UTC), or "none"')
    .option(
      "--egress <hosts>",
      'comma-separated hosts its sandboxed agents may connect to (host, *.host, an address, or *; :port or 80 and 443), or "none"',
    )
    .option(
      "--models <models>",
      'comma-separated models its runs may call through the model gateway, or "any" (the default)',
    )
    .option(
      "--tool-rules <json>",
      'rules of its agents\' tool uses, as a JSON array (see docs/api.md#tool-rules), or "none"',
    )
    .option("--worktrees", "its sessions may use worktree mode (the default)")
    .option("--no-worktrees", "its sessions may not use worktree mode");
}

export function addLocalCommands(program: Command, out: Output): void {
  program
    .command("migrate")
    .description("bring the database's schema up to date (the server also does this at start-up)")
    .action(async () => (await actions()).migrate(out));

  const keys = program
    .command("keys")
    .description(
      "create, list and revoke API keys in the server's database (works while it is down)",
    );
  withPolicyOptions(
    keys
      .command("create")
      .description("make a key; prints it on stdout, this once (only its hash is stored)")
      .requiredOption("--name <name>", "what the key is for, e.g. ci")
      .option("--admin", "an admin key: sees every tenant and manages keys")
      .option("--json", "print the key with its record as JSON"),
  ).action(async (options: PolicyOptions & { name: string; admin?: boolean; json?: boolean }) =>
    (await actions()).createKey(options, out),
  );
  keys
    .command("list")
    .alias("ls")
    .description("list keys (without their secrets)")
    .action(async () => (await actions()).listKeysTable(out));
  withPolicyOptions(
    keys
      .command("update")
      .description("change a key's policy; options left out stay as they are")
      .argument("<id>", "the key's id (from keys list)"),
  ).action(async (id: string, options: PolicyOptions) =>
    (await actions()).updateKey(id, options, out),
  );
  keys
    .command("revoke")
    .description("revoke a key: it stops working at once")
    .argument("<id>", "the key's id (from keys list)")
    .action(async (id: string) => (await actions()).revokeKeyById(id, out));
}
