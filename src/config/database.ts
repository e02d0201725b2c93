import { z } from "zod";
import { int } from "../env-fields.js";
import type { DatabaseTarget } from "../store/db.js";

// Which database: a Postgres server, else the embedded one under the data dir.

export const databaseEnv = {
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, { error: "expected a postgres:// or postgresql:// URL" })
    .optional(),
  /**
   * Connections each instance may open to Postgres, besides the one it LISTENs on and the one its
   * runs' event logs are written on.
   */
  AGENT_BRIDGE_DB_POOL_SIZE: int(2, 1000).default(10),
};

export interface DatabaseConfig {
  /** Unset: the embedded PGlite database under `dataDir`. */
  databaseUrl: string | undefined;
  databasePoolSize: number;
}

export function databaseSection(e: z.infer<z.ZodObject<typeof databaseEnv>>): DatabaseConfig {
  return { databaseUrl: e.DATABASE_URL, databasePoolSize: e.AGENT_BRIDGE_DB_POOL_SIZE };
}

/** The database the configuration names: a Postgres server, else the embedded one. */
export function databaseTarget(
  config: DatabaseConfig & { dataDir: string; runs: { dbOutageBoundMs: number } },
): DatabaseTarget {
  return config.databaseUrl
    ? {
        kind: "postgres",
        url: config.databaseUrl,
        poolSize: config.databasePoolSize,
        outageBoundMs: config.runs.dbOutageBoundMs,
      }
    : { kind: "pglite", dataDir: config.dataDir };
}
