/**
 * The same over HTTP, for programs that cannot reach the database: a producer and a worker
 * speaking `backlog serve`'s API and worker protocol (docs/http.md) with a bearer token, on
 * Node's own `fetch`. Input is checked as the SQL producer checks it, before any request; the
 * server's error answers become this package's typed errors where they mean the same
 * (InvalidName, InvalidPayload, InvalidOption, LeaseLost, Unauthorized), HttpError for the rest.
 * A connection that cannot be made rejects with fetch's own TypeError, unchanged.
 */
import { BacklogError, HttpError, InvalidName, InvalidOption, InvalidPayload, LeaseLost, Unauthorized } from "./errors.js";
import { type Job, type Outcome, defaultOwner } from "./job.js";
import { type EnqueueOpts, type NewJob, localUs, row } from "./produce.js";
import * as check from "./validate.js";
import { type Handler, type Source, WorkerLoop, type WorkerOpts } from "./worker.js";

const NAME_CODES: Record<string, string> = {
  queue_name_invalid: "queue name",
  kind_invalid: "kind",
  unique_key_invalid: "unique key",
  group_key_invalid: "group key",
};
const PAYLOAD_CODES = new Set(["payload_invalid", "payload_too_large"]);
const OPTION_CODES = new Set([
  "duration_invalid", "option_invalid", "value_out_of_range", "batch_size_invalid",
  "token_invalid", "worker_invalid", "error_too_long", "trace_context_invalid",
]);
/** Most jobs one batch enqueue takes (docs/http.md), and one batch completion. */
export const MAX_BATCH = 10_000;
const MAX_COMPLETE = 1000;

/** Microseconds as the API's duration text. */
const duration = (us: number): string => `${Math.max(Math.round(us), 0)}us`;

/** The error an answer with this status and body means (docs/http.md "Errors"). */
export function errorOf(status: number, body: string): BacklogError {
  let code = "http_error";
  let message = body.slice(0, 500);
  let jobId: number | undefined;
  try {
    const err = JSON.parse(body).error;
    code = String(err.code);
    message = String(err.message ?? "");
    if (Number.isSafeInteger(err.job_id)) jobId = err.job_id;
  } catch {
    /* not the API's error body */
  }
  if (status === 401 || status === 403) return new Unauthorized(status, code, message, jobId);
  const cause = new HttpError(status, code, message, jobId);
  if (code in NAME_CODES) return new InvalidName(NAME_CODES[code]!, "", message, { cause });
  if (PAYLOAD_CODES.has(code)) return new InvalidPayload(message, { cause });
  if (OPTION_CODES.has(code)) return new InvalidOption(message, { cause });
  if (code === "lease_lost" && jobId !== undefined) return new LeaseLost(jobId, "request", { cause });
  return cause;
}

/** One job's enqueue body, checked: its JSON text and its trace context. */
function body(job: NewJob, index?: number): { text: string; trace: string | null } {
  const r = row(job, index);
  const rest: Record<string, unknown> = { queue: r.queue };
  if (r.kind !== null) rest.kind = r.kind;
  if (job.priority !== undefined && job.priority !== null) rest.priority = r.priority;
  // The API takes a delay: runAt becomes one from this machine's clock.
  if (r.runAt !== null) rest.delay = duration(r.runAt - localUs());
  if (r.delayUs !== null) rest.delay = duration(r.delayUs);
  if (r.maxAttempts !== null) rest.max_attempts = r.maxAttempts;
  if (r.uniqueKey !== null) rest.unique_key = r.uniqueKey;
  if (r.group !== null) rest.group = r.group;
  // The payload goes as the text checked: the server stores the text sent.
  return { text: `{"payload":${r.payload},${JSON.stringify(rest).slice(1)}`, trace: r.trace };
}

function traceHeaders(trace: string | null): Record<string, string> {
  return trace === null ? {} : (JSON.parse(trace) as Record<string, string>);
}

function leaseText(ms: number | undefined): string | undefined {
  if (ms === undefined) return undefined;
  if (!Number.isFinite(ms) || ms < 1) throw new InvalidOption(`a lease must be at least a millisecond, not ${ms}`);
  return duration(ms * 1000);
}

