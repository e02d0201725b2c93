import type { BridgeEvent } from "../events.js";
import type { CallRefusal } from "../gateway/admission.js";
import type { RunAccess } from "../gateway/server.js";
import { errorText } from "../log.js";
import type { SandboxGateway } from "../process/sandbox.js";
import type { AgentRunRequest, RunContext } from "./agent.js";
import { bypassProxyFor } from "./child-env.js";

// A run whose CLI calls its model API through the bridge's gateway (src/gateway/), as every
// back-end's does when the operator gave its credential: the CLI gets the gateway's address and a
// token of the run's own, in the variable the operator's credential came from, and never that
// credential.

/** The model gateway as a back-end uses it. */
export interface GatewayAccess {
  /** The operator's credential variable: /readyz names it, the CLI gets its run's token in it. */
  variable: string;
  /**
   * The API's address at the gateway and a token for the run, good until it is closed; the
   * gateway refuses its calls past `maxBudgetUsd`, the run's own cap.
   */
  open(runId: string, maxBudgetUsd: number | null): Promise<RunAccess>;
}

/**
 * The run's batches, its CLI (`run`, given its environment and its access: the API's address at
 * the gateway, and the token a sandbox needs for its proxy) holding the run's own token, which is
 * worthless from the run's completion on: the CLI has given its outcome, and what its process
 * group does on its way out (a command the agent left in the background) spends nothing. A run
 * that failed after the gateway refused one of its calls (its budget, its own cap, its key's model
 * list) ends with the refusal's code and words, whatever the CLI made of the API's error. A gateway
 * that gives no access fails the run (`failed`).
 */
export async function* throughGateway(
  gateway: GatewayAccess,
  env: Record<string, string>,
  request: AgentRunRequest,
  context: RunContext,
  run: (env: Record<string, string>, access: RunAccess) => AsyncGenerator<BridgeEvent[]>,
  failed: (cause: Error) => AsyncGenerator<BridgeEvent[]>,
): AsyncGenerator<BridgeEvent[]> {
  let access: RunAccess;
  try {
    access = await gateway.open(context.runId, request.settings.maxBudgetUsd);
  } catch (err) {
    context.logger.error("the model gateway gave the run no access", { error: errorText(err) });
    yield* failed(err as Error);
    return;
  }
  try {
    const own = bypassProxyFor(
      { ...env, [gateway.variable]: access.token },
      new URL(access.baseUrl).hostname,
    );
    for await (const batch of run(own, access)) {
      if (!batch.some((event) => event.type === "completion")) {
        yield batch;
        continue;
      }
      const refusal = access.refusal();
      access.close();
      // Its calls are charged to its key before its end is recorded: the key's next run sees it.
      await access.recorded();
      yield refusal ? batch.map((event) => refused(event, refusal)) : batch;
    }
  } finally {
    access.close();
  }
}

/** The completion of a run that failed for the gateway's refusal says so. */
function refused(event: BridgeEvent, refusal: CallRefusal): BridgeEvent {
  if (event.type !== "completion" || event.status !== "failed") return event;
  return { ...event, is_error: true, error: refusal.message, error_code: refusal.code };
}

/** The gateway as the run's sandbox reaches it: its socket, served on the gateway's port. */
export function sandboxGateway(access: RunAccess): SandboxGateway {
  return {
    token: access.token,
    socket: access.socket,
    port: Number(new URL(access.baseUrl).port),
  };
}
