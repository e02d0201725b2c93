import { stat } from "node:fs/promises";
import type { Logger } from "../../log.js";
import { commandAs } from "../agent-user.js";
import {
  type AgentLabel,
  AgentNotFoundError,
  AgentSpawnError,
  type RunnerError,
  WorkDirNotFoundError,
} from "../errors.js";
import type { RunCgroup } from "../run-limits.js";
import type { Launch, Sandbox } from "../sandbox.js";
import { type SpawnedProcess, spawnProcess } from "../spawner.js";
import type { AgentCommand } from "./agent-command.js";
import type { DriverConfig } from "./driver-config.js";

// Starting a run's CLI for the driver (./drive.ts): in its sandbox, as its user, in its cgroups,
// with the run named in its telemetry; or why it could not start, as the run's error.

/** A started CLI, with the cgroups it runs in (when the run has limits). */
export interface StartedChild {
  child: SpawnedProcess;
  cgroup: RunCgroup | undefined;
}

/**
 * Starts `command`; when it cannot start, its cgroups are gone already, the operator's log says
 * why, and the run's error is returned.
 */
export async function startChild(
  command: AgentCommand,
  config: DriverConfig,
  log: Logger,
): Promise<StartedChild | { failure: RunnerError }> {
  let cgroup: RunCgroup | undefined;
  try {
    const env = config.runId ? withRunResource(command.env, config.runId) : command.env;
    const started = await launch(command, env, config.sandbox);
    let [file, args] = [started.bin, started.args];
    if (config.limits) {
      cgroup = await config.limits.open(config.runId);
      [file, args] = cgroup.enter(file, args);
    }
    const child = await spawnProcess(file, args, {
      cwd: command.cwd,
      env: { ...env, ...started.env },
      dirs: started.dirs,
    });
    return { child, cgroup };
  } catch (err) {
    await cgroup?.remove();
    const failure = await spawnFailure(err as NodeJS.ErrnoException, command.label, command.cwd);
    // The client's completion names no server path; the operator's log does.
    log.error(`could not start the ${command.label.name} CLI`, {
      bin: command.bin,
      cwd: command.cwd,
      error: (err as Error).message,
    });
    return { failure };
  }
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

async function spawnFailure(err: NodeJS.ErrnoException, label: AgentLabel, cwd: string) {
  if (err.code === "ENOENT") {
    // spawn says ENOENT for a missing cwd too.
    return (await isDirectory(cwd)) ? new AgentNotFoundError(label) : new WorkDirNotFoundError(cwd);
  }
  return new AgentSpawnError(label, err);
}

/** The command line that starts `command`: in its sandbox, as its user, or as it is. */
async function launch(
  command: AgentCommand,
  env: Record<string, string>,
  sandbox?: Sandbox,
): Promise<Launch> {
  const { bin, args, runAs } = command;
  if (sandbox) {
    return sandbox.command({
      bin,
      args,
      cwd: command.cwd,
      env,
      ...(runAs ? { runAs } : {}),
      ...(command.reach ? { reach: command.reach } : {}),
    });
  }
  const [file, argv] = runAs ? commandAs(runAs, bin, args) : [bin, args];
  return { bin: file, args: argv, dirs: [], env: {} };
}

/**
 * The child's environment with the run's id added to the OpenTelemetry resource attributes the
 * operator set: the CLI's own telemetry (and any instrumented tool it runs) then names the run.
 */
function withRunResource(env: Record<string, string>, runId: string): Record<string, string> {
  const own = `agent_bridge.run_id=${runId}`;
  const set = env.OTEL_RESOURCE_ATTRIBUTES;
  return { ...env, OTEL_RESOURCE_ATTRIBUTES: set ? `${set},${own}` : own };
}
