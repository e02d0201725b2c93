import { Cron } from "croner";
import { type Clock, systemClock, type Timer } from "../clock.js";
import { errorText } from "../log.js";
import { scheduledHooks } from "../store/hooks.js";
import type { HookRow } from "../store/schema.js";
import { fireSchedule, type HookDeps } from "./deliveries.js";

// Fires hooks that have a cron `schedule`. Every `tickMs` it reads the scheduled hooks and fires
// each tick that fell due since it last looked. Every process does this; the database decides
// which one fires a tick (a unique delivery id per hook and tick), so each tick fires once.
// Ticks missed while no server ran are not made up for.

/** More ticks than this due at once (a stalled process) are not all fired: only the latest. */
const MAX_TICKS_PER_PASS = 10;

/**
 * Parses a schedule of 5 fields, or 6 with seconds first (croner also takes a 7th, the year,
 * which docs/webhooks.md does not offer); throws on another pattern or an unknown time zone.
 */
export function parseSchedule(pattern: string, timezone: string): Cron {
  return new Cron(pattern, { timezone, mode: "5-or-6-parts" });
}

/** The next tick after `after`, or null when the pattern never fires again. */
export function nextTick(hook: Pick<HookRow, "schedule" | "timezone">, after: Date): Date | null {
  if (!hook.schedule) return null;
  try {
    return parseSchedule(hook.schedule, hook.timezone ?? "UTC").nextRun(after);
  } catch {
    return null;
  }
}

export class Scheduler {
  private timer: Timer | undefined;
  private pass: Promise<void> | undefined;
  /** Per hook: the time up to which its ticks have been looked at. */
  private readonly seen = new Map<string, number>();
  private readonly clock: Clock;
  private readonly startedAt: number;

  constructor(private readonly deps: HookDeps & { tickMs: number; clock?: Clock }) {
    this.clock = deps.clock ?? systemClock;
    this.startedAt = this.clock.now();
  }

  start() {
    this.timer = this.clock.setInterval(() => {
      this.pass ??= this.tick().finally(() => {
        this.pass = undefined;
      });
      return this.pass;
    }, this.deps.tickMs);
    this.timer.unref();
  }

  async stop() {
    this.clock.clear(this.timer);
    await this.pass;
  }

  /** Fires what fell due up to `now`; exposed for tests. */
  async tick(now = new Date(this.clock.now())): Promise<void> {
    const { logger } = this.deps;
    let hooks: HookRow[];
    try {
      hooks = await scheduledHooks(this.deps.db);
    } catch (err) {
      logger.error("could not read the scheduled hooks", { error: errorText(err) });
      return;
    }
    const present = new Set(hooks.map((h) => h.id));
    for (const id of this.seen.keys()) if (!present.has(id)) this.seen.delete(id);
    for (const hook of hooks) {
      // From when this process started or the hook was made or changed, whichever is later.
      const from = Math.max(this.seen.get(hook.id) ?? this.startedAt, hook.updatedAt.getTime());
      this.seen.set(hook.id, now.getTime());
      const due: Date[] = [];
      for (let t = nextTick(hook, new Date(from)); t && t <= now; t = nextTick(hook, t)) {
        due.push(t);
        if (due.length > MAX_TICKS_PER_PASS) due.shift();
      }
      for (const at of due) {
        try {
          const delivery = await fireSchedule(this.deps, hook, at);
          if (delivery) {
            logger.info("schedule fired", {
              hook: hook.name,
              fire_time: at.toISOString(),
              outcome: delivery.outcome,
              run_id: delivery.runId,
            });
          }
        } catch (err) {
          logger.error("a scheduled run could not start", {
            hook: hook.name,
            fire_time: at.toISOString(),
            error: errorText(err),
          });
        }
      }
    }
  }
}
