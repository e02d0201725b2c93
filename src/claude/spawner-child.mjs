// The spawner: a small process that starts each CLI for the server and hands its stdio pipes
// over. `fork()` copies the page tables of the process that calls it, so spawning from the server
// itself blocked its event loop for about 60 µs per MB it held (35–45 ms with the embedded
// database loaded, for every run; `npm run bench`, README "Performance"). From here it costs a few
// ms, and the server's loop is not blocked at all.
//
// Plain JavaScript, so that it starts without the TypeScript loader. Protocol (JSON over the IPC
// channel, see spawner.ts): the server sends {id, bin, args, cwd, env}; the answer is either
// {id, error} or three messages {id, pid, stream} each carrying one stdio pipe, and later
// {id, exit: {code, signal}}.
import { spawn } from "node:child_process";

// Once the server is gone there is nobody to hand a process to; the CLIs it ran are in their own
// process groups, which the server (or its recovery at the next start) terminates.
process.on("disconnect", () => process.exit(0));

const failure = (err) => ({ code: err.code, message: err.message });

process.on("message", ({ id, bin, args, cwd, env }) => {
  let child;
  try {
    child = spawn(bin, args, { cwd, env, stdio: "pipe", detached: true });
  } catch (err) {
    // Synchronous failures: e.g. an argument holding a NUL byte.
    process.send({ id, error: failure(err) });
    return;
  }
  if (child.pid === undefined) {
    child.once("error", (err) => process.send({ id, error: failure(err) }));
    return;
  }
  // Node starts reading a child's stdout and stderr at once; whatever this process read would
  // never reach the server, so reading stops before anything can arrive.
  for (const { _handle: handle } of [child.stdout, child.stderr]) {
    if (!handle) continue;
    handle.reading = false;
    handle.readStop();
  }
  child.once("exit", (code, signal) => process.send({ id, exit: { code, signal } }));
  // Sending a handle closes this process's copy of it once it is sent.
  process.send({ id, pid: child.pid, stream: "stdin" }, child.stdin);
  process.send({ id, pid: child.pid, stream: "stdout" }, child.stdout);
  process.send({ id, pid: child.pid, stream: "stderr" }, child.stderr);
});
