import type { BridgeEvent, CompletionEvent } from "../../events.js";
import type { AgentLabel, RunnerError } from "../errors.js";
import type { LongLine } from "../framer.js";
import type { SandboxedCommand } from "../sandbox.js";

// What a back-end hands the driver (./drive.ts) for one run: the command to start, and the protocol
// that reads its CLI's lines.

/** The command of one run: what it starts (SandboxedCommand), and what it is told on stdin. */
export interface AgentCommand extends SandboxedCommand {
  label: AgentLabel;
  /** Written to stdin once the process runs. */
  input: string;
  /**
   * Whether stdin closes after the input (a CLI that reads its prompt to EOF); otherwise it stays
   * open for the protocol's replies until the run stops.
   */
  closeInput: boolean;
  /** How the CLI's long stdout lines are cut (its plugin's); absent: kept whole up to the bound. */
  longLine?: LongLine;
  /** How the CLI's lines are parsed (its plugin's), as JSON.parse reads them; absent: JSON.parse. */
  parseLine?: (line: string) => unknown;
}

/** A back-end's side of the conversation: what its CLI's lines mean. */
export interface LineProtocol {
  /**
   * The events of one stdout line; a `completion` among them is the CLI's outcome and ends the
   * read loop. `reply` writes to the CLI's stdin (control answers).
   */
  onLine(line: Record<string, unknown>, reply: (text: string) => void): BridgeEvent[];
  /** A line over the size bound was dropped (its events are missing). */
  lineDropped(): void;
  /** The completion of a run that ended without the CLI's own outcome. */
  failure(err: RunnerError, elapsedMs: number): CompletionEvent;
  /** Whether the CLI waits for a reply of ours (an approval): its silence is then no stall. */
  awaiting?(): boolean;
  /**
   * Whether handling this line writes to the run's log by another way (a permission request, its
   * answer by policy): the events of the lines before it are handed over first, so the log keeps
   * the CLI's order.
   */
  handsOverFirst?(line: Record<string, unknown>): boolean;
  /** Once the input is written: `write` lets the protocol speak first (an interrupt). */
  started?(write: (text: string) => void): void;
  /**
   * Asks the CLI to end its turn, which it reports as its outcome line; absent when it cannot be
   * asked (it is stopped instead).
   */
  interrupt?(write: (text: string) => void): void;
}
