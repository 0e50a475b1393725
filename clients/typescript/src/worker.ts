/**
 * A worker: claims batches of one queue, runs a handler for each job (up to `concurrency` at
 * once), renews the leases of the jobs it holds every third of the lease, and records each
 * outcome fenced by the lease: completions batched into one statement (or request), failures
 * with the queue's backoff or the delay a `Retry` asks. SIGTERM and SIGINT stop it gracefully:
 * no more claims, the jobs in hand get `graceMs` to finish, and those still running after it are
 * released (their late outcome is refused). The same loop runs over SQL (`Worker`) and over
 * HTTP (`HttpWorker`, in http.ts): only the source of jobs differs. Over SQL, `transactional`
 * runs each handler in a transaction that also completes its job: the handler's writes commit
 * exactly when the job is completed.
 */
import { Client, type QueueSettings } from "./client.js";
import type { Db } from "./db.js";
import { name as checkName } from "./validate.js";
import { InvalidOption, LeaseLost } from "./errors.js";
import { type Job, type Outcome, Retry, defaultOwner } from "./job.js";

/** A handler: resolve to complete the job, throw (or reject) to fail it (`Retry` picks the delay). */
export type Handler = (job: Job, signal: AbortSignal) => unknown | Promise<unknown>;

/**
 * The handler of a `transactional` worker: `db` is a transaction open on a connection of the
 * worker's; what the handler writes there commits together with the job's completion. Resolve
 * to complete the job (in that commit); throw to roll its writes back and fail the job.
 */
export type TransactionalHandler = (job: Job, db: Db, signal: AbortSignal) => unknown | Promise<unknown>;

/** Options of a worker. */
export interface WorkerOpts {
  /** Most jobs one claim takes; default 100. */
  batch?: number;
  /** Most handlers running at once; default 10. */
  concurrency?: number;
  /** Only jobs of these kinds. */
  kinds?: readonly string[];
  /** The lease, in ms; default the queue's. */
  leaseMs?: number;
  /** What `lease_owner` records; default `host:pid`. */
  owner?: string;
  /** Longest wait between claims that found nothing; default 1000 ms. */
  pollMaxMs?: number;
  /** After a stop, how long the jobs in hand may run before they are released; default 30 s. */
  graceMs?: number;
  /** Stop on SIGTERM and SIGINT while running; default true. */
  signals?: boolean;
  /** Hears what became of each job. */
  onOutcome?: (job: Job, outcome: Outcome) => void;
  /**
   * Over SQL only: run each handler inside a transaction, handing it the transaction's `Db`,
   * and complete the job in that transaction before it commits. A lost lease rolls the
   * handler's writes back (outcome `lost`); so does a throw (the job fails, as usual).
   */
  transactional?: boolean;
}

/** Where a worker's jobs come from and its outcomes go: the database, or `backlog serve`. */
export interface Source {
  /** The lease to renew, in ms; called once before the first claim. */
  start(): Promise<number>;
  /** Called before each claim: refreshes settings, rescues expired leases now and then. */
  tick(): Promise<void>;
  claim(limit: number): Promise<Job[]>;
  /** Completes jobs; the ids completed (the others lost their lease). */
  complete(jobs: Job[]): Promise<Set<number>>;
  /**
   * Runs `body` in a transaction and completes `job` in it before it commits (a transactional
   * worker's). Rejects, rolled back, with LeaseLost when the completion found the lease lost,
   * or with what `body` threw.
   */
  transact?(job: Job, body: (db: Db) => Promise<void>): Promise<void>;
  /** Fails a job; `retryInUs` null: the queue's backoff. */
  fail(job: Job, error: string, retryInUs: number | null): Promise<Outcome>;
  cancel(job: Job): Promise<Outcome>;
  heartbeat(job: Job): Promise<boolean>;
  /** Gives back a job the worker holds but will not finish. */
  giveBack(job: Job): Promise<void>;
  /** Whether a drain is done, asked after a claim found nothing and nothing is in hand. */
  drained(emptyForMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/** Thrown inside a transactional handler's transaction to roll it back when a cancel was asked. */
const CANCEL = Symbol("cancel requested");

/** What a transactional handler threw, told apart from the errors of the transaction itself. */
class Thrown {
  constructor(readonly error: unknown) {}
}

function positive(what: string, v: number | undefined, dflt: number, max = Infinity): number {
  const n = v ?? dflt;
  if (!Number.isSafeInteger(n) || n < 1 || n > max) throw new InvalidOption(`${what} must be an integer from 1 to ${max}, not ${n}`);
  return n;
}

/** The loop, over any Source. */
export class WorkerLoop {
  readonly batch: number;
  readonly concurrency: number;
  private readonly stopper = new AbortController();
  private readonly held = new Map<number, { job: Job; abort: AbortController }>();
  private readonly running = new Set<Promise<void>>();
  private finished: Job[] = [];
  private flushing: Promise<void> | null = null;

  constructor(
    protected readonly source: Source,
    readonly handler: Handler | TransactionalHandler,
    readonly opts: WorkerOpts,
  ) {
    this.batch = positive("batch", opts.batch, 100, 1000);
    this.concurrency = positive("concurrency", opts.concurrency, 10);
    if (opts.transactional && !source.transact) {
      throw new InvalidOption("transactional needs a worker over SQL: this one cannot open a transaction");
    }
  }

  /** Asks the worker to stop: no more claims; the jobs in hand get the grace period. */
  stop(): void {
    this.stopper.abort();
    this.poke();
  }

  private waiter: (() => void) | null = null;

  /** Waits `ms`, or less when poked (a job finished, a completion was written, a stop). */
  private nap(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        if (this.waiter === done) this.waiter = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiter = done;
    });
  }

