// The spawner: a small process that starts each CLI for the server and hands its stdio pipes
// over. `fork()` copies the page tables of the process that calls it, so spawning from the server
// itself blocked its event loop for a time that grows with the memory it holds (the embedded
// database's included), at every run (`npm run bench`, README "Performance"). From here the
// server's loop is not blocked at all.
//
// A short command (a file process, git, a version probe) is run here to its end, within bounds, and
// its output sent back in one message: handing over its three pipes made three round trips (each
// handle waits for the previous one's acknowledgement) and three sockets in the server, which
// cost the server more than the command's own work.
//
// Plain JavaScript, so that it starts without the TypeScript loader. Protocol (the IPC channel's
// advanced serialization, see spawner.ts): the server sends {id, bin, args, cwd, env, dirs} and,
// for a command run here to its end, `whole`. The answer is either {id, error}; or three messages
// {id, pid, stream} each carrying one stdio pipe, and later {id, exit: {code, signal}}; or, for
// `whole`, {id, pid} and later {id, ran}, its outputs as lists of chunks. This process's stdin is a
// pipe from the server that is never written to: its end says the server is gone.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, constants, lstatSync, openSync, readlinkSync } from "node:fs";

/** Started processes still running: pid (each leads its own process group) -> their exit. */
const running = new Map();

// The terminal's Ctrl-C, a closed terminal and a service manager's stop (systemd's
// KillMode=control-group) signal the server's whole process group, this process included. They are
// the server's to act on: it gives its runs their grace period and stops them through their own
// groups, and this process leaves when the server does (below). Dying here would end every run at
// once.
for (const signal of ["SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM"]) process.on(signal, () => {});

// The runner's grace between SIGTERM and SIGKILL (DRIVER_DEFAULTS.killGraceMs).
const KILL_GRACE_MS = 5000;

const signalGroup = (pid, signal) => {
  try {
    process.kill(-pid, signal);
  } catch {
    // Gone already.
  }
};

// The server is gone: it exited, or was killed with SIGKILL (as an OOM kill does). Its runs are
// lost, so the CLIs still running are stopped now rather than left to work on to the end of their
// turn: SIGTERM to each group, SIGKILL to every group once each has exited or the grace has passed
// (what a CLI left behind goes too), then this process exits.
let leaving = false;
async function serverGone() {
  if (leaving) return;
  leaving = true;
  const pids = [...running.keys()];
  for (const pid of pids) signalGroup(pid, "SIGTERM");
  let timer;
  const grace = new Promise((resolve) => (timer = setTimeout(resolve, KILL_GRACE_MS)));
  await Promise.race([Promise.all(running.values()), grace]);
  clearTimeout(timer);
  for (const pid of pids) signalGroup(pid, "SIGKILL");
  process.exit(0);
}
process.on("disconnect", serverGone);
// Node withholds "disconnect" while a handle it sent awaits the other side's acknowledgement, which
// a server that died mid-handover never sends. stdin is a pipe only the server holds open: it ends
// when the server's process does, however it ends.
process.stdin.on("end", serverGone).resume();

// A reply the server can no longer receive is dropped (else the failed send would throw here).
const reply = (message, handle) => process.send(message, handle, undefined, () => {});

const failure = (err) => ({ code: err.code, message: err.message });

/**
 * `dirs` opened, each the directory at its real path and reached through no link: the last part of
 * a path by O_NOFOLLOW, the parts before it by comparing where the opened directory is with the
 * path asked for. What is opened is then that directory, whatever is renamed or linked after.
 */
function openDirs(dirs) {
  const fds = [];
  try {
    for (const dir of dirs) {
      fds.push(openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW));
      if (readlinkSync(`/proc/self/fd/${fds.at(-1)}`) !== dir) {
        throw Object.assign(new Error(`${dir}: a link stands on its path`), { code: "ELOOP" });
      }
    }
    return fds;
  } catch (err) {
    for (const fd of fds) closeSync(fd);
    // A link in the last part: with O_DIRECTORY, O_NOFOLLOW says ENOTDIR.
    if (err.code === "ENOTDIR" && isLink(err.path)) err.code = "ELOOP";
    throw err;
  }
}

