import { eq } from "drizzle-orm";
import type { Logger } from "../log.js";
import type { Database } from "../store/db.js";
import { countKeys, findKeyByHash, insertKey } from "../store/keys.js";
import { apiKeys } from "../store/schema.js";
import { displayPrefix, hashKey, issueKey } from "./keys.js";

/**
 * Makes sure someone can get in: `AGENT_BRIDGE_API_KEY` becomes an admin key, and a server that
 * has no key at all makes one. Returns that new key, for the caller to show once.
 */
/** Its configuration section: who may call the API. */
export interface AuthConfig {
  /** "none" only on a loopback address. */
  mode: "keys" | "none";
  /** A key made an admin key at start-up (containers, CI). */
  apiKey: string | undefined;
  /** Whether /openapi.json is served without a key (/docs needs it). */
  publicOpenApi: boolean;
  /** Whether /metrics is served without a key (else it needs an admin key). */
  publicMetrics: boolean;
  requestsPerMinute: number;
}

export async function prepareKeys(
  db: Database,
  config: { auth: AuthConfig },
  logger: Logger,
): Promise<string | undefined> {
  if (config.auth.mode === "none") return undefined;
  const { apiKey } = config.auth;
  if (apiKey) {
    const hash = hashKey(apiKey);
    const existing = await findKeyByHash(db, hash);
    if (!existing) {
      await insertKey(db, {
        name: "AGENT_BRIDGE_API_KEY",
        admin: true,
        hash,
        prefix: displayPrefix(apiKey),
      });
    } else if (existing.revokedAt) {
      logger.warn("AGENT_BRIDGE_API_KEY names a revoked key; it stays revoked", {
        key_id: existing.id,
      });
    } else if (!existing.admin) {
      await db.update(apiKeys).set({ admin: true }).where(eq(apiKeys.id, existing.id));
    }
    return undefined;
  }
  if ((await countKeys(db)) > 0) return undefined;
  const { key } = await issueKey(db, { name: "first-start admin", admin: true });
  return key;
}
