import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitUntil } from "./process.js";
import { codeBlocks, docSection } from "./readme.js";
import { freePort } from "./server.js";

// Real reverse proxies in front of the test's instances: Debian's nginx and haproxy (installed by
// `.ci/run`), each run by the test as a plain process in a directory of its own, with the
// configuration the README gives under "Scaling out" — the servers and the listening address
// swapped for the test's.

export interface ReverseProxy {
  url: string;
  /** Everything the proxy wrote on stderr (its error log, its warnings). */
  output(): string;
  /**
   * Each server as the proxy's health checks last found it (HAProxy; nginx checks none). The
   * proxy is started once every server has had its first check.
   */
  serverStates?(): Promise<ServerState[]>;
  stop(): Promise<void>;
}

export interface ServerState {
  server: string;
  /** UP, DOWN, … */
  status: string;
  /** The last check's result: L7OK (the answer's status was 2xx or 3xx), L7STS (another), … */
  check: string;
  /** The HTTP status of the last check's answer. */
  code: number | null;
}

/** The README's block in `lang` with its server lines for `upstreams` and its listen line for `port`. */
async function readmeBlock(
  lang: string,
  upstreams: readonly string[],
  servers: { lines: RegExp; line: (host: string, i: number) => string },
  listen: { line: RegExp; to: string },
): Promise<string> {
  const [block] = codeBlocks(await docSection("docs/scaling-out.md", "Scaling out"), lang);
  if (!block) throw new Error(`docs/scaling-out.md has no ${lang} block`);
  const ours = upstreams.map((u, i) => servers.line(new URL(u).host, i)).join("\n");
  const config = block.replace(servers.lines, `${ours}\n`).replace(listen.line, listen.to);
  if (!config.includes(ours) || !config.includes(listen.to)) {
    throw new Error(
      `the README's ${lang} block no longer has the expected server and listen lines`,
    );
  }
  return config;
}

/** The README's nginx configuration for these instances, listening on `port`. */
export function readmeProxyConfig(upstreams: readonly string[], port: number) {
  return readmeBlock(
    "nginx",
    upstreams,
    { lines: /^(\s*server \S+:\d+;\n)+/m, line: (host) => `    server ${host};` },
    { line: /listen \d+;/, to: `listen 127.0.0.1:${port};` },
  );
}

/** The README's HAProxy configuration for these instances, listening on `port`. */
export function readmeHaproxyConfig(upstreams: readonly string[], port: number) {
  return readmeBlock(
    "haproxy",
    upstreams,
    {
      lines: /^(\s*server \S+ \S+:\d+ check\n)+/m,
      line: (host, i) => `    server ${String.fromCharCode(97 + i)} ${host} check`,
    },
    { line: /bind :\d+/, to: `bind 127.0.0.1:${port}` },
  );
}

/** nginx round-robin over `upstreams` (base URLs of the instances), on a free loopback port. */
export async function startProxy(upstreams: readonly string[]): Promise<ReverseProxy> {
  const dir = await mkdtemp(join(tmpdir(), "agent-bridge-nginx-"));
  await mkdir(join(dir, "logs"));
  const port = await freePort();
  const temp = (name: string) => `${name}_temp_path ${join(dir, name)};`;
  // What a distribution's nginx.conf has around its conf.d/ files, for a process of its own.
  const main = [
    "daemon off;",
    // As root, nginx's workers would otherwise run as nobody, who cannot use this directory.
    process.getuid?.() === 0 ? "user root root;" : "",
    "worker_processes 1;",
    `pid ${join(dir, "nginx.pid")};`,
    "error_log stderr warn;",
    "events { worker_connections 1024; }",
    "http {",
    "  access_log off;",
    `  ${temp("client_body")} ${temp("proxy")} ${temp("fastcgi")} ${temp("uwsgi")} ${temp("scgi")}`,
    await readmeProxyConfig(upstreams, port),
    "}",
  ].join("\n");
  await writeFile(join(dir, "nginx.conf"), main);
  return run(
    "nginx",
    process.env.NGINX_BIN ?? "/usr/sbin/nginx",
    ["-p", dir, "-e", "stderr", "-c", "nginx.conf"],
    dir,
    port,
  );
}

/**
 * HAProxy round-robin over `upstreams`, on a free loopback port, once its health check has had a
 * first answer from every instance.
 */
export async function startHaproxy(upstreams: readonly string[]): Promise<ReverseProxy> {
  const dir = await mkdtemp(join(tmpdir(), "agent-bridge-haproxy-"));
  const port = await freePort();
  const socket = join(dir, "admin.sock");
  // What Debian's haproxy.cfg has before the sections it is given, for a process of its own: a
  // stats socket (where the test reads the health checks), no chroot, no daemon.
  const config = [
    "global",
    `    stats socket ${socket} mode 600 level admin`,
    "",
    await readmeHaproxyConfig(upstreams, port),
  ].join("\n");
  await writeFile(join(dir, "haproxy.cfg"), config);
  const proxy = await run(
    "haproxy",
    process.env.HAPROXY_BIN ?? "/usr/sbin/haproxy",
    // -db: in the foreground, its messages on stderr.
    ["-db", "-f", join(dir, "haproxy.cfg")],
    dir,
    port,
  );
  const serverStates = () => haproxyServers(socket);
  const checked = await waitUntil(
    async () => (await serverStates()).every((s) => !s.check.startsWith("INI")),
    "haproxy's first health check of each server",
    15_000,
  ).catch((err: Error) => err);
  if (checked instanceof Error) {
    await proxy.stop();
    throw new Error(`${checked.message}:\n${proxy.output()}`);
  }
  return { ...proxy, serverStates };
}

/** The servers of HAProxy's backends, from `show stat` on its stats socket. */
async function haproxyServers(socket: string): Promise<ServerState[]> {
  const conn = connect(socket);
  let text = "";
  conn.on("data", (d: Buffer) => {
    text += d;
  });
  conn.end("show stat\n");
  await once(conn, "close");
  const [header = "", ...rows] = text.trim().split("\n");
  const columns = header.replace(/^# /, "").split(",");
  const at = (row: string[], name: string) => row[columns.indexOf(name)] ?? "";
  return rows
    .map((line) => line.split(","))
    .filter((row) => !["FRONTEND", "BACKEND"].includes(at(row, "svname")))
    .map((row) => ({
      server: at(row, "svname"),
      status: at(row, "status"),
      // "* " while a check is under way.
      check: at(row, "check_status").replace(/^\* /, ""),
      code: at(row, "check_code") ? Number(at(row, "check_code")) : null,
    }));
}

/** Runs a proxy in the foreground until `stop`, once it listens on `port`; `dir` is removed after. */
async function run(
  name: string,
  bin: string,
  args: string[],
  dir: string,
  port: number,
): Promise<ReverseProxy> {
  const child: ChildProcess = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
  let output = "";
  child.stderr?.on("data", (d: Buffer) => {
    output += d;
  });
  let gone = false;
  const exited = new Promise<void>((resolve) => {
    const end = () => {
      gone = true;
      resolve();
    };
    child.once("exit", end);
    // Not started at all (not installed: `.ci/run` installs it).
    child.once("error", (err) => {
      output += `${err.message}\n`;
      end();
    });
  });
  const stop = async () => {
    if (!gone) {
      child.kill("SIGTERM");
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitUntil(
      async () => {
        if (gone) throw new Error(`${name} exited at start:\n${output}`);
        return listening(port);
      },
      `${name} listening`,
      15_000,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: `http://127.0.0.1:${port}`, output: () => output, stop };
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
