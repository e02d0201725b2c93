import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitUntil } from "./process.js";
import { codeBlocks, readmeSection } from "./readme.js";
import { freePort } from "./server.js";

// A real reverse proxy in front of the test's instances: Debian's nginx (installed by `.ci/run`),
// run by the test as a plain process in a directory of its own, with the configuration the README
// gives under "Scaling out" — the servers and the listening port swapped for the test's.

export interface ReverseProxy {
  url: string;
  /** Everything nginx wrote on stderr (its error log). */
  output(): string;
  stop(): Promise<void>;
}

/** The README's nginx configuration for these instances, listening on `port`. */
export async function readmeProxyConfig(upstreams: readonly string[], port: number) {
  const [block] = codeBlocks(await readmeSection("Scaling out"), "nginx");
  if (!block) throw new Error('README "Scaling out" has no nginx block');
  const servers = upstreams.map((u) => `    server ${new URL(u).host};`).join("\n");
  const config = block
    .replace(/^(\s*server \S+:\d+;\n)+/m, `${servers}\n`)
    .replace(/listen \d+;/, `listen 127.0.0.1:${port};`);
  if (!config.includes(servers) || !config.includes(`listen 127.0.0.1:${port};`)) {
    throw new Error("the README's nginx block no longer has the expected server and listen lines");
  }
  return config;
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
  const child: ChildProcess = spawn(nginxBin(), ["-p", dir, "-e", "stderr", "-c", "nginx.conf"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let output = "";
  child.stderr?.on("data", (d: Buffer) => {
    output += d;
  });
  const exited = once(child, "exit");
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  await waitUntil(
    async () => {
      if (gone) throw new Error(`nginx exited at start:\n${output}`);
      return listening(port);
    },
    "nginx listening",
    15_000,
  );
  return {
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    async stop() {
      if (!gone) {
        child.kill("SIGTERM");
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function nginxBin(): string {
  return process.env.NGINX_BIN ?? "/usr/sbin/nginx";
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
