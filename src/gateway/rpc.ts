// Calls between the gateway's two threads (./server.ts in the server's main thread, ./worker.ts in
// its own): each side answers the other's calls with its handlers, by message. A call whose answer
// cannot come (the worker is gone) fails.

// biome-ignore lint/suspicious/noExplicitAny: each handler types its own argument.
type Handlers = Record<string, (arg: any) => unknown>;

/** Either end of the channel: a Worker, or the worker's parentPort. */
interface Port {
  postMessage(message: unknown): void;
  on(event: "message", listener: (message: unknown) => void): unknown;
}

type Message =
  | { call: number | null; method: string; arg: unknown }
  | { answer: number; result?: unknown; error?: string };

export class Rpc<Own extends Handlers, Theirs extends Handlers> {
  private calls = 0;
  /** Why no answer can come any more, once the other side is gone. */
  private gone: Error | undefined;
  private readonly waiting = new Map<
    number,
    { resolve(result: unknown): void; reject(err: Error): void }
  >();

  constructor(
    private readonly port: Port,
    private readonly own: Own,
  ) {
    port.on("message", (message) => this.receive(message as Message));
  }

  /** Asks the other side; resolves with its answer. */
  call<K extends keyof Theirs & string>(
    method: K,
    arg: Parameters<Theirs[K]>[0],
  ): Promise<Awaited<ReturnType<Theirs[K]>>> {
    const call = ++this.calls;
    return new Promise((resolve, reject) => {
      if (this.gone) return reject(this.gone);
      this.waiting.set(call, { resolve: resolve as (result: unknown) => void, reject });
      this.port.postMessage({ call, method, arg } satisfies Message);
    });
  }

  /** Tells the other side, which answers nothing. */
  tell<K extends keyof Theirs & string>(method: K, arg: Parameters<Theirs[K]>[0]): void {
    this.port.postMessage({ call: null, method, arg } satisfies Message);
  }

  /** Fails every call still waiting for its answer, and every later one: the other side is gone. */
  fail(err: Error): void {
    this.gone = err;
    for (const { reject } of this.waiting.values()) reject(err);
    this.waiting.clear();
  }

  private receive(message: Message): void {
    if ("answer" in message) {
      const waiting = this.waiting.get(message.answer);
      this.waiting.delete(message.answer);
      if (message.error === undefined) waiting?.resolve(message.result);
      else waiting?.reject(new Error(message.error));
      return;
    }
    const { call, method, arg } = message;
    const answered = Promise.resolve().then(() => {
      const handler = this.own[method];
      if (!handler) throw new Error(`no handler for ${method}`);
      return handler(arg);
    });
    if (call === null) return void answered.catch(() => {});
    answered.then(
      (result) => this.port.postMessage({ answer: call, result } satisfies Message),
      (err: unknown) =>
        this.port.postMessage({
          answer: call,
          error: err instanceof Error ? err.message : String(err),
        } satisfies Message),
    );
  }
}
