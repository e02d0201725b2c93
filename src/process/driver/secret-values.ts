import type { SandboxedCommand } from "../sandbox.js";

// What a run's lines must never carry out of the bridge (spans per event, which go to a
// collector): the credentials its CLI was given. A line can hold them: a tool's output is
// whatever the agent ran (`env`, `cat ~/.claude/.credentials.json`), and the system line echoes
// settings. The run's token (in the gateway's variable, and in the sandbox's proxy URL) and,
// without the gateway, the operator's key are in the CLI's environment, under names like these.

const SECRET_NAME = /KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|HEADERS|COOKIE/i;

/** The values of the command's environment that are credentials, and its gateway token. */
export function secretValues(command: SandboxedCommand): string[] {
  const values: string[] = [];
  for (const [name, value] of Object.entries(command.env)) {
    if (SECRET_NAME.test(name)) values.push(value);
    // A proxy's password, say (`http://user:secret@proxy:3128`).
    const password = urlPassword(value);
    if (password) values.push(password);
  }
  const gatewayToken = command.reach?.gateway?.token;
  if (gatewayToken) values.push(gatewayToken);
  return values.filter((v) => v.length > 0);
}

function urlPassword(value: string): string | undefined {
  if (!value.includes("@") || !value.includes("://")) return undefined;
  try {
    return decodeURIComponent(new URL(value).password) || undefined;
  } catch {
    return undefined;
  }
}
