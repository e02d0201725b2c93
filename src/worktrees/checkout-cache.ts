import { access, mkdir, readdir, realpath, rm } from "node:fs/promises";
import path from "node:path";
import type { Forge } from "../forges/delivery.js";
import { runToEnd } from "../process/run-to-end.js";
import type { Launch, Sandbox } from "../process/sandbox.js";
import { isLocalOrigin, originRefusal, tokenHeader } from "./checkout-origin.js";
import { GitError } from "./git.js";

// The one fetch of a checkout that has a network: the server's own, into a bare repository of its
// own under the data dir (`<data dir>/checkouts/<hook id>.git`), from the origin the hook pins.
// A tenant's repository, whose config and HOME its agents can write, is never where it runs and
// never what it reads: an agent could otherwise point the fetch elsewhere (`remote.origin.url`,
// `url.<x>.insteadOf`) or have it run a command of its choosing with the host's network
// (`core.sshCommand`, `credential.helper=!…`, `core.fsmonitor`). The tenant's repository then takes
// the head from this cache as the tenant, offline (change.ts).
//
// The fetch's git reads no config but the cache's (made here, never written by anyone else) and
// what it is given: no system or global config, a HOME of its own (curl reads `~/.netrc`), no
// credential helper, no askpass or terminal prompt, no hooks, no redirects, and only the https
// transport (`file` for a local origin the operator allowed). A forge token goes in as an
// `http.extraHeader` in the environment (GIT_CONFIG_*: not on a command line, which any user can
// read in /proc), never in a file.

/** A first fetch brings a repository's whole history, possibly over a slow link. */
export const FETCH_TIME_LIMIT_MS = 10 * 60_000;

/** A hook's or a session's id, which names a cache and its refs. */
export const isId = (value: string) =>
  /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(value);

/** The refs a forge keeps requests' heads under (change.ts changeRef). */
const CHANGE_REF = /^refs\/(pull|merge-requests)\/[1-9][0-9]{0,9}\/head$/;

/** Output past this is a failure: a fetch says little. */
const MAX_OUTPUT_BYTES = 1024 * 1024;

export interface CheckoutCacheOptions {
  /** Where the caches live: `<data dir>/checkouts`, the server's alone. */
  dir: string;
  /** Where git is found. */
  searchPath: string;
  /** Set: the fetch runs in a sandbox of its own (as the server's user, with the network). */
  sandbox?: Sandbox;
  /** Directories a local origin may lie under (AGENT_BRIDGE_CHECKOUT_LOCAL_ORIGINS). */
  localRoots: readonly string[];
  timeLimitMs?: number;
}

export interface CacheRequest {
  /** The hook's id: its cache. */
  hook: string;
  /** Names the cache's ref for this fetch: one a session, so that fetches never race. */
  key: string;
  /** The address the hook pins. */
  origin: string;
  /** The forge's ref of the request's head (change.ts changeRef). */
  ref: string;
  /** Set: the fetch authenticates with the hook's forge token. */
  auth?: { forge: Forge; token: string };
}

/** A head fetched into the cache, waiting for the tenant's repository to take it. */
export interface Cached {
  /** The cache repository, for the tenant's git to fetch from (read-only). */
  dir: string;
  /** The cache's ref holding the head. */
  ref: string;
  /** The head's commit. */
  head: string;
}

/** The server's bare repositories of pull requests' heads, one a hook. */
export class CheckoutCache {
  /** The caches' directory, made on the first fetch, as a real path (the sandbox binds no link). */
  private root: Promise<string> | undefined;
  /** Each hook's cache repository while it is looked for or made: two first fetches make it once. */
  private readonly made = new Map<string, Promise<string>>();

  constructor(private readonly opts: CheckoutCacheOptions) {}