  private poke(): void {
    this.waiter?.();
  }

  /** Whether `stop` was called (or a signal came). */
  get stopping(): boolean {
    return this.stopper.signal.aborted;
  }

  /**
   * Works until stopped, or, with `drain`, until the queue has nothing left for it. Resolves
   * once every job in hand has an outcome (or was released after the grace period).
   */
  async run(opts: { drain?: boolean } = {}): Promise<void> {
    const signals = this.opts.signals ?? true;
    const onSignal = (): void => this.stop();
    if (signals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    let beats: NodeJS.Timeout | undefined;
    try {
      const leaseMs = await this.source.start();
      beats = setInterval(() => void this.renew(), Math.max(leaseMs / 3, 10));
      let idle = 50;
      let emptySince: number | null = null;
      while (!this.stopping) {
        const room = Math.min(this.batch, this.concurrency - this.running.size);
        if (room <= 0 || this.finished.length >= 4 * this.batch) {
          await this.nap(1000); // until a job finishes or its completion is written
          continue;
        }
        await this.source.tick();
        const jobs = await this.source.claim(room);
        if (!jobs.length) {
          const now = performance.now();
          emptySince ??= now;
          if (opts.drain && this.running.size === 0 && this.finished.length === 0 && !this.flushing) {
            if (await this.source.drained(now - emptySince)) break;
          }
          await this.nap(idle);
          idle = Math.min(idle * 2, this.opts.pollMaxMs ?? 1000);
          continue;
        }
        idle = 50;
        emptySince = null;
        for (const job of jobs) this.start(job);
      }
      await this.settle();
    } finally {
      if (beats) clearInterval(beats);
      if (signals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
      await this.source.close();
    }
  }

  /** After a stop: the jobs in hand get the grace period, then the rest are released. */
  private async settle(): Promise<void> {
    const grace = this.opts.graceMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.running), new Promise((r) => (timer = setTimeout(r, grace)))]);
    clearTimeout(timer);
    if (this.running.size) {
      for (const { job, abort } of [...this.held.values()]) {
        if (this.finished.includes(job)) continue;
        abort.abort(new Error("the worker stopped"));
        job.lost = true; // its outcome, if it ever comes, is refused: the job is given back
        await this.source.giveBack(job).catch(() => undefined);
        this.held.delete(job.id);
      }
    }
    await (this.flushing ?? this.flush());
  }

  private start(job: Job): void {
    const abort = new AbortController();
    this.held.set(job.id, { job, abort });
    const p = this.runOne(job, abort.signal).finally(() => {
      this.running.delete(p);
      this.poke();
    });
    this.running.add(p);
  }

  private hear(job: Job, outcome: Outcome): void {
    this.held.delete(job.id);
    this.opts.onOutcome?.(job, outcome);
  }

  private async runOne(job: Job, signal: AbortSignal): Promise<void> {
    if (job.cancelRequested) return this.hear(job, await this.source.cancel(job));
    if (this.opts.transactional) return this.runInTransaction(job, signal);
    let failure: unknown = null;
    let failed = false;
    try {
      await (this.handler as Handler)(job, signal);
    } catch (err) {
      failed = true;
      failure = err;
    }
    if (job.lost && signal.aborted) return; // given back after the grace period
    if (job.lost) return this.hear(job, "lost");
    if (failed) return this.failWith(job, failure);
    if (job.cancelRequested) return this.hear(job, await this.source.cancel(job));
    // Completions go in batches: the next flush takes every job finished by then. The job
    // stays held (its lease renewed) until its completion is written.
    this.finished.push(job);
    this.flushing ??= this.flush();
  }

  /** Fails the attempt `failure` ended: the queue's backoff, or the delay of a `Retry`. */
  private async failWith(job: Job, failure: unknown): Promise<void> {
    let error: string;
    let retryIn: number | null = null;
    if (failure instanceof Retry) {
      error = failure.message;
      retryIn = Math.max(0, Math.round(failure.delay * 1_000_000));
    } else {
      error = failure instanceof Error ? `${failure.name}: ${failure.message}` : String(failure);
    }
    this.hear(job, await this.source.fail(job, error, retryIn).catch(() => "lost" as const));
  }

  /**
   * The handler and the job's completion in one transaction: completed when it commits; a lost
   * lease, a throw or a cancel asked meanwhile roll the handler's writes back.
   */
  private async runInTransaction(job: Job, signal: AbortSignal): Promise<void> {
    const handler = this.handler as TransactionalHandler;
    try {
      await this.source.transact!(job, async (db) => {
        await handler(job, db, signal);
        if (job.cancelRequested) throw CANCEL;
      });
      return this.hear(job, "completed");
    } catch (failure) {
      if (job.lost && signal.aborted) return; // given back after the grace period
      if (failure instanceof LeaseLost || job.lost) return this.hear(job, "lost");
      if (failure === CANCEL) return this.hear(job, await this.source.cancel(job));
      return this.failWith(job, failure);
    }
  }

  private async flush(): Promise<void> {
    try {
      while (this.finished.length) {
        const take = this.finished.splice(0, 1000);
        let done: Set<number>;
        try {
          done = await this.source.complete(take);
        } catch {
          done = new Set(); // the leases run out and the jobs are rescued: they run again
        }
        for (const job of take) this.hear(job, done.has(job.id) ? "completed" : "lost");
        this.poke();
      }
    } finally {
      this.flushing = null;
    }
  }

  private renewing = false;

  /** Renews the lease of every job held, running or waiting for its completion to be written. */
  private async renew(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      for (const { job, abort } of [...this.held.values()]) {
        if (job.lost) continue;
        const ok = await this.source.heartbeat(job).catch(() => true); // a hiccup: the next beat tries again
        if (!ok) abort.abort(new Error("the lease was lost"));
        if (job.cancelRequested) abort.abort(new Error("cancel requested"));
      }
    } finally {
      this.renewing = false;
    }
  }
}

