import { randomUUID } from "node:crypto";
import { type Clock, systemClock, type Timer } from "../clock.js";
import { errorText, type Logger } from "../log.js";
import { bootId } from "../process/groups.js";
import type { DeadInstance } from "../runs/cluster-port.js";
import type { Database } from "../store/db.js";
import {
  forgetReapedInstances,
  markReaped,
  reapCandidates,
  registerInstance,
  renewLease,
} from "../store/instances.js";
import { SERVER_VERSION } from "../version.js";

// This process as an instance on the database: its row, its lease, and the sweep that closes what
// dead instances left. Several processes may share one Postgres; none touches another's runs while
// that one holds its lease. An instance is dead when its lease has expired, or, on this host and
// boot, when its process is gone (a restart need not wait out its predecessor's lease). Only the
// CLI process groups of an instance whose process is gone are killed by another: an instance that
// is merely late (stopped, cut off) stops its own when it learns it was reaped.

export interface LeaseOptions {
  db: Database;
  logger: Logger;
  /** How long a lease lasts without renewal. */
  leaseMs: number;
  /** How often it is renewed, and dead instances looked for. */
  renewMs: number;
  /** The host this instance runs on (its name, or AGENT_BRIDGE_HOST_ID). */
  host: string;
  /**
   * Nothing else can use this database (the embedded one, behind its data dir's lock): every
   * other instance is dead.
   */
  exclusive: boolean;
  /** Closes the runs a dead instance left (`null`: those of versions before instances). */
  reap: (instance: DeadInstance | null) => Promise<void>;
  /** Another instance reaped this one (its lease had expired): its runs are closed elsewhere. */
  onLost: () => void;
  /** After each renewal: what a missed doorbell ring left waiting is looked at again. */
  onTick?: () => void;
  /** Times the renewals (the lease's expiry is the database's time). */
  clock?: Clock;
}

/** How long a reaped instance's row is kept, as a record. */
const KEEP_REAPED_MS = 24 * 3600_000;

export class InstanceLease {
  private current = randomUUID();
  private timer: Timer | undefined;
  private sweeping: Promise<void> | undefined;
  /** The last renewal failed: an outage is on. */
  private failing = false;
  private readonly boot = bootId();
  private readonly clock: Clock;

  constructor(private readonly opts: LeaseOptions) {
    this.clock = opts.clock ?? systemClock;
  }

  /** The host this instance runs on. */
  get host(): string {
    return this.opts.host;
  }

  /** This instance's id: the owner written on the runs it admits. */
  get id(): string {
    return this.current;
  }

  /** Registers this instance and closes what dead ones left, before any run is admitted. */
  async start(): Promise<void> {
    await this.register();
    await this.opts.reap(null);
    await this.sweep();
    this.timer = this.clock.setInterval(() => this.tick(), this.opts.renewMs);
    this.timer.unref();
  }

  /** Stops renewing and marks this instance's end (its runs are closed by then). */
  async stop(): Promise<void> {
    this.clock.clear(this.timer);
    await this.sweeping;
    await markReaped(this.opts.db, this.current);
  }

  private async register() {
    await registerInstance(
      this.opts.db,
      {
        id: this.current,
        host: this.host,
        bootId: this.boot,
        pid: process.pid,
        version: SERVER_VERSION,
      },
      this.opts.leaseMs,
    );
    this.opts.logger.info("instance registered", { instance_id: this.current, host: this.host });
  }

  /** One renewal and sweep at a time; a failure is logged, and the next tick tries again. */
  private async tick() {
    if (this.sweeping) return;
    this.sweeping = (async () => {
      try {
        if (!(await renewLease(this.opts.db, this.current, this.opts.leaseMs))) {
          this.opts.logger.error(
            "this instance's lease expired and another instance closed its runs; they stop here, and it carries on as a new instance",
            { instance_id: this.current },
          );
          this.opts.onLost();
          this.current = randomUUID();
          await this.register();
        }
        await this.sweep();
        this.opts.onTick?.();
        if (this.failing) {
          this.failing = false;
          this.opts.logger.info("the instance's lease is renewed again", {
            instance_id: this.current,
          });
        }
      } catch (err) {
        // Said once per outage, not at every tick of it.
        if (!this.failing) {
          this.failing = true;
          this.opts.logger.warn("could not renew the instance's lease or sweep dead instances", {
            error: errorText(err),
          });
        }
      } finally {
        this.sweeping = undefined;
      }
    })();
    await this.sweeping;
  }

  private async sweep() {
    const { db, logger } = this.opts;
    for (const instance of await reapCandidates(db, this.current, this.host)) {
      const processGone =
        this.opts.exclusive ||
        (instance.host === this.host &&
          instance.bootId === this.boot &&
          !processAlive(instance.pid));
      if (!processGone && !instance.expired) continue;
      await this.opts.reap({ id: instance.id, processGone });
      await markReaped(db, instance.id);
      logger.warn("closed the runs of an instance that is gone", {
        instance_id: instance.id,
        host: instance.host,
      });
    }
    await forgetReapedInstances(db, KEEP_REAPED_MS);
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: a process of another user has the pid; it may not be the instance, but it lives.
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}
