import type { BridgeEvent, CompletionEvent } from "../events.js";
import type { CallRefusal } from "../gateway/admission.js";
import type { RunAccess } from "../gateway/server.js";
import { errorText } from "../log.js";
import type { SandboxGateway } from "../process/sandbox-gateway.js";
import { type MeteredUsage, meteredSpend } from "../store/model-calls.js";
import type { AgentRunRequest, RunContext } from "./agent.js";
import { bypassProxyFor } from "./child-env.js";

// A run whose CLI calls its model API through the bridge's gateway (src/gateway/), as every
// back-end's does when the operator gave its credential: the CLI gets the gateway's address and a
// token of the run's own, in the variable the operator's credential came from, and never that
// credential.

/** The model gateway as a back-end uses it. */
export interface GatewayAccess {
  /** The variable the CLI gets its run's token in. */
  variable: string;
  /** Where the operator's credential came from: /readyz names it. */
  source: string;
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
      const at = batch.findIndex((event) => event.type === "completion");
      if (at < 0) {
        yield batch;
        continue;
      }
      const refusal = access.refusal();
      access.close();
      // What came in the same read as the outcome (the answer's last text) goes out first: it
      // waits for none of the statements below.
      if (at > 0) yield batch.slice(0, at);
      // Its calls are charged to its key before its end is recorded: the key's next run sees it.
      await access.recorded();
      const metered = await access.metered().catch((err) => {
        context.logger.error("could not read the run's metered calls", { error: errorText(err) });
        return undefined;
      });
      yield batch.slice(at).map((event) => {
        if (event.type !== "completion") return event;
        const spent = metered ? withMetered(event, metered) : event;
        return refusal ? refused(spent, refusal) : spent;
      });
    }
  } finally {
    access.close();
  }
}

/** The completion of a run that failed for the gateway's refusal says so. */
function refused(completion: CompletionEvent, refusal: CallRefusal): CompletionEvent {
  if (completion.status !== "failed") return completion;
  return { ...completion, is_error: true, error: refusal.message, error_code: refusal.code };
}

/**
 * A CLI that reported no cost (killed, crashed, cancelled before its result) did not report its
 * usage either: the run's are what its calls were metered at (its cost when each call's model had
 * a price). What a CLI did report stands.
 */
function withMetered(completion: CompletionEvent, metered: MeteredUsage): CompletionEvent {
  if (completion.cost_usd !== null) return completion;
  const { usage, costUsd } = meteredSpend(completion.usage, null, metered);
  return { ...completion, usage, cost_usd: costUsd };
}

/** The gateway as the run's sandbox reaches it: its socket, served on the gateway's port. */
export function sandboxGateway(access: RunAccess): SandboxGateway {
  return {
    token: access.token,
    socket: access.socket,
    port: Number(new URL(access.baseUrl).port),
  };
}