/** Rescue of expired leases, at most once a second per worker, as backlog's own workers do. */
const RESCUE_EVERY_MS = 1000;

class SqlSource implements Source {
  private claims!: Client;
  private outcomes!: Client;
  private beats!: Client;
  private settings!: QueueSettings;
  private refreshed = 0;
  private rescued = 0;
  private leaseMs = 0;
  /** A transactional worker's connections for the handlers' transactions, idle ones and all. */
  private idle: Client[] = [];
  private readonly opened = new Set<Client>();

  constructor(
    private readonly url: string,
    private readonly queue: string,
    private readonly opts: WorkerOpts,
  ) {}

  async start(): Promise<number> {
    this.claims = await Client.connect(this.url);
    this.opened.add(this.claims);
    if (this.opts.transactional && this.claims.flavor === "sqlite") {
      // One connection for everything: a handler's transaction holds SQLite's one write lock
      // across its awaits, and better-sqlite3 would wait for it synchronously on a second
      // connection of this process, blocking the event loop that would finish it. On one
      // Client, the other calls wait their turn (asynchronously) until the transaction ends.
      this.outcomes = this.beats = this.claims;
    } else {
      // A connection per role, so that claims, completions and heartbeats do not wait on each other.
      this.outcomes = await Client.connect(this.url, { checkSchema: false });
      this.opened.add(this.outcomes);
      this.beats = await Client.connect(this.url, { checkSchema: false });
      this.opened.add(this.beats);
    }
    if (Math.abs(this.claims.offsetUs) > 1_000_000) {
      console.error(`backlog-client: this clock is ${(-this.claims.offsetUs / 1e6).toFixed(1)} s off the database's; fix it (NTP)`);
    }
    this.settings = await this.claims.queueSettings(this.queue);
    this.refreshed = performance.now();
    this.leaseMs = this.opts.leaseMs ?? this.settings.leaseMs;
    return this.leaseMs;
  }

