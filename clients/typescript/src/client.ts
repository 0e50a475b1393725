/**
 * The client: one connection of its own to a queue database, and the contract's operations on
 * it (docs/sql.md): enqueue, claim, complete, fail, heartbeat, release, rescue. Each operation
 * is the catalog's statement of the dialect (QUERIES), run with bound values.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { type Answer, type Db, type Flavor, MysqlDb, PgDb, SqliteDb, statement } from "./db.js";
import { LeaseLost, SchemaMissing, SchemaTooOld } from "./errors.js";
import { type Job, defaultOwner } from "./job.js";
import { type EnqueueOpts, type NewJob, dbNowUs, insert, localUs, newToken, row, rows } from "./produce.js";

/** The schema version this client speaks (docs/sql.md "Version"); its minor version follows it. */
export const SCHEMA_VERSION = 20;
/** Most expired leases one rescue statement moves. */
export const RESCUE_BATCH = 1000;
/** A scan's floor for a full pass: the smallest 64-bit integer. */
const FULL_PASS = -(1n << 63n);

/** A queue's settings (its row of backlog_queue, or the defaults when it has none). */
export interface QueueSettings {
  paused: boolean;
  maxAttempts: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  leaseMs: number;
  ordering: "fifo" | "lifo";
  retention: "keep" | "delete" | "archive";
}

/** Defaults of a queue without a row in backlog_queue (docs/sql.md, table backlog_queue). */
export const QUEUE_DEFAULTS: Readonly<QueueSettings> = {
  paused: false,
  maxAttempts: 25,
  backoffBaseMs: 1000,
  backoffMaxMs: 3_600_000,
  leaseMs: 30_000,
  ordering: "fifo",
  retention: "keep",
};

/** Options of the fenced calls: `strict` throws LeaseLost instead of answering false / "lost". */
export interface Strict {
  strict?: boolean;
}

function held(ok: boolean, strict: boolean | undefined, job: Job, operation: string): boolean {
  if (!ok && strict) throw new LeaseLost(job.id, operation);
  return ok;
}

/** The retry delay after attempt `attempt`: min(base · 2^(attempt−1), max), jittered down to half. */
export function backoffUs(attempt: number, s: QueueSettings): number {
  const ms = Math.min(s.backoffBaseMs * 2 ** Math.max(attempt - 1, 0), s.backoffMaxMs);
  return Math.round((ms / 2 + Math.random() * (ms / 2)) * 1000);
}

const num = (v: unknown): number => Number(v);
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

/** Whether a driver error rolled back a transaction that can simply run again. */
function transient(flavor: Flavor, err: unknown): boolean {
  const e = err as { code?: string; errno?: number };
  if (flavor === "postgres") return e.code === "40P01" || e.code === "40001";
  if (flavor === "mysql") return e.errno === 1213 || e.errno === 1205;
  return false;
}

/** Whether a driver error says the table a statement reads does not exist. */
function tableMissing(flavor: Flavor, err: unknown): boolean {
  const e = err as { code?: string; errno?: number; message?: string };
  if (flavor === "postgres") return e.code === "42P01";
  if (flavor === "mysql") return e.errno === 1146;
  return /no such table/.test(String(e.message));
}

