import { createHash, randomBytes } from "node:crypto";
import type { CallAdmission } from "./admission.js";

// The credentials made for runs: an opaque token each run's CLI presents to the gateway in place
// of the operator's. Only a token's hash is kept, and only in this process's memory, because only
// this process can be asked: the run's CLI reaches the gateway of the instance that executes the
// run, on its loopback address, and no other. A table in Postgres would add a round trip to every
// call and would outlive the instance, where a token dying with its instance is the point: a CLI
// that a crashed instance left behind has nothing left to spend with. (The metering, which every
// instance shares, is in Postgres: src/store/model-calls.ts.)

/** What a token stands for. */
export interface RunGrant {
  runId: string;
  /** Whether a metered call of the run's may go (its own cap, its key's budget and models). */
  admit: CallAdmission;
}

/** A token as handed to a run, once. */
export interface IssuedToken {
  token: string;
  /** Makes the token worthless from now on. */
  revoke(): void;
}

const hash = (token: string) => createHash("sha256").update(token).digest("base64url");

export class RunTokens {
  private readonly byHash = new Map<string, RunGrant>();

  issue(grant: RunGrant): IssuedToken {
    // 256 random bits, marked as the bridge's so that one found in a log is recognised.
    const token = `abrun_${randomBytes(32).toString("base64url")}`;
    const key = hash(token);
    this.byHash.set(key, grant);
    return { token, revoke: () => void this.byHash.delete(key) };
  }

  /** The grant of a live token; undefined for a revoked or made-up one. */
  find(token: string): RunGrant | undefined {
    // A lookup by hash: nothing to learn from how long a wrong guess takes.
    return this.byHash.get(hash(token));
  }
}