  async tick(): Promise<void> {
    if (performance.now() - this.refreshed > 5000) {
      this.settings = await this.claims.queueSettings(this.queue);
      this.refreshed = performance.now();
    }
    // With no backlog process beside it, nobody else would recover a crashed worker's jobs.
    if (performance.now() - this.rescued >= RESCUE_EVERY_MS) {
      this.rescued = performance.now();
      await this.claims.rescue();
    }
  }

  claim(limit: number): Promise<Job[]> {
    return this.claims.claim(this.queue, limit, {
      owner: this.opts.owner ?? defaultOwner(),
      leaseMs: this.leaseMs,
      settings: this.settings,
      ...(this.opts.kinds ? { kinds: this.opts.kinds } : {}),
    });
  }

  complete(jobs: Job[]): Promise<Set<number>> {
    return this.outcomes.completeMany(jobs, { retention: this.settings.retention });
  }

  /**
   * The handler's transaction: on a connection of its own (one per handler running at once,
   * kept for the next), or on SQLite the worker's one connection, one transaction at a time.
   */
  async transact(job: Job, body: (db: Db) => Promise<void>): Promise<void> {
    const shared = this.claims.flavor === "sqlite";
    let client: Client;
    if (shared) {
      client = this.claims;
    } else {
      client = this.idle.pop() ?? (await Client.connect(this.url, { checkSchema: false }));
      this.opened.add(client);
    }
    let healthy = true;
    try {
      await client.transaction(async (db) => {
        try {
          await body(db);
        } catch (err) {
          throw new Thrown(err);
        }
        await client.complete(job, { retention: this.settings.retention, strict: true });
      });
    } catch (err) {
      if (err instanceof Thrown) throw err.error;
      // Not the handler's: LeaseLost, or the driver's own error (the connection may be gone).
      healthy = err instanceof LeaseLost;
      throw err;
    } finally {
      if (!shared) {
        if (healthy) {
          this.idle.push(client);
        } else {
          this.opened.delete(client);
          void client.close().catch(() => undefined);
        }
      }
    }
  }

  async fail(job: Job, error: string, retryInUs: number | null): Promise<Outcome> {
    const retryAt = retryInUs === null ? undefined : this.outcomes.nowUs() + retryInUs;
    return this.outcomes.fail(job, error, { settings: this.settings, ...(retryAt === undefined ? {} : { retryAt }) });
  }

  async cancel(job: Job): Promise<Outcome> {
    return (await this.outcomes.cancel(job, "cancelled by an operator")) ? "cancelled" : "lost";
  }

  heartbeat(job: Job): Promise<boolean> {
    return this.beats.heartbeat(job, { leaseMs: this.leaseMs });
  }

  async giveBack(job: Job): Promise<void> {
    job.lost = false; // release is fenced by the token, which still holds
    await this.outcomes.release(job);
    job.lost = true;
  }

  async drained(): Promise<boolean> {
    return (await this.claims.pending(this.queue)) === 0;
  }

  async close(): Promise<void> {
    await Promise.all([...this.opened].map((c) => c.close()));
    this.opened.clear();
    this.idle = [];
  }
}

/**
 * A worker over SQL: opens its own connections to `url` (one for claims, one for outcomes, one
 * for heartbeats) and works `queue` with `handler`.
 *
 * @example
 * const worker = new Worker("postgres://app@127.0.0.1/app", "emails", async (job) => {
 *   await send(job.payload);          // resolve: completed; throw: retried with backoff
 * }, { concurrency: 20 });
 * await worker.run();                 // until SIGTERM
 */
export class Worker extends WorkerLoop {
  /**
   * With `transactional: true` the handler gets the transaction's `Db` as its second argument;
   * its writes there commit in one transaction with the job's completion.
   *
   * @example
   * new Worker(url, "orders", async (job, db) => {
   *   await db.run("INSERT INTO shipment (order_id) VALUES ($1)", [job.payload.order]);
   * }, { transactional: true });
   */
  constructor(url: string, queue: string, handler: TransactionalHandler, opts: WorkerOpts & { transactional: true });
  constructor(url: string, queue: string, handler: Handler, opts?: WorkerOpts & { transactional?: false });
  constructor(url: string, queue: string, handler: Handler | TransactionalHandler, opts: WorkerOpts = {}) {
    checkName("queue name", queue);
    for (const k of opts.kinds ?? []) checkName("kind", k);
    super(new SqlSource(url, queue, opts), handler, opts);
  }
}
