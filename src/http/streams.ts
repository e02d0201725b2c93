import { DomainError } from "../errors.js";
import type { Principal } from "../principal.js";

/** How long a client refused a stream is told to wait before it tries again. */
const RETRY_AFTER_SECONDS = 5;

/**
 * Open event streams per API key, so that one key's idle streams cannot exhaust the server. In
 * memory, which is right for one server process: a stream lives and dies with it.
 */
export class StreamLimiter {
  private readonly open = new Map<string, number>();

  constructor(readonly maxPerKey: number) {}

  /** Takes a place for a stream of the key, or undefined when it has none left. */
  acquire(key: string): (() => void) | undefined {
    const n = this.open.get(key) ?? 0;
    if (n >= this.maxPerKey) return undefined;
    this.open.set(key, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.open.get(key) ?? 1) - 1;
      if (left > 0) this.open.set(key, left);
      else this.open.delete(key);
    };
  }
}

/**
 * A place for one more event stream of the caller's key (429 `too_many_streams` beyond the
 * limit); the stream gives it back when it closes, however it closes.
 */
export function admitStream(streams: StreamLimiter, principal: Principal): () => void {
  const release = streams.acquire(principal.keyId ?? "anonymous");
  if (release) return release;
  throw new DomainError(
    "too_many_streams",
    `this key has ${streams.maxPerKey} event streams open (AGENT_BRIDGE_MAX_STREAMS_PER_KEY); close one or retry later`,
    { retryAfterSeconds: RETRY_AFTER_SECONDS },
  );
}
