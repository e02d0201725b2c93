/** What a route (or a webhook delivery, or a schedule) asks the run manager to run. */
export interface Message {
  text: string;
  systemPrompt: string | null;
  trigger: string;
  idempotencyKey: string | null;
  /**
   * When the session has an active run: wait in line for the session (the run is `waiting`)
   * rather than be refused with SessionBusyError. Webhook deliveries wait; messages do not.
   */
  waitForSession?: boolean;
  /**
   * A retry of this run (`POST /v1/runs/{id}/retry`): it must be its session's newest run, and
   * finished; the new run resumes the conversation at the last message a run before it confirmed.
   */
  retryOf?: string;
  /** Where to POST the run's outcome once it completes (an outbox row written with the run). */
  callback?: { url: string; secret: string } | null;
}