/** A claimed job as the claim describes it; the claim sends neither run_at nor the group. */
function jobOf(v: Record<string, unknown>): Job {
  let trace: string | null = null;
  if (v.traceparent) {
    const carrier: Record<string, unknown> = { traceparent: v.traceparent };
    if (v.tracestate) carrier.tracestate = v.tracestate;
    trace = JSON.stringify(carrier);
  }
  return {
    id: Number(v.id),
    queue: String(v.queue),
    kind: (v.kind as string | undefined) ?? null,
    payload: v.payload ?? null,
    priority: Number(v.priority ?? 0),
    attempt: Number(v.attempt),
    maxAttempts: (v.max_attempts as number | undefined) ?? null,
    runAt: 0,
    createdAt: Number(v.created_at ?? 0),
    token: BigInt(String(v.token)),
    leaseExpiresAt: Number(v.lease_expires_at),
    traceContext: trace,
    group: null,
    lost: false,
    cancelRequested: false,
  };
}

/**
 * `backlog serve`'s API at `baseUrl` (`http://127.0.0.1:8080`) with `token` sent as
 * `Authorization: Bearer TOKEN` (a `produce` or `admin` token).
 *
 * @example
 * const http = new HttpClient("http://127.0.0.1:8080", process.env.BACKLOG_TOKEN);
 * await http.enqueue("emails", { to: "a@example.com" }, { delay: 60 });
 */
export class HttpClient {
  readonly baseUrl: string;
  /** What claims record as the lease owner. */
  readonly worker: string;
  /** Requests sent (answered or not), for tests and curiosity. */
  requests = 0;

