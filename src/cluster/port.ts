import type { Logger } from "../log.js";
import type { ClusterPort } from "../runs/cluster-port.js";
import { postRunCommand, replyToCommand } from "../store/commands.js";
import type { Database } from "../store/db.js";
import { ClaimLedger } from "./claim-ledger.js";
import { steerElsewhere, stopElsewhere } from "./commands.js";
import type { Doorbell } from "./doorbell.js";
import { followElsewhere } from "./remote-follower.js";

/** The cluster as the runs use it (src/runs/cluster-port.ts), over this instance's doorbell. */
export function clusterPort(opts: {
  db: Database;
  logger: Logger;
  doorbell: Doorbell;
  /** This instance's id: it changes when a lost lease makes it a new instance. */
  instanceId: () => string;
}): ClusterPort {
  const { db, logger, doorbell, instanceId } = opts;
  return {
    shared: doorbell.shared,
    rings: doorbell.rings,
    claims: new ClaimLedger({ db, logger, instanceId, rings: doorbell.rings }),
    remote: {
      follow: (runId, view, after, signal) =>
        followElsewhere(db, doorbell, runId, view, after, signal),
      stop: (run, kind) => stopElsewhere(db, doorbell, run, kind),
      answered: async (runId, requestId, owner) => {
        await postRunCommand(db, { runId, kind: "answer", requestId, owner }, doorbell.rings);
      },
      steer: (run, command, boundMs) => steerElsewhere(db, doorbell, run, command, boundMs),
      reply: (command, reply) => replyToCommand(db, command, reply, doorbell.rings),
    },
  };
}
