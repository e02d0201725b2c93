import { describe, expect, it } from "vitest";
import {
  MAX_ID,
  TenantIdsExhaustedError,
  tenantIdRangeRefusal,
  tenantIds,
} from "../../src/process/tenant-ids.js";

// The tenants' uid and gid ranges are checked at start-up: every id in them one the kernel takes,
// and none of root's, the server's or the agent user's.

const range = { uidBase: 2_100_000_000, gidBase: 2_000_000_000, maxTenants: 1_000_000 };
const reserved = {
  uids: { root: 0, "the server": 0, "the agent user ab-agent": 999 },
  gids: { root: 0, "the server": 0, "the agent user ab-agent": 998 },
};

describe("the tenants' id ranges", () => {
  it("give tenant n base + n, up to the highest tenant number", () => {
    expect(tenantIdRangeRefusal(range, reserved)).toBeUndefined();
    expect(tenantIds(range, 0)).toEqual({ uid: 2_100_000_000, gid: 2_000_000_000 });
    expect(tenantIds(range, 7)).toEqual({ uid: 2_100_000_007, gid: 2_000_000_007 });
    expect(tenantIds(range, 1_000_000)).toEqual({ uid: 2_101_000_000, gid: 2_001_000_000 });
    expect(() => tenantIds(range, 1_000_001)).toThrow(TenantIdsExhaustedError);
    expect(() => tenantIds(range, 1_000_001)).toThrow(
      "the key's tenant number 1000001 is over AGENT_BRIDGE_MAX_TENANTS (1000000): its agents have no user id of their own; raise it",
    );
  });

  it("must fit in 32 bits, short of (uid_t)-1", () => {
    const top = { ...range, uidBase: MAX_ID - 1_000_000 };
    expect(tenantIdRangeRefusal(top, reserved)).toBeUndefined();
    expect(tenantIdRangeRefusal({ ...top, uidBase: top.uidBase + 1 }, reserved)).toBe(
      "AGENT_BRIDGE_TENANT_UID_BASE (4293967295) + AGENT_BRIDGE_MAX_TENANTS (1000000) is 4294967295, over the highest user id 4294967294; lower either",
    );
    expect(
      tenantIdRangeRefusal({ ...range, gidBase: 4_000_000_000, maxTenants: 300_000_000 }, reserved),
    ).toMatch(
      /^AGENT_BRIDGE_TENANT_GID_BASE \(4000000000\) \+ AGENT_BRIDGE_MAX_TENANTS \(300000000\) is 4300000000, over the highest group id/,
    );
  });

  it("must not take in root, the server or the agent user", () => {
    expect(tenantIdRangeRefusal({ ...range, uidBase: 900 }, reserved)).toBe(
      "AGENT_BRIDGE_TENANT_UID_BASE: the tenants' user ids 900-1000900 take in 999, the agent user ab-agent's; choose a range clear of it",
    );
    const server = { ...reserved, uids: { ...reserved.uids, "the server": 2_100_500_000 } };
    expect(tenantIdRangeRefusal(range, server)).toMatch(/take in 2100500000, the server's;/);
    expect(tenantIdRangeRefusal({ ...range, gidBase: 0 }, reserved)).toMatch(
      /^AGENT_BRIDGE_TENANT_GID_BASE: the tenants' group ids 0-1000000 take in 0, root's;/,
    );
    // The ids just beside a range are clear of it.
    expect(tenantIdRangeRefusal({ ...range, uidBase: 1000 }, reserved)).toBeUndefined();
    expect(
      tenantIdRangeRefusal({ ...range, uidBase: 900, maxTenants: 98 }, reserved),
    ).toBeUndefined();
  });
});
