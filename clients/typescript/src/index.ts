/**
 * backlog-client: a producer and a worker of backlog job queues, speaking the SQL contract of
 * backlog's docs/sql.md directly (better-sqlite3, pg, mysql2), or `backlog serve`'s HTTP API.
 *
 * - `enqueue(conn, queue, payload, opts)` / `enqueueMany(conn, jobs)`: on your own connection,
 *   inside your own transaction (never committed here).
 * - `Client.connect(url)`: a connection of its own and the contract's operations one by one
 *   (claim, complete, fail, heartbeat, release, cancel, rescue).
 * - `Worker`: claims batches, runs handlers with a concurrency limit, renews leases, batches
 *   completions, stops gracefully on SIGTERM.
 * - `HttpClient`, `HttpWorker`: the same over `backlog serve`, with a token.
 * - `QUERIES`: the catalog's statements this client sends, verbatim.
 *
 * @example
 * import { Client, Worker } from "backlog-client";
 * const client = await Client.connect("postgres://app@127.0.0.1/app");
 * await client.enqueue("emails", { to: "a@example.com" });
 * await new Worker(client.url, "emails", async (job) => console.log(job.payload)).run();
 */
export { Client, QUEUE_DEFAULTS, SCHEMA_VERSION, backoffUs, type QueueSettings, type Outcome3 } from "./client.js";
export { type Db, type Flavor, dbOf, statement } from "./db.js";
export {
  BacklogError, HttpError, InvalidName, InvalidOption, InvalidPayload, LeaseLost, SchemaMissing, SchemaTooOld, Unauthorized,
} from "./errors.js";
export { HttpClient, HttpWorker, errorOf } from "./http.js";
export { type Job, type Outcome, Retry, defaultOwner } from "./job.js";
export { type EnqueueOpts, type NewJob, enqueue, enqueueMany, newToken } from "./produce.js";
export { QUERIES } from "./queries.js";
export { type TraceContext } from "./validate.js";
export { type Handler, type Source, type TransactionalHandler, Worker, WorkerLoop, type WorkerOpts } from "./worker.js";

/** This package's version: 0.<schema version>.<patch>. */
export const VERSION = "0.20.0";
