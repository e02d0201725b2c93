// Each tenant (API key) runs its agents as a user id and a group id of its own, both made from the
// key's fixed number n (0 when auth is off): uid = uidBase + n, gid = gidBase + n. Neither needs a
// passwd or group entry: setpriv sets the numbers, and the kernel compares nothing else. The
// ranges are the operator's to choose (AGENT_BRIDGE_TENANT_UID_BASE, _GID_BASE, _MAX_TENANTS); what
// is checked at start-up is that every id in them is one the kernel takes and belongs to nobody
// who must stay apart from the agents: root, the server, the agent user.

/** The highest id the kernel takes: (uid_t)-1, one more, means "unchanged" to setresuid. */
export const MAX_ID = 4_294_967_294;

export interface TenantIdRange {
  uidBase: number;
  gidBase: number;
  /** The highest tenant number the ranges hold (keys ever made: numbers are never reused). */
  maxTenants: number;
}

/** Who the ranges must leave out: an id of root's, the server's, the agent user's. */
export interface ReservedIds {
  uids: Record<string, number>;
  gids: Record<string, number>;
}

/** A key whose number lies beyond the configured ranges: its agents cannot get ids of their own. */
export class TenantIdsExhaustedError extends Error {
  readonly code = "tenant_ids_exhausted";
  constructor(tenantNumber: number, maxTenants: number) {
    super(
      `the key's tenant number ${tenantNumber} is over AGENT_BRIDGE_MAX_TENANTS (${maxTenants}): its agents have no user id of their own; raise it`,
    );
  }
}

/** Why `range` cannot be used beside `reserved`: one line for the operator; undefined when it can. */
export function tenantIdRangeRefusal(
  range: TenantIdRange,
  reserved: ReservedIds,
): string | undefined {
  const ranges = [
    {
      kind: "user",
      base: range.uidBase,
      variable: "AGENT_BRIDGE_TENANT_UID_BASE",
      ids: reserved.uids,
    },
    {
      kind: "group",
      base: range.gidBase,
      variable: "AGENT_BRIDGE_TENANT_GID_BASE",
      ids: reserved.gids,
    },
  ];
  for (const { kind, base, variable, ids } of ranges) {
    const last = base + range.maxTenants;
    if (last > MAX_ID) {
      return `${variable} (${base}) + AGENT_BRIDGE_MAX_TENANTS (${range.maxTenants}) is ${last}, over the highest ${kind} id ${MAX_ID}; lower either`;
    }
    for (const [who, id] of Object.entries(ids)) {
      if (id >= base && id <= last) {
        return `${variable}: the tenants' ${kind} ids ${base}-${last} take in ${id}, ${who}'s; choose a range clear of it`;
      }
    }
  }
  return undefined;
}

/** The user and group ids of tenant `n`'s agents. */
export function tenantIds(range: TenantIdRange, n: number): { uid: number; gid: number } {
  if (n > range.maxTenants) throw new TenantIdsExhaustedError(n, range.maxTenants);
  return { uid: range.uidBase + n, gid: range.gidBase + n };
}