  /** Fetches `req.ref` from the hook's origin into its cache; rejects with a GitError. */
  async fetch(req: CacheRequest): Promise<Cached> {
    // Checked again here: the operator may have narrowed the local roots since the hook was made.
    const refusal = originRefusal(req.origin, this.opts.localRoots);
    if (refusal) throw new GitError(["fetch", req.origin], null, `origin refused: ${refusal}`);
    if (!isId(req.hook) || !isId(req.key) || !CHANGE_REF.test(req.ref)) {
      throw new RangeError("a checkout cache is named by ids, and fetches a request's head alone");
    }
    const dir = await this.ensure(req.hook);
    const ref = `refs/checkouts/${req.key}`;
    const local = isLocalOrigin(req.origin);
    const settings: [string, string][] = [
      ["protocol.allow", "never"],
      [`protocol.${local ? "file" : "https"}.allow`, "always"],
      ["core.hooksPath", "/dev/null"],
      ["credential.helper", ""],
      ["http.followRedirects", "false"],
      // A fetch may pack the cache; it does so before it ends, leaving nothing running behind it.
      ["gc.autoDetach", "false"],
    ];
    if (req.auth) settings.push(["http.extraHeader", tokenHeader(req.auth.forge, req.auth.token)]);
    await this.git(
      dir,
      [
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-recurse-submodules",
        "--no-write-fetch-head",
        "--",
        req.origin,
        `+${req.ref}:${ref}`,
      ],
      { settings, network: !local, reads: local ? [req.origin] : [] },
    );
    const head = (
      await this.git(dir, ["rev-parse", "--verify", "--quiet", `${ref}^{commit}`])
    ).trim();
    if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(head)) {
      throw new GitError(["rev-parse", ref], null, `not a commit id: ${JSON.stringify(head)}`);
    }
    return { dir, ref, head };
  }

  /** Lets go of a fetched head once the tenant's repository has it. */
  async release(cached: Cached): Promise<void> {
    await this.git(cached.dir, ["update-ref", "-d", cached.ref]);
  }

  /**
   * Removes the caches of hooks that are gone (not in `hooks`), which no fetch will use again; a
   * cache being made is left alone. The directory is the server's alone (tenants only read it), so
   * nothing in it is anyone else's link to follow. Returns the hook ids whose cache went.
   */
  async prune(hooks: ReadonlySet<string>): Promise<string[]> {
    const entries = await readdir(this.opts.dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return [];
      throw err;
    });
    const gone: string[] = [];
    for (const entry of entries) {
      const hook = entry.replace(/\.git$/, "");
      if (hook === entry || !isId(hook) || hooks.has(hook) || this.made.has(hook)) continue;
      await rm(path.join(this.opts.dir, entry), { recursive: true, force: true });
      gone.push(hook);
    }
    return gone;
  }

  /** The caches' directory, with the fetch's HOME in it; made on the first call. */
  private rootDir(): Promise<string> {
    this.root ??= (async () => {
      // Readable by the tenants' git, which takes heads from it; written by the server alone.
      await mkdir(path.join(this.opts.dir, "home"), { recursive: true, mode: 0o755 });
      return realpath(this.opts.dir);
    })();
    return this.root;
  }

  /** The hook's cache repository, made when missing. */
  private ensure(hook: string): Promise<string> {
    let made = this.made.get(hook);
    if (!made) {
      made = this.make(hook);
      this.made.set(hook, made);
      // Settled, it is looked for again by the next fetch (it may have been removed meanwhile).
      made.then(
        () => this.made.delete(hook),
        () => this.made.delete(hook),
      );
    }
    return made;
  }

  private async make(hook: string): Promise<string> {
    const root = await this.rootDir();
    const dir = path.join(root, `${hook}.git`);
    const exists = await access(path.join(dir, "HEAD")).then(
      () => true,
      () => false,
    );
    if (!exists) await this.git(root, ["init", "--quiet", "--bare", "--", dir]);
    return dir;
  }

  /** `git <args>` in `cwd` with the clean configuration, as the server's user; stdout. */
  private async git(
    cwd: string,
    args: string[],
    opts: { settings?: [string, string][]; network?: boolean; reads?: string[] } = {},
  ): Promise<string> {
    const { settings = [], network = false, reads = [] } = opts;
    const env: Record<string, string> = {
      PATH: this.opts.searchPath,
      HOME: path.join(await this.rootDir(), "home"),
      LANG: "C",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_TERMINAL_PROMPT: "0",
      GIT_CONFIG_COUNT: String(settings.length),
    };
    settings.forEach(([key, value], i) => {
      env[`GIT_CONFIG_KEY_${i}`] = key;
      env[`GIT_CONFIG_VALUE_${i}`] = value;
    });
    const launch: Launch = this.opts.sandbox
      ? await this.opts.sandbox.command({
          bin: "git",
          args,
          cwd,
          env,
          reach: { readOnly: reads, offline: !network },
        })
      : { bin: "git", args, dirs: [], env: {} };
    const timeLimitMs = this.opts.timeLimitMs ?? FETCH_TIME_LIMIT_MS;
    const { stdout, stderr, exit, late } = await runToEnd(launch, cwd, env, {
      timeLimitMs,
      maxOutputBytes: MAX_OUTPUT_BYTES,
    }).catch((err: Error) => {
      throw new GitError(args, null, err.message);
    });
    if (late) throw new GitError(args, null, `stopped after ${timeLimitMs} ms`);
    if (exit.code === 0 && stdout !== undefined) return stdout;
    throw new GitError(args, exit.code, stderr ?? "more output than git gives here");
  }
}