/** Opens one connection to the database the URL names and checks its schema. */
async function open(url: string): Promise<{ db: Db; close: () => Promise<void> }> {
  if (url.startsWith("sqlite://")) {
    const path = url.slice("sqlite://".length).split("?")[0]!;
    const { default: Database } = await import("better-sqlite3");
    let conn;
    try {
      conn = new Database(path, { fileMustExist: true, timeout: 30_000 });
    } catch (err) {
      if ((err as { code?: string }).code === "SQLITE_CANTOPEN") {
        throw new SchemaMissing(`${path}: no such database file (run \`backlog migrate\`)`);
      }
      throw err;
    }
    // WAL, synchronous FULL and a 30 s busy timeout, as the library opens it (docs/sql.md
    // "Session settings"): writers queue on the lock instead of failing at once.
    conn.pragma("busy_timeout = 30000");
    conn.pragma("journal_mode = WAL");
    conn.pragma("synchronous = FULL");
    return { db: new SqliteDb(conn), close: async () => void conn.close() };
  }
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) {
    const { default: pg } = await import("pg");
    // Nothing to set; backlog.notify is left on, so this process's inserts wake the workers.
    const conn = new pg.Client({ connectionString: url });
    await conn.connect();
    conn.on("error", () => undefined); // a lost connection fails the next query instead
    return { db: new PgDb(conn as never, true), close: () => conn.end() };
  }
  if (url.startsWith("mysql://") || url.startsWith("mariadb://")) {
    const { default: mysql } = await import("mysql2/promise");
    const u = new URL(url.replace(/^mariadb:/, "mysql:"));
    const conn = await mysql.createConnection({
      host: u.hostname || "127.0.0.1",
      port: Number(u.port || 3306),
      user: decodeURIComponent(u.username || "root"),
      password: decodeURIComponent(u.password),
      database: decodeURIComponent(u.pathname.slice(1)),
      charset: "utf8mb4",
      supportBigNumbers: true,
      bigNumberStrings: true,
      // FOUND_ROWS: an UPDATE reports the rows its WHERE matched, so a fenced statement that
      // writes values a row already has still counts 1 (docs/sql.md "Session settings").
      flags: ["+FOUND_ROWS"],
    });
    conn.on("error", () => undefined);
    // READ COMMITTED: no gap locks between claimers and producers. UTC: NOW(6) has no
    // daylight-saving hour that maps to two instants.
    await conn.query("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    await conn.query("SET time_zone = '+00:00'");
    return { db: new MysqlDb(conn as never), close: () => conn.end() };
  }
  throw new TypeError(`expected sqlite://PATH, postgres://… or mysql://…, not ${url}`);
}

/**
 * One connection and the contract's operations on it. Operations on one Client run one at a
 * time (a worker opens a Client per role, so its claims, outcomes and heartbeats run side by
 * side).
 *
 * @example
 * const client = await Client.connect("postgres://app@127.0.0.1/app");
 * await client.enqueue("emails", { to: "a@example.com" }, { delay: 60 });
 * const [job] = await client.claim("emails", 1);
 * if (job) await client.complete(job);
 * await client.close();
 */
export class Client {
  /** The offset of the database's clock from this machine's, in µs (see `syncClock`). */
  offsetUs = 0;
  private synced = 0;
  private queue: Promise<unknown> = Promise.resolve();
  /**
   * Set inside `transaction`'s body, and only there: its own calls join the open transaction,
   * while calls from elsewhere (another handler, a timer) wait for it to end instead of
   * running inside it.
   */
  private readonly scope = new AsyncLocalStorage<true>();

  private constructor(
    readonly url: string,
    readonly db: Db,
    private readonly closer: () => Promise<void>,
  ) {}

  /**
   * Opens one connection to the database `url` names (`sqlite:///abs/path.db` or
   * `sqlite://relative.db`, `postgres://…`, `mysql://user:password@host:port/db`) and checks
   * its schema: SchemaMissing when it has none, SchemaTooOld below SCHEMA_VERSION.
   */
  static async connect(url: string, opts: { checkSchema?: boolean } = {}): Promise<Client> {
    const { db, close } = await open(url);
    const client = new Client(url, db, close);
    try {
      if (opts.checkSchema !== false) await client.schemaVersion();
      await client.syncClock();
    } catch (err) {
      await close();
      throw err;
    }
    return client;
  }

  /** Which database this client talks to. */
  get flavor(): Flavor {
    return this.db.flavor;
  }

  /** Closes the connection. */
  close(): Promise<void> {
    return this.closer();
  }

  /** Whether the caller runs inside this client's `transaction` body. */
  get inTransaction(): boolean {
    return this.scope.getStore() === true;
  }