  constructor(
    baseUrl: string,
    readonly token?: string,
    opts: { timeoutMs?: number; worker?: string } = {},
  ) {
    let u: URL;
    try {
      u = new URL(baseUrl);
    } catch {
      throw new InvalidOption(`baseUrl must be an http:// or https:// URL, not ${baseUrl}`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new InvalidOption(`baseUrl must be an http:// or https:// URL, not ${baseUrl}`);
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.worker = opts.worker ?? defaultOwner();
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  private readonly timeoutMs: number;

  /** Sends one request; its JSON answer (null for 204), or the error an error answer means. */
  async request(method: string, path: string, body?: string | object, headers: Record<string, string> = {}): Promise<any> {
    const sent: Record<string, string> = { accept: "application/json", ...headers };
    let data: string | undefined;
    if (body !== undefined) {
      data = typeof body === "string" ? body : JSON.stringify(body);
      sent["content-type"] = "application/json";
    }
    if (this.token !== undefined) sent.authorization = `Bearer ${this.token}`;
    this.requests++;
    const res = await fetch(this.baseUrl + path, {
      method,
      headers: sent,
      ...(data === undefined ? {} : { body: data }),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await res.text();
    if (!res.ok) throw errorOf(res.status, text);
    return text ? JSON.parse(text) : null;
  }

  /** The token's name and scope (`GET /api/v1/me`). */
  me(): Promise<{ name: string; scope: string }> {
    return this.request("GET", "/api/v1/me");
  }

  /**
   * Enqueues one job (`POST /api/v1/jobs`) and returns its id (for a taken unique key, the
   * holder's). `runAt` is sent as a delay from this machine's clock.
   */
  async enqueue(queue: string, payload: unknown, opts: EnqueueOpts = {}): Promise<number> {
    const b = body({ ...opts, queue, payload });
    try {
      return Number((await this.request("POST", "/api/v1/jobs", b.text, traceHeaders(b.trace))).id);
    } catch (err) {
      if (err instanceof HttpError && err.code === "unique_key_taken" && err.jobId !== undefined) return err.jobId;
      throw err;
    }
  }

  /**
   * Enqueues jobs in one request (`POST /api/v1/jobs/batch`, up to 10,000), all or none; their
   * ids in order. A batch has one trace context (the request's `traceparent`).
   */
  async enqueueMany(jobs: Iterable<NewJob>, opts: { traceContext?: check.TraceContext } = {}): Promise<number[]> {
    const checked = Array.from(jobs, (j, i) => body(j, i));
    if (checked.length < 1 || checked.length > MAX_BATCH) {
      throw new InvalidOption(`a batch holds 1 to ${MAX_BATCH} jobs, not ${checked.length}`);
    }
    const traces = new Set(checked.map((c) => c.trace));
    if (opts.traceContext !== undefined) {
      traces.add(check.traceContext(opts.traceContext));
      traces.delete(null);
    }
    if (traces.size > 1) throw new InvalidOption("the jobs of a batch share one trace context over HTTP");
    const trace = [...traces][0] ?? null;
    const out = await this.request("POST", "/api/v1/jobs/batch", `{"jobs":[${checked.map((c) => c.text).join(",")}]}`, traceHeaders(trace));
    return (out.jobs as { id: number }[]).map((j) => Number(j.id));
  }

  /** Claims up to `limit` (1 to 1,000) due jobs of `queue`, each leased for `leaseMs`. */
  async claim(queue: string, limit = 1, opts: { leaseMs?: number; kinds?: readonly string[] } = {}): Promise<Job[]> {
    check.name("queue name", queue);
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 1000) throw new InvalidOption(`limit must be 1 to 1,000, not ${limit}`);
    const b: Record<string, unknown> = { limit, worker: this.worker };
    const lease = leaseText(opts.leaseMs);
    if (lease) b.lease = lease;
    if (opts.kinds?.length) b.kinds = opts.kinds.map((k) => check.name("kind", k));
    const out = await this.request("POST", `/api/v1/queues/${queue}/claim`, b);
    return (out.jobs as Record<string, unknown>[]).map(jobOf);
  }

  /** A call carrying the job's lease token: [true, answer], or [false] when the lease was lost. */
  private async fenced(job: Job, action: string, b: Record<string, unknown>, strict?: boolean): Promise<[boolean, any]> {
    try {
      return [true, await this.request("POST", `/api/v1/jobs/${job.id}/${action}`, { token: String(job.token), ...b })];
    } catch (err) {
      if (!(err instanceof LeaseLost) && !(err instanceof HttpError && err.code === "job_not_found")) throw err;
      job.lost = true;
      if (strict) throw new LeaseLost(job.id, action, { cause: err });
      return [false, null];
    }
  }

  /** Extends the job's lease (default: the queue's); whether it held. Sets `cancelRequested`. */
  async heartbeat(job: Job, opts: { leaseMs?: number; strict?: boolean } = {}): Promise<boolean> {
    const lease = leaseText(opts.leaseMs);
    const [ok, out] = await this.fenced(job, "heartbeat", lease ? { lease } : {}, opts.strict);
    if (!ok) return false;
    job.leaseExpiresAt = Number(out.lease_expires_at);
    job.cancelRequested ||= Boolean(out.cancel_requested);
    return true;
  }

  /** Stores `progress` (any JSON value) on the running job; whether the lease held. */
  async progress(job: Job, progress: unknown, opts: { strict?: boolean } = {}): Promise<boolean> {
    check.payload(progress, "progress");
    return (await this.fenced(job, "progress", { progress }, opts.strict))[0];
  }

  /** Completes one job (`result` stored with it); whether its lease held. */
  async complete(job: Job, opts: { result?: unknown; strict?: boolean } = {}): Promise<boolean> {
    const b: Record<string, unknown> = {};
    if (opts.result !== undefined) {
      check.payload(opts.result, "result");
      b.result = opts.result;
    }
    return (await this.fenced(job, "complete", b, opts.strict))[0];
  }

  /** Completes many (a request per queue and 1,000); the ids completed (the rest are marked lost). */
  async completeMany(jobs: readonly Job[], opts: { strict?: boolean } = {}): Promise<Set<number>> {
    const done = new Set<number>();
    const byQueue = new Map<string, Job[]>();
    for (const j of jobs) {
      const q = check.name("queue name", j.queue);
      byQueue.set(q, [...(byQueue.get(q) ?? []), j]);
    }
    for (const [queue, held] of byQueue) {
      for (let at = 0; at < held.length; at += MAX_COMPLETE) {
        const part = held.slice(at, at + MAX_COMPLETE);
        const out = await this.request("POST", `/api/v1/queues/${queue}/complete`, {
          jobs: part.map((j) => ({ id: j.id, token: String(j.token) })),
        });
        for (const id of out.completed as number[]) done.add(Number(id));
      }
    }
    const lost = jobs.filter((j) => !done.has(j.id));
    for (const j of lost) j.lost = true;
    if (opts.strict && lost.length) throw new LeaseLost(lost[0]!.id, "complete");
    return done;
  }

  /**
   * Records a failed attempt: retried after the queue's backoff, or after `retryIn` seconds;
   * dead when its attempts are used up, or at once with `discard`. Returns "retry", "dead",
   * "cancelled" or "lost".
   */
  async fail(job: Job, error: string, opts: { retryIn?: number; discard?: boolean; strict?: boolean } = {}): Promise<Outcome> {
    if (typeof error !== "string") throw new InvalidOption(`error must be a string, not ${String(error)}`);
    if (opts.retryIn !== undefined && opts.discard) throw new InvalidOption("give retryIn or discard, not both");
    const b: Record<string, unknown> = { error: Buffer.from(error).subarray(0, 64 * 1024).toString() };
    if (opts.retryIn !== undefined) b.retry_in = duration(Math.max(check.delayUs(opts.retryIn, "retryIn"), 1));
    if (opts.discard) b.discard = true;
    const [ok, out] = await this.fenced(job, "fail", b, opts.strict);
    return ok ? (String(out.outcome) as Outcome) : "lost";
  }
}

class HttpSource implements Source {
  private emptyForMs = 0;
  constructor(
    private readonly client: HttpClient,
    private readonly queue: string,
    private readonly opts: WorkerOpts & { drainIdleMs?: number },
  ) {}

  async start(): Promise<number> {
    return this.opts.leaseMs ?? 30_000;
  }

  async tick(): Promise<void> {}

  async claim(limit: number): Promise<Job[]> {
    try {
      return await this.client.claim(this.queue, limit, {
        leaseMs: this.opts.leaseMs ?? 30_000,
        ...(this.opts.kinds ? { kinds: this.opts.kinds } : {}),
      });
    } catch (err) {
      if (err instanceof HttpError && (err instanceof Unauthorized || err.status < 500)) throw err;
      if (err instanceof BacklogError) throw err;
      return []; // the server restarts, or its database: the loop tries again
    }
  }

  complete(jobs: Job[]): Promise<Set<number>> {
    return this.client.completeMany(jobs);
  }

  fail(job: Job, error: string, retryInUs: number | null): Promise<Outcome> {
    return this.client.fail(job, error, retryInUs === null ? {} : { retryIn: retryInUs / 1e6 });
  }

  cancel(job: Job): Promise<Outcome> {
    return this.client.fail(job, "cancelled by an operator");
  }

  heartbeat(job: Job): Promise<boolean> {
    return this.client.heartbeat(job, { leaseMs: this.opts.leaseMs ?? 30_000 });
  }

  async giveBack(job: Job): Promise<void> {
    // The protocol has no release: a failed attempt retried at once.
    job.lost = false;
    await this.client.fail(job, "not finished: the worker stopped", { retryIn: 0 }).catch(() => undefined);
    job.lost = true;
  }

  async drained(emptyForMs: number): Promise<boolean> {
    this.emptyForMs = emptyForMs;
    return this.emptyForMs >= (this.opts.drainIdleMs ?? 1000);
  }

  async close(): Promise<void> {}
}

/**
 * A worker over HTTP: the loop of `Worker` (batch claims, concurrency, heartbeats, batched
 * completions, graceful stop) through `backlog serve`. `run({ drain: true })` returns once
 * claims have found nothing for `drainIdleMs` (1 s).
 *
 * @example
 * const http = new HttpClient("http://127.0.0.1:8080", process.env.BACKLOG_TOKEN);
 * await new HttpWorker(http, "emails", async (job) => send(job.payload)).run();
 */
export class HttpWorker extends WorkerLoop {
  constructor(client: HttpClient, queue: string, handler: Handler, opts: WorkerOpts & { drainIdleMs?: number } = {}) {
    check.name("queue name", queue);
    for (const k of opts.kinds ?? []) check.name("kind", k);
    leaseText(opts.leaseMs);
    super(new HttpSource(client, queue, opts), handler, opts);
  }
}
