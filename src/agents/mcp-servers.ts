import { z } from "zod";

// The MCP servers sessions may use: the admin names them in a JSON file (AGENT_BRIDGE_MCP_CONFIG)
// in the CLI's own `mcpServers` format, the shape of a project's `.mcp.json`, read once at
// start-up; a session lists the names it wants, and each of its runs gets those alone.

/** A server's name: what a session asks for, and what the CLI names its tools after (mcp__<name>__…). */
export const MCP_SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const NAME_RULE = "letters, digits, '_' or '-', at most 64, starting with a letter or digit";

/** Text the CLI passes on to a process or a request: no NUL, which neither argv nor env can hold. */
const text = z.string().refine((s) => !s.includes("\u0000"), { error: "must not contain NUL" });
const textMap = z.record(z.string().min(1), text);

const StdioServer = z.strictObject({
  type: z.literal("stdio").optional(),
  command: text.min(1),
  args: z.array(text).optional(),
  env: textMap.optional(),
});

const RemoteServer = z.strictObject({
  type: z.enum(["sse", "http"]),
  url: z.url({ protocol: /^https?$/, error: "expected an http:// or https:// URL" }),
  headers: textMap.optional(),
});

export const McpServerConfig = z.union([StdioServer, RemoteServer], {
  error:
    'expected a stdio server {"command", "args"?, "env"?} or a remote one {"type": "sse" | "http", "url", "headers"?}',
});
export type McpServerConfig = z.infer<typeof McpServerConfig>;

/** Name -> server, as the admin's file configures them. */
export type McpCatalog = Readonly<Record<string, McpServerConfig>>;

const McpConfigFile = z.strictObject({
  mcpServers: z.record(z.string(), McpServerConfig).superRefine((servers, ctx) => {
    for (const name of Object.keys(servers)) {
      if (MCP_SERVER_NAME.test(name)) continue;
      ctx.addIssue({ code: "custom", path: [name], message: `a server name is ${NAME_RULE}` });
    }
  }),
});

/** The servers of the admin's file, or what is wrong with it (one line per problem). */
export function parseMcpConfig(content: string): { catalog: McpCatalog } | { problems: string[] } {
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch (err) {
    return { problems: [`not JSON: ${(err as Error).message}`] };
  }
  const parsed = McpConfigFile.safeParse(json);
  if (parsed.success) return { catalog: parsed.data.mcpServers };
  return {
    problems: parsed.error.issues.map((issue) =>
      issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message,
    ),
  };
}

/** The names of `wanted` the catalog has no server for. */
export function unknownMcpServers(catalog: McpCatalog, wanted: readonly string[]): string[] {
  return wanted.filter((name) => !Object.hasOwn(catalog, name));
}

/**
 * The CLI's `--mcp-config` JSON of just the servers named; throws naming one the catalog no
 * longer has (the admin's file changed since the session was made).
 */
export function mcpConfigOf(catalog: McpCatalog, names: readonly string[]): string {
  const [missing] = unknownMcpServers(catalog, names);
  if (missing !== undefined) {
    throw new Error(
      `the server's MCP configuration has no server named ${JSON.stringify(missing)}`,
    );
  }
  return JSON.stringify({ mcpServers: Object.fromEntries(names.map((n) => [n, catalog[n]])) });
}
