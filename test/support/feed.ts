// Feed positions (the SSE `id:` of GET /v1/events) are opaque to clients; the tests know their
// form, `<xid>-<id>` (or `0`), and order them as the server does: by xid, then id.

const parts = (position: string): [bigint, bigint] => {
  const [xid = "0", id = "0"] = position.split("-");
  return [BigInt(xid), BigInt(id)];
};

/** A sort comparator of feed positions, in the feed's order. */
export function byPosition(a: string, b: string): number {
  const [ax, ai] = parts(a);
  const [bx, bi] = parts(b);
  if (ax !== bx) return ax < bx ? -1 : 1;
  return ai === bi ? 0 : ai < bi ? -1 : 1;
}