function isLink(path) {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Starts the request's process in a group of its own, its `dirs` open as fds 3, 4, …; throws. */
function launch({ bin, args, cwd, env, dirs = [] }) {
  let fds = [];
  try {
    fds = openDirs(dirs);
    return spawn(bin, args, { cwd, env, stdio: ["pipe", "pipe", "pipe", ...fds], detached: true });
  } finally {
    // The child has its own copies.
    for (const fd of fds) closeSync(fd);
  }
}

process.on("message", (request) => {
  const { id } = request;
  let child;
  try {
    child = launch(request);
  } catch (err) {
    // Synchronous failures: e.g. an argument holding a NUL byte, a directory behind a link.
    reply({ id, error: failure(err) });
    return;
  }
  if (child.pid === undefined) {
    child.once("error", (err) => reply({ id, error: failure(err) }));
    return;
  }
  running.set(child.pid, once(child, "exit"));
  if (request.whole) void runWhole(id, child, request.whole);
  else handOver(id, child);
});

/** Hands the child's pipes to the server, then says how it exited. */
function handOver(id, child) {
  // Node starts reading a child's stdout and stderr at once; whatever this process read would
  // never reach the server, so reading stops before anything can arrive.
  for (const { _handle: handle } of [child.stdout, child.stderr]) {
    if (!handle) continue;
    handle.reading = false;
    handle.readStop();
  }
  // The pipes are the server's from here on. When a child exits, Node destroys its stdin and
  // drains its stdout and stderr; a handle send waits in line behind the previous one's
  // acknowledgement, so with several starts in flight a CLI that exited at once lost its pipes
  // before they went out, and its start never completed. Node's references are dropped, so that
  // its exit handling leaves them alone.
  const { stdin, stdout, stderr } = child;
  child.stdin = child.stdout = child.stderr = null;
  child.stdio.fill(null);
  child.once("exit", (code, signal) => {
    running.delete(child.pid);
    reply({ id, exit: { code, signal } });
  });
  // Sending a handle closes this process's copy of it once it is sent.
  reply({ id, pid: child.pid, stream: "stdin" }, stdin);
  reply({ id, pid: child.pid, stream: "stdout" }, stdout);
  reply({ id, pid: child.pid, stream: "stderr" }, stderr);
}

/**
 * Runs the child to its end within `whole`'s bounds (see spawner.ts `WholeBounds`): its input
 * written and closed, each output kept within its bound, the group killed at the time limit or
 * once an output it may not cut goes past its bound.
 */
async function runWhole(id, child, { input, timeLimitMs, stdout, stderr }) {
  // The server stops the group itself should this process be lost while it runs.
  reply({ id, pid: child.pid });
  let late = false;
  let cut = false;
  const stop = () => signalGroup(child.pid, "SIGKILL");
  const timer = setTimeout(() => {
    late = true;
    stop();
    // A process that left the group (setsid) may still hold the pipes: they are not waited for.
    child.stdout.destroy();
    child.stderr.destroy();
  }, timeLimitMs);
  // The command may exit without reading its input.
  child.stdin.on("error", () => {});
  child.stdin.end(input);
  /**
   * The stream's chunks within its bound (sent as they are: one copy of the output here, not
   * three); null when past a bound that stops the command.
   */
  const kept = (stream, { maxBytes, over }) =>
    new Promise((resolve) => {
      let chunks = [];
      let size = 0;
      let past = false;
      stream.on("error", () => {});
      stream.on("data", (chunk) => {
        if (past) return;
        chunks.push(chunk);
        size += chunk.length;
        if (size <= maxBytes) return;
        if (over === "tail") {
          chunks = [Buffer.concat(chunks).subarray(size - maxBytes)];
          size = maxBytes;
          return;
        }
        past = true;
        if (over === "head") {
          chunks.push(chunks.pop().subarray(0, chunk.length - (size - maxBytes)));
          cut = true;
        } else chunks = null;
        stop();
        stream.destroy();
      });
      stream.on("close", () => resolve(chunks));
    });
  const [[code, signal], out, err] = await Promise.all([
    once(child, "exit"),
    kept(child.stdout, stdout),
    kept(child.stderr, stderr),
  ]);
  clearTimeout(timer);
  running.delete(child.pid);
  reply({ id, ran: { exit: { code, signal }, stdout: out, stderr: err, cut, late } });
}
