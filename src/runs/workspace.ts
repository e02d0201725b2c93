import type { AgentBackend } from "../agents/agent.js";
import { pluginOf } from "../agents/registry.js";
import type { CompletionEvent } from "../events.js";
import { apiUrlOf } from "../forges/hook-forge.js";
import { errorText, type Logger } from "../log.js";
import type { AgentIdentity } from "../process/tenant-homes.js";
import type { Database } from "../store/db.js";
import { getHookById } from "../store/hooks.js";
import type { SessionRow } from "../store/schema.js";
import type { StoredCopy } from "../store/transcripts.js";
import { changeRef, checkOutChange, readChangeCheckout } from "../worktrees/change.js";
import type { CheckoutCache } from "../worktrees/checkout-cache.js";
import { tokenGoesTo } from "../worktrees/checkout-origin.js";
import type { Git } from "../worktrees/git.js";
import { prepareSessionWorktree, recordSessionWorktree } from "../worktrees/sessions.js";
import type { ActiveRun } from "./active-run.js";
import { ChangeCheckoutError } from "./errors.js";
import { restoreTranscript, saveTranscript } from "./transcripts.js";

/**
 * What a run leaves with its session besides its events: its git worktree, prepared before the
 * run and recorded after it, and its CLI's transcript, restored before a resume and stored after,
 * so that the session's next run finds both at any instance. A failure of either is logged; the
 * run goes on.
 */
export class RunWorkspace {
  constructor(
    private readonly opts: {
      db: Database;
      logger: Logger;
      /** This instance's host, recorded with the worktrees it makes. */
      host: string;
      /** Where pull requests' heads are fetched, by the server, before a tenant takes them. */
      checkouts: CheckoutCache;
    },
  ) {}

  /**
   * A failure here is logged, not fatal: the CLI then finds the session as this instance last
   * saw it, or not at all (Claude then starts it afresh, see resume.ts).
   */
  async restoreTranscript(
    run: ActiveRun,
    agent: AgentBackend,
    identity: AgentIdentity | undefined,
  ) {
    try {
      const location = agent.transcripts(identity);
      await restoreTranscript(this.opts.db, run.session.id, location, this.opts.logger);
    } catch (err) {
      this.opts.logger.error("could not restore the session's transcript", {
        session_id: run.session.id,
        error: errorText(err),
      });
    }
  }

  /**
   * The stored copy it leaves, for the run's later store (`after`: see saveTranscript). A failure
   * here is logged: the session goes on, on this instance at least.
   */
  async saveTranscript(
    run: ActiveRun,
    completion: CompletionEvent | undefined,
    { agent, identity }: { agent: AgentBackend; identity: AgentIdentity | undefined },
    after?: StoredCopy | null,
  ): Promise<StoredCopy | undefined> {
    const agentSessionId = completion?.agent_session_id ?? run.session.agentSessionId;
    if (!agentSessionId) return undefined;
    try {
      const location = agent.transcripts(identity);
      return await saveTranscript(this.opts.db, run.session.id, agentSessionId, location, after);
    } catch (err) {
      this.opts.logger.error("could not store the session's transcript", {
        session_id: run.session.id,
        error: errorText(err),
      });
      return undefined;
    }
  }

  /** A failure here is logged, not fatal: the CLI then makes a fresh worktree by itself. */
  async prepareWorktree(session: SessionRow, git: Git) {
    const { logger } = this.opts;
    try {
      await prepareSessionWorktree(git, session.id, logger);
    } catch (err) {
      logger.error("could not restore the session's worktree", {
        session_id: session.id,
        error: errorText(err),
      });
    }
  }

  /**
   * Before a run that works on a pull (merge) request (`checkout`, as stored with the run): the
   * session's worktree at the request's head. A failure fails the run before its agent starts: it
   * must not review other code in its place.
   */
  async checkOutChange(session: SessionRow, git: Git, checkout: unknown) {
    const change = readChangeCheckout(checkout);
    const layout = pluginOf(session.agent)?.worktree;
    // A session made before its hook checked requests out has no worktree for the agent to run in.
    if (!change || !layout || !session.worktree) {
      throw new ChangeCheckoutError("the run's pull request");
    }
    const ref = changeRef(change);
    // Read now, not from the run's row: the origin and token are the hook's as they are today.
    const hook = await getHookById(this.opts.db, change.hook);
    if (!hook?.checkoutOrigin) {
      throw new ChangeCheckoutError(`${ref} (its hook is gone, or checks requests out no more)`);
    }
    const { checkouts, logger } = this.opts;
    try {
      const cached = await checkouts.fetch({
        hook: hook.id,
        key: session.id,
        origin: hook.checkoutOrigin,
        ref,
        ...(hook.forgeToken && tokenGoesTo(hook.checkoutOrigin, apiUrlOf(hook) ?? "")
          ? { auth: { forge: change.forge, token: hook.forgeToken } }
          : {}),
      });
      try {
        const { path, head } = await checkOutChange(git, session.id, cached, layout, logger);
        logger.info("checked the request's head out", { session_id: session.id, ref, path, head });
      } finally {
        await checkouts
          .release(cached)
          .catch((err) =>
            logger.warn("could not release a fetched head", { ref, error: errorText(err) }),
          );
      }
    } catch (err) {
      logger.error("could not check the request's head out", {
        session_id: session.id,
        ref,
        error: errorText(err),
      });
      throw new ChangeCheckoutError(`the head of ${ref}`);
    }
  }

  async recordWorktree(session: SessionRow, git: Git) {
    try {
      await recordSessionWorktree(this.opts.db, git, session.id, this.opts.host);
    } catch (err) {
      this.opts.logger.error("could not record the session's worktree", {
        session_id: session.id,
        error: errorText(err),
      });
    }
  }
}
