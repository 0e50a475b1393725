/** A claimed job, the outcomes of one, and the handler's way to ask for a retry. */
import { hostname } from "node:os";

/** A job as a claim hands it out. `token` fences every outcome. */
export interface Job {
  id: number;
  queue: string;
  kind: string | null;
  /** The payload, parsed. */
  payload: unknown;
  priority: number;
  /** This attempt's number: 1 on the first run. */
  attempt: number;
  maxAttempts: number | null;
  /** µs since the epoch (0 over HTTP, where the claim does not send it). */
  runAt: number;
  createdAt: number;
  /** The claim's lease token: every later statement matches on it. */
  token: bigint;
  leaseExpiresAt: number;
  /** The W3C trace context it was enqueued with, as stored (JSON text), or null. */
  traceContext: string | null;
  /** Its ordered group, or null (always null over HTTP). */
  group: string | null;
  /** Set when a heartbeat found the lease lost: its outcome will be refused. */
  lost: boolean;
  /** Set when a heartbeat found that an operator asked for the job to be cancelled. */
  cancelRequested: boolean;
}

/** What became of a job a worker ran. `lost`: its lease was lost; nothing was recorded. */
export type Outcome = "completed" | "retry" | "dead" | "cancelled" | "lost";

/** Thrown by a handler to fail this attempt and run the job again `delay` seconds from now. */
export class Retry extends Error {
  readonly delay: number;
  constructor(message: string, delay: number) {
    super(message);
    this.name = "Retry";
    this.delay = delay;
  }
}

/** What `lease_owner` records, as backlog does: `host:pid`. */
export function defaultOwner(): string {
  return `${hostname()}:${process.pid}`;
}
