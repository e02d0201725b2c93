import { errorFields, type Logger } from "./log.js";

// A rejected promise nobody handled is a bug in one piece of work (a run's bookkeeping, a
// stream), and Node's default is to end the process with it: every other run and stream too.
// The guard logs it, with its stack, and the process goes on. A thrown exception is left to
// Node's default (exit): after one, the state of the code it interrupted is unknown.

export function installProcessGuards(logger: Logger): void {
  process.on("unhandledRejection", (reason) => {
    logger.error("unhandled rejection; the server goes on", errorFields(reason));
  });
}
