import type { HookRow } from "../store/schema.js";
import { DEFAULT_API_URLS, type ForgeAccess } from "./api.js";
import { FORGES, type Forge } from "./delivery.js";

// Which forge a hook's deliveries come from and, with its token, how to call that forge's API.

export const forgeOf = (hook: Pick<HookRow, "forge">): Forge | null =>
  (FORGES as readonly string[]).includes(hook.forge ?? "") ? (hook.forge as Forge) : null;

export const apiUrlOf = (hook: Pick<HookRow, "forge" | "forgeApiUrl">): string | null => {
  const forge = forgeOf(hook);
  return forge && (hook.forgeApiUrl ?? DEFAULT_API_URLS[forge]);
};

/** The hook's access to its forge's API, or null without a forge or a token. */
export function forgeAccessOf(
  hook: Pick<HookRow, "forge" | "forgeApiUrl" | "forgeToken">,
): ForgeAccess | null {
  const forge = forgeOf(hook);
  const apiUrl = apiUrlOf(hook);
  if (!forge || !apiUrl || !hook.forgeToken) return null;
  return { forge, apiUrl, token: hook.forgeToken };
}
