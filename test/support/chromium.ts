import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable, Writable } from "node:stream";

// Debian's headless Chromium driven over the DevTools protocol on a pipe
// (`--remote-debugging-pipe`: JSON messages ended by NUL on fds 3 and 4), which needs neither a
// WebSocket client (Node 20 has none built in) nor a browser download.

const bin = process.env.CHROMIUM_BIN ?? "chromium";

/** Fails, saying how to get it, when Chromium is missing: the browser tests must not skip. */
export function requireChromium(): void {
  const probe = spawnSync(bin, ["--version"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `the browser tests need Chromium and \`${bin}\` did not run (${probe.error?.message ?? probe.stderr.trim()}): install it with \`apt-get install -y chromium\` (.ci/run does), or point CHROMIUM_BIN at one`,
    );
  }
}

// Nothing beyond loopback is reachable: names resolve to nothing, and every other address goes
// to a proxy that is not there (Chromium never sends loopback through a proxy).
const OFFLINE = [
  "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
  "--proxy-server=http://127.0.0.1:9",
];

type Params = Record<string, unknown>;
type Listener = (params: Params) => void;

/** One tab, attached with its own protocol session. */
export interface Page {
  on(event: string, listener: Listener): void;
  send(method: string, params?: Params): Promise<Params>;
  /** Resolves once the page's visible text contains `text`; fails with that text otherwise. */
  waitForText(text: string, timeoutMs?: number): Promise<void>;
  screenshot(path: string): Promise<void>;
}

export interface Browser {
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/** Starts a headless Chromium that can reach loopback addresses only. */
export async function launchOfflineChromium(): Promise<Browser> {
  requireChromium();
  const profile = mkdtempSync(join(tmpdir(), "agent-bridge-chromium-"));
  const child: ChildProcess = spawn(
    bin,
    [
      "--headless",
      // Root (as in CI) cannot use the sandbox; the page is our own.
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--window-size=1280,900",
      `--user-data-dir=${profile}`,
      "--remote-debugging-pipe",
      ...OFFLINE,
      "about:blank",
    ],
    { stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"] },
  );
  const toBrowser = child.stdio[3] as Writable;
  const fromBrowser = child.stdio[4] as Readable;
  const exited = once(child, "exit");

  let nextId = 1;
  const pending = new Map<number, { resolve(r: Params): void; reject(e: Error): void }>();
  const listeners = new Map<string, Listener[]>();
  let buffered = "";
  fromBrowser.setEncoding("utf8");
  fromBrowser.on("data", (chunk: string) => {
    buffered += chunk;
    let end = buffered.indexOf("\0");
    while (end !== -1) {
      const message = JSON.parse(buffered.slice(0, end)) as {
        id?: number;
        method?: string;
        params?: Params;
        result?: Params;
        error?: { message: string };
        sessionId?: string;
      };
      buffered = buffered.slice(end + 1);
      end = buffered.indexOf("\0");
      if (message.id !== undefined) {
        const call = pending.get(message.id);
        pending.delete(message.id);
        if (message.error) call?.reject(new Error(message.error.message));
        else call?.resolve(message.result ?? {});
      } else if (message.method) {
        const key = `${message.sessionId ?? ""}:${message.method}`;
        for (const listener of listeners.get(key) ?? []) listener(message.params ?? {});
      }
    }
  });
  child.on("exit", () => {
    for (const call of pending.values()) call.reject(new Error("Chromium exited"));
    pending.clear();
  });

  const send = (method: string, params: Params = {}, sessionId?: string): Promise<Params> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      toBrowser.write(`${JSON.stringify({ id, method, params, sessionId })}\0`);
    });

  const newPage = async (): Promise<Page> => {
    const { targetId } = await send("Target.createTarget", { url: "about:blank" });
    const { sessionId } = (await send("Target.attachToTarget", { targetId, flatten: true })) as {
      sessionId: string;
    };
    const page: Page = {
      on: (event, listener) => {
        const key = `${sessionId}:${event}`;
        listeners.set(key, [...(listeners.get(key) ?? []), listener]);
      },
      send: (method, params) => send(method, params, sessionId),
      waitForText: async (text, timeoutMs = 30_000) => {
        // In the page: a MutationObserver settles the wait the moment the text appears.
        const { result, exceptionDetails } = (await page.send("Runtime.evaluate", {
          expression: `new Promise((resolve, reject) => {
            const wanted = ${JSON.stringify(text)};
            const found = () => document.body && document.body.innerText.includes(wanted);
            if (found()) return resolve(true);
            const observer = new MutationObserver(() => {
              if (found()) { observer.disconnect(); resolve(true); }
            });
            observer.observe(document, { subtree: true, childList: true, characterData: true });
            setTimeout(() => {
              observer.disconnect();
              reject(new Error("not on the page within ${timeoutMs} ms: " + wanted +
                "; the page shows: " + JSON.stringify((document.body?.innerText ?? "").slice(0, 300))));
            }, ${timeoutMs});
          })`,
          awaitPromise: true,
          returnByValue: true,
        })) as { result: Params; exceptionDetails?: { exception?: { description?: string } } };
        if (exceptionDetails) throw new Error(exceptionDetails.exception?.description);
        if (result.value !== true)
          throw new Error(`waiting for ${text}: ${JSON.stringify(result)}`);
      },
      screenshot: async (path) => {
        const { data } = (await page.send("Page.captureScreenshot", { format: "png" })) as {
          data: string;
        };
        writeFileSync(path, Buffer.from(data, "base64"));
      },
    };
    return page;
  };

  return {
    newPage,
    close: async () => {
      if (child.exitCode === null) {
        await send("Browser.close").catch(() => {}); // it may exit before it answers
        await exited;
      }
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