  /** Runs `op` when the operations before it are done (one connection, one thing at a time). */
  private serial<T>(op: () => Promise<T>): Promise<T> {
    if (this.inTransaction) return op();
    const run = this.queue.then(op, op);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Runs `op` again when the database rolled it back as a deadlock victim (nothing changed). */
  private async retrying<T>(op: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await op();
      } catch (err) {
        if (this.inTransaction || attempt >= 9 || !transient(this.flavor, err)) throw err;
        await new Promise((r) => setTimeout(r, (1 + Math.random() * 9) * (attempt + 1)));
      }
    }
  }

  private run(name: string, values: readonly unknown[], ids = 0): Promise<Answer> {
    return this.db.run(statement(this.flavor, name, ids), values);
  }

  /**
   * BEGIN (IMMEDIATE on SQLite: the write lock at once), `body`, COMMIT; ROLLBACK on error.
   * Inside `transaction`, `body` runs in the transaction already open.
   */
  private async tx<T>(body: () => Promise<T>): Promise<T> {
    if (this.inTransaction) return body();
    const begin = this.flavor === "sqlite" ? "BEGIN IMMEDIATE" : this.flavor === "mysql" ? "START TRANSACTION" : "BEGIN";
    await this.db.run(begin, []);
    let out: T;
    try {
      out = await body();
    } catch (err) {
      await this.db.run("ROLLBACK", []).catch(() => undefined);
      throw err;
    }
    await this.db.run("COMMIT", []);
    return out;
  }

  /**
   * A transaction on this client's connection: `body` gets the connection's `Db` for your own
   * statements (`db.run(sql, values)`, or the driver's own connection, `db.conn`). What this
   * client does from inside `body` joins it: jobs it enqueues exist exactly when it commits,
   * and a `complete` there is written in the same commit as your rows (transactional
   * completion). A throw from `body` rolls it all back and rethrows; so does a `complete` whose
   * lease was lost, which inside a transaction is strict by default (`LeaseLost`). Calls from
   * outside `body` wait until it ends. A `transaction` inside one joins it.
   *
   * @example
   * await client.transaction(async (db) => {
   *   await db.run("INSERT INTO receipt (job) VALUES ($1)", [job.id]);
   *   await client.complete(job);     // LeaseLost (and nothing written) if the lease was lost
   * });
   */
  transaction<T>(body: (db: Db) => Promise<T>): Promise<T> {
    if (this.inTransaction) return body(this.db);
    return this.serial(() => this.tx(() => this.scope.run(true, () => body(this.db))));
  }

  /** The schema version (the last migration applied): SchemaMissing / SchemaTooOld as `connect`. */
  schemaVersion(): Promise<number> {
    return this.serial(async () => {
      let version: number;
      try {
        version = num((await this.run("schema_version", [])).rows[0]![0]);
      } catch (err) {
        if (tableMissing(this.flavor, err)) {
          throw new SchemaMissing("the database has no backlog schema (run `backlog migrate`)");
        }
        throw err;
      }
      if (version === 0) throw new SchemaMissing("the database has no backlog schema (run `backlog migrate`)");
      if (version < SCHEMA_VERSION) throw new SchemaTooOld(version, SCHEMA_VERSION);
      return version;
    });
  }

  /**
   * The database's time in µs since the epoch: this machine's clock plus the offset `syncClock`
   * measured. Every statement binds it as `now`, so workers whose clocks disagree still agree
   * on leases and due times.
   */
  nowUs(): number {
    return localUs() + this.offsetUs;
  }

  /** Measures the database's clock minus this machine's (best of three round trips), keeps it. */
  syncClock(): Promise<number> {
    return this.serial(async () => {
      let best: [number, number] | null = null;
      for (let i = 0; i < 3; i++) {
        const before = localUs();
        const dbNow = await dbNowUs(this.db);
        const after = localUs();
        if (best === null || after - before < best[1]) best = [dbNow - Math.round((before + after) / 2), after - before];
      }
      this.offsetUs = best![0];
      this.synced = performance.now();
      return this.offsetUs;
    });
  }

  private async now(): Promise<number> {
    if (performance.now() - this.synced > 60_000 && !this.inTransaction) {
      this.synced = performance.now();
      await this.syncClock();
    }
    return this.nowUs();
  }

  // ---- producing

  /** Enqueues one job (the options of `enqueue`) and returns its id. */
  async enqueue(queue: string, payload: unknown, opts: EnqueueOpts = {}): Promise<number> {
    const job = row({ ...opts, queue, payload });
    const now = await this.now();
    return this.serial(() => this.retrying(async () => (await insert(this.db, [job], this, now))[0]!));
  }

  /** Enqueues jobs, all or none, each checked before the first is written; their ids in order. */
  async enqueueMany(jobs: Iterable<NewJob>): Promise<number[]> {
    const checked = rows(jobs);
    const now = await this.now();
    return this.serial(() => this.retrying(() => insert(this.db, checked, this, now)));
  }

  // ---- consuming: each outcome is fenced by the claim's token

  /** The queue's settings: its row of backlog_queue, or the defaults. */
  queueSettings(queue: string): Promise<QueueSettings> {
    return this.serial(async () => {
      const r = (await this.run("queue_get", [queue])).rows[0];
      if (!r) return { ...QUEUE_DEFAULTS };
      return {
        paused: Boolean(Number(r[1])),
        maxAttempts: num(r[2]),
        backoffBaseMs: num(r[3]),
        backoffMaxMs: num(r[4]),
        leaseMs: num(r[5]),
        ordering: String(r[6]) === "lifo" ? "lifo" : "fifo",
        retention: String(r[7]) as QueueSettings["retention"],
      };
    });
  }

  /**
   * Claims up to `limit` due jobs of `queue` with the dialect's claim statement, under one
   * fresh lease token, in the queue's order. `kinds`: only jobs of these kinds.
   */
  async claim(
    queue: string,
    limit: number,
    opts: { owner?: string; leaseMs?: number; kinds?: readonly string[]; settings?: QueueSettings } = {},
  ): Promise<Job[]> {
    const settings = opts.settings ?? (await this.queueSettings(queue));
    const leaseUs = (opts.leaseMs ?? settings.leaseMs) * 1000;
    const token = newToken();
    const now = await this.now();
    const expires = now + leaseUs;
    const owner = opts.owner ?? defaultOwner();
    const order = settings.ordering;
    const kinds = opts.kinds ? [...opts.kinds] : null;
    const name = `job_claim_${order}`;
    const found = await this.serial(() =>
      this.retrying(async (): Promise<unknown[][]> => {
        if (this.flavor === "sqlite") {
          return (await this.run(name, [token, owner, expires, now, queue, kinds && JSON.stringify(kinds), limit])).rows;
        }
        if (this.flavor === "postgres") {
          // FIFO takes the claim cursors (docs/sql.md "Claim cursors"): none, a full pass.
          const values = [token, owner, expires, now, queue, kinds, limit];
          return (await this.run(name, order === "fifo" ? [...values, []] : values)).rows;
        }
        // MySQL: no UPDATE … RETURNING: lock the rows with SKIP LOCKED, shard by shard from a
        // random one, then mark them, in one transaction.
        const kindsJson = kinds && JSON.stringify(kinds);
        return this.tx(async () => {
          const n = Math.max(1, num((await this.run("queue_shards", [queue])).rows[0]![0]));
          const first = Math.floor(Math.random() * n);
          const got: unknown[][] = [];
          for (let k = 0; k < n && got.length < limit; k++) {
            const shard = (first + k) % n;
            const rest = limit - got.length;
            const values =
              order === "fifo"
                ? [queue, shard, now, kindsJson, kindsJson, null, null, null, null, null, null, queue, rest]
                : [queue, shard, now, kindsJson, kindsJson, queue, rest];
            got.push(...(await this.run(name, values)).rows);
          }
          if (got.length) {
            const ids = got.map((r) => r[0]);
            await this.run("job_claim_update", [token, owner, expires, now, ...ids], ids.length);
          }
          return got;
        });
      }),
    );
    const jobs: Job[] = found.map((r) => ({
      id: num(r[0]),
      queue,
      kind: strOrNull(r[1]),
      payload: JSON.parse(String(r[2])),
      priority: num(r[3]),
      attempt: num(r[4]),
      maxAttempts: numOrNull(r[5]),
      runAt: num(r[6]),
      createdAt: num(r[7]),
      token,
      leaseExpiresAt: expires,
      traceContext: strOrNull(r[8]),
      group: strOrNull(r[9]),
      lost: false,
      cancelRequested: false,
    }));
    // UPDATE … RETURNING gives rows in no particular order: the claim's order again.
    const sign = order === "fifo" ? 1 : -1;
    return jobs.sort((a, b) => a.priority - b.priority || sign * (a.runAt - b.runAt) || sign * (a.id - b.id));
  }

  /**
   * Completes jobs as the queue's retention says (`keep`, `delete` or `archive`), each only
   * while its lease holds: one statement for the batch. Returns the ids completed; a job not
   * among them lost its lease (nothing changed; it is marked `lost`).
   */
  async completeMany(jobs: readonly Job[], opts: { retention?: QueueSettings["retention"] } = {}): Promise<Set<number>> {
    if (!jobs.length) return new Set();
    const retention = opts.retention ?? (await this.queueSettings(jobs[0]!.queue)).retention;
    const now = await this.now();
    const done = await this.serial(() => this.retrying(() => this.completeWith(retention, jobs, now)));
    for (const j of jobs) if (!done.has(j.id)) j.lost = true;
    return done;
  }

  private async completeWith(retention: QueueSettings["retention"], jobs: readonly Job[], now: number): Promise<Set<number>> {
    const ids = (a: Answer): Set<number> => new Set(a.rows.map((r) => num(r[0])));
    if (this.flavor === "sqlite") {
      const pairs = `[${jobs.map((j) => `[${j.id},${j.token}]`).join(",")}]`;
      if (retention === "delete") return ids(await this.run("job_complete_delete", [pairs]));
      if (retention === "keep") return ids(await this.run("job_complete_keep", [pairs, now]));
      return this.tx(async () => {
        await this.run("job_complete_archive", [pairs, now]);
        return ids(await this.run("job_complete_delete", [pairs]));
      });
    }
    if (this.flavor === "postgres") {
      const values: unknown[] = [jobs.map((j) => j.id), jobs.map((j) => j.token)];
      if (retention !== "delete") values.push(now);
      return ids(await this.run(`job_complete_${retention}`, values));
    }
    // MySQL: no RETURNING. Lock the rows, keep those still running under their token, copy
    // them where they are kept (keep: the completed jobs' ring), delete them; one transaction.
    return this.tx(async () => {
      const all = jobs.map((j) => j.id);
      const tokens = new Map(jobs.map((j) => [j.id, String(j.token)]));
      const locked = (await this.run("job_complete_lock", all, all.length)).rows;
      const mine = locked.filter((r) => String(r[2]) === "running" && String(r[1]) === tokens.get(num(r[0]))).map((r) => num(r[0]));
      if (mine.length) {
        if (retention !== "delete") await this.run(`job_complete_${retention}`, [now, ...mine], mine.length);
        await this.run("job_complete_delete", mine, mine.length);
      }
      return new Set(mine);
    });
  }

  /**
   * Completes one job: whether its lease held (LeaseLost with `strict` when it did not). Inside
   * `transaction`, `strict` is the default: a lost lease throws, and the transaction rolls back.
   */
  async complete(job: Job, opts: { retention?: QueueSettings["retention"] } & Strict = {}): Promise<boolean> {
    const done = await this.completeMany([job], opts);
    return held(done.has(job.id), opts.strict ?? this.inTransaction, job, "complete");
  }

  private async failAs(job: Job, state: string, runAt: number, finishedAt: number | null, now: number, error: string): Promise<boolean> {
    const values =
      this.flavor === "mysql"
        ? [now, error, state, state, runAt, finishedAt, job.id, job.token]
        : [state, runAt, finishedAt, now, error, job.id, job.token];
    const ok = await this.serial(() => this.retrying(async () => (await this.run("job_fail", values)).affected === 1));
    if (!ok) job.lost = true;
    return ok;
  }

  /**
   * Fails this attempt with `error`: a retry at `retryAt` (µs since the epoch, the database's
   * clock; default the queue's backoff), or dead when it was the last attempt. Returns "retry",
   * "dead", or "lost" (the lease was lost; nothing changed).
   */
  async fail(job: Job, error: string, opts: { retryAt?: number; settings?: QueueSettings } & Strict = {}): Promise<Outcome3> {
    const settings = opts.settings ?? (await this.queueSettings(job.queue));
    const now = await this.now();
    const limit = job.maxAttempts ?? settings.maxAttempts;
    const dead = job.attempt >= limit;
    const runAt = dead ? now : (opts.retryAt ?? now + backoffUs(job.attempt, settings));
    const ok = await this.failAs(job, dead ? "dead" : "available", runAt, dead ? now : null, now, error);
    if (!held(ok, opts.strict, job, "fail")) return "lost";
    return dead ? "dead" : "retry";
  }

  /** Answers a requested cancel: the job ends `cancelled`. False when the lease was lost. */
  async cancel(job: Job, reason = "cancelled", opts: Strict = {}): Promise<boolean> {
    const now = await this.now();
    return held(await this.failAs(job, "cancelled", now, now, now, reason), opts.strict, job, "cancel");
  }

  /**
   * Extends the job's lease to now + lease. False when the lease was lost (stop the job, report
   * nothing). Sets `job.cancelRequested` when an operator asked for its cancellation.
   */
  async heartbeat(job: Job, opts: { leaseMs?: number } & Strict = {}): Promise<boolean> {
    const leaseMs = opts.leaseMs ?? (await this.queueSettings(job.queue)).leaseMs;
    const expires = (await this.now()) + leaseMs * 1000;
    const [ok, cancel] = await this.serial(() =>
      this.retrying(async (): Promise<[boolean, boolean]> => {
        if (this.flavor === "mysql") {
          if ((await this.run("job_heartbeat", [expires, job.id, job.token])).affected !== 1) return [false, false];
          const r = (await this.run("job_heartbeat_cancel", [job.id, job.token])).rows[0];
          return r ? [true, Boolean(Number(r[0]))] : [false, false];
        }
        const r = (await this.run("job_heartbeat", [expires, job.id, job.token])).rows[0];
        return r ? [true, Boolean(r[0] === true || Number(r[0]))] : [false, false];
      }),
    );
    if (ok) {
      job.leaseExpiresAt = expires;
      job.cancelRequested ||= cancel;
    } else {
      job.lost = true;
    }
    return held(ok, opts.strict, job, "heartbeat");
  }

  /** Gives the job back without using an attempt, to run at `runAt` (default now). */
  async release(job: Job, opts: { runAt?: number } & Strict = {}): Promise<boolean> {
    const at = opts.runAt ?? (await this.now());
    const ok = await this.serial(() =>
      this.retrying(async () => (await this.run("job_release", [at, job.id, job.token])).affected === 1),
    );
    if (!ok) job.lost = true;
    return held(ok, opts.strict, job, "release");
  }

  /**
   * Makes jobs whose lease expired available again (dead after their last attempt). Safe from
   * any number of processes at once. Returns how many it moved.
   */
  async rescue(limit = RESCUE_BATCH): Promise<number> {
    const now = await this.now();
    return this.serial(() =>
      this.retrying(async () => {
        if (this.flavor !== "mysql") return (await this.run("job_rescue", [now, limit, FULL_PASS])).rows.length;
        return this.tx(async () => {
          const ids = (await this.run("job_rescue_ids", [now, FULL_PASS, limit, now, limit])).rows.map((r) => r[0]);
          if (!ids.length) return 0;
          return (await this.run("job_rescue", [now, now, now, ...ids, now], ids.length)).affected;
        });
      }),
    );
  }

  /** Jobs of the queue available (due or not), running or waiting: 0 means drained. */
  pending(queue: string): Promise<number> {
    return this.serial(async () => {
      const values =
        this.flavor === "sqlite"
          ? [JSON.stringify([queue]), null, null]
          : this.flavor === "postgres"
            ? [[queue], null, null]
            : [queue, null, null, null, null];
      return num((await this.run("job_count_pending", values, 1)).rows[0]![0]);
    });
  }
}

/** What `fail` answers. */
export type Outcome3 = "retry" | "dead" | "lost";
