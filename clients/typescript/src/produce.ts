/**
 * The producer: the catalog's multi-row INSERT (`job_insert_plain`, or `job_insert` when a job
 * has a unique key) on a connection, inside whatever transaction is open on it, never
 * committing, so a job exists exactly when the caller's own rows commit.
 */
import { randomBytes } from "node:crypto";
import { type Db, dbOf, statement } from "./db.js";
import { InvalidOption } from "./errors.js";
import * as check from "./validate.js";

/** The options of one job, besides its queue and payload. */
export interface EnqueueOpts {
  /** −32768..32767, lower runs first; default 0. */
  priority?: number;
  /** When it may run: µs since the epoch, or a Date. */
  runAt?: number | Date;
  /** Instead of runAt: seconds from the database's now. */
  delay?: number;
  /** The job's own attempt limit (≥ 1); default the queue's. */
  maxAttempts?: number;
  /** While an unfinished job of the queue holds it, no job is made and that job's id is returned. */
  uniqueKey?: string;
  /** The handler's name: 1–128 characters of `[A-Za-z0-9_.:-]`. */
  kind?: string;
  /** An ordered group: the job is made `waiting`, and a backlog worker's leader makes it available in turn. */
  group?: string;
  /** A W3C traceparent, or `{ traceparent, tracestate }`. */
  traceContext?: check.TraceContext;
}

/** One job of `enqueueMany`: its queue, its payload (any JSON value) and its options. */
export interface NewJob extends EnqueueOpts {
  queue: string;
  payload: unknown;
}

const OPTIONS = new Set(["queue", "payload", "priority", "runAt", "delay", "maxAttempts", "uniqueKey", "kind", "group", "traceContext"]);

/** One job, checked. */
export interface Row {
  queue: string;
  payload: string;
  kind: string | null;
  priority: number;
  runAt: number | null;
  delayUs: number | null;
  maxAttempts: number | null;
  uniqueKey: string | null;
  group: string | null;
  trace: string | null;
}

/** Checks one job (throwing a BacklogError before anything is written). */
export function row(job: NewJob, index?: number): Row {
  if (typeof job !== "object" || job === null) throw new InvalidOption(`${at(index)}expected an object with queue and payload`);
  for (const k in job) {
    if (!OPTIONS.has(k)) throw new InvalidOption(`${at(index)}unknown option ${k}`);
  }
  if (!("queue" in job) || !("payload" in job)) throw new InvalidOption(`${at(index)}queue and payload are required`);
  if (given(job.runAt) && given(job.delay)) throw new InvalidOption("give runAt or delay, not both");
  return {
    queue: check.name("queue name", job.queue),
    payload: check.payload(job.payload),
    kind: given(job.kind) ? check.name("kind", job.kind) : null,
    priority: given(job.priority) ? check.priority(job.priority) : 0,
    runAt: given(job.runAt) ? check.instantUs(job.runAt) : null,
    delayUs: given(job.delay) ? check.delayUs(job.delay) : null,
    maxAttempts: given(job.maxAttempts) ? check.maxAttempts(job.maxAttempts) : null,
    uniqueKey: given(job.uniqueKey) ? check.key("unique key", job.uniqueKey) : null,
    group: given(job.group) ? check.key("group key", job.group) : null,
    trace: given(job.traceContext) ? check.traceContext(job.traceContext) : null,
  };
}

const at = (index: number | undefined): string => (index === undefined ? "" : `job ${index}: `);
const given = (v: unknown): boolean => v !== undefined && v !== null;

/** Checks every job of a batch before any is written. */
export function rows(jobs: Iterable<NewJob>): Row[] {
  if (jobs === null || typeof (jobs as Iterable<NewJob>)[Symbol.iterator] !== "function") {
    throw new InvalidOption("expected an array of jobs");
  }
  return Array.from(jobs, (j, i) => row(j, i));
}

/** Most jobs one INSERT statement writes. */
export const INSERT_CHUNK = 1000;

// ---- the database's clock, measured once a minute per connection

const clocks = new WeakMap<object, { offset: number; at: number }>();

/** This machine's clock, in µs since the epoch. */
export function localUs(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

/** The database's clock now (db_now.sql), in µs: one round trip. */
export async function dbNowUs(db: Db): Promise<number> {
  const res = await db.run(statement(db.flavor, "db_now"), []);
  return Number(res.rows[0]![0]);
}

/** The database's time: this machine's clock plus the offset measured on `db` (again after a minute). */
async function nowOn(db: Db, key: object): Promise<number> {
  const known = clocks.get(key);
  if (known && performance.now() - known.at < 60_000) return localUs() + known.offset;
  const before = localUs();
  const dbNow = await dbNowUs(db);
  const after = localUs();
  clocks.set(key, { offset: dbNow - Math.round((before + after) / 2), at: performance.now() });
  return dbNow;
}

// ---- MySQL: the auto-increment mode (are one statement's ids consecutive?) and shard counts

const autoinc = new WeakMap<object, number | null>();
const shardCounts = new WeakMap<object, Map<string, { n: number; at: number }>>();

async function idStep(db: Db, key: object): Promise<number | null> {
  if (!autoinc.has(key)) {
    const r = (await db.run(statement("mysql", "db_autoinc"), [])).rows[0]!;
    const [mode, step] = [Number(r[0]), Number(r[1])];
    autoinc.set(key, mode === 0 || mode === 1 ? step : null);
  }
  return autoinc.get(key)!;
}

async function shards(db: Db, key: object, queue: string): Promise<number> {
  let map = shardCounts.get(key);
  if (!map) shardCounts.set(key, (map = new Map()));
  const known = map.get(queue);
  if (known && performance.now() - known.at < 5000) return known.n;
  const n = Math.max(1, Number((await db.run(statement("mysql", "queue_shards"), [queue])).rows[0]![0]));
  map.set(queue, { n, at: performance.now() });
  return n;
}

// ---- atomically: a savepoint inside the caller's transaction, else a transaction of its own

async function atomically<T>(db: Db, body: () => Promise<T>): Promise<T> {
  let inside: boolean;
  if (db.flavor === "sqlite") {
    inside = true; // SAVEPOINT outside a transaction begins one, and RELEASE commits it
  } else if (db.flavor === "mysql") {
    inside = ((await db.run("DO 0", [])).serverStatus ?? 0) % 2 === 1; // SERVER_STATUS_IN_TRANS
  } else {
    try {
      await db.run("SAVEPOINT backlog_enqueue", []);
      inside = true;
    } catch (err) {
      if ((err as { code?: string }).code !== "25P01") throw err; // not in a transaction block
      inside = false;
    }
  }
  if (inside && db.flavor !== "postgres") await db.run("SAVEPOINT backlog_enqueue", []);
  if (!inside) await db.run(db.flavor === "mysql" ? "START TRANSACTION" : "BEGIN", []);
  let out: T;
  try {
    out = await body();
  } catch (err) {
    await db.run(inside ? "ROLLBACK TO SAVEPOINT backlog_enqueue" : "ROLLBACK", []).catch(() => undefined);
    if (inside) await db.run("RELEASE SAVEPOINT backlog_enqueue", []).catch(() => undefined);
    throw err;
  }
  await db.run(inside ? "RELEASE SAVEPOINT backlog_enqueue" : "COMMIT", []);
  return out;
}

// ---- the statements

const slot = (queue: string, key: string): string => `${queue}\u0000${key}`;
const ids = (value: unknown): number[] => (value as unknown[]).map(Number);

/** The values of a row of job_insert_plain / job_insert, up to trace_context. */
function values(j: Row, now: number): unknown[] {
  return [j.queue, j.kind, j.payload, j.priority, runAtOf(j, now), j.maxAttempts, j.trace];
}

/** When a job is due: its runAt, else now plus its delay, else now. */
function runAtOf(j: Row, now: number): number {
  return j.runAt ?? (j.delayUs !== null ? now + j.delayUs : now);
}

/** Inserts rows without unique keys with job_insert_plain: their ids in order, or null (MySQL in
 *  interleaved auto-increment mode: use `keyed`). */
async function plain(db: Db, key: object, chunk: Row[], now: number): Promise<number[] | null> {
  const first = chunk[0]!;
  const firstAt = runAtOf(first, now);
  const uniform =
    chunk.length > 1 &&
    db.flavor !== "mysql" &&
    chunk.every(
      (j) =>
        j.queue === first.queue && j.kind === first.kind && j.priority === first.priority &&
        j.maxAttempts === first.maxAttempts && j.trace === first.trace && runAtOf(j, now) === firstAt,
    );
  if (uniform) {
    // The usual batch (one queue, kind, priority and time): the shared values are bound once and
    // only the payloads travel as an array (job_insert_uniform).
    const payloads = chunk.map((j) => j.payload);
    const shared = [first.queue, first.kind, first.priority, firstAt, first.maxAttempts, now];
    if (db.flavor === "postgres") {
      const res = await db.run(statement("postgres", "job_insert_uniform"), [...shared, payloads, first.trace]);
      return ids(res.rows[0]![0]);
    }
    const res = await db.run(statement("sqlite", "job_insert_uniform"), [...shared, JSON.stringify(payloads), first.trace]);
    return chunk.map((_, i) => res.insertId - chunk.length + 1 + i);
  }
  if (db.flavor === "postgres") {
    const cols: unknown[][] = [[], [], [], [], [], [], []];
    for (const j of chunk) values(j, now).forEach((v, i) => cols[i]!.push(v));
    const res = await db.run(statement("postgres", "job_insert_plain"), [...cols, now]);
    return ids(res.rows[0]![0]);
  }
  if (db.flavor === "sqlite") {
    const flat = chunk.flatMap((j) => [...values(j, now), now]);
    const res = await db.run(statement("sqlite", "job_insert_plain", 0, chunk.length, 8), flat, true);
    return chunk.map((_, i) => res.insertId - chunk.length + 1 + i);
  }
  const step = chunk.length === 1 ? 1 : await idStep(db, key);
  if (step === null) return null;
  const flat: unknown[] = [];
  for (const j of chunk) {
    const n = await shards(db, key, j.queue);
    flat.push(...values(j, now), now, Math.floor(Math.random() * n));
  }
  const res = await db.run(statement("mysql", "job_insert_plain", 0, chunk.length, 9), flat);
  return chunk.map((_, i) => res.insertId + i * step);
}

/** Inserts rows (some with unique keys) with job_insert: for each, its new id, or null when
 *  its unique key was taken. Duplicate keys within `chunk` must be folded before. */
async function keyed(db: Db, key: object, chunk: Row[], now: number): Promise<(number | null)[]> {
  let created: [number, string | null][];
  if (db.flavor === "postgres") {
    const cols: unknown[][] = [[], [], [], [], [], [], [], []];
    for (const j of chunk) [...values(j, now), j.uniqueKey].forEach((v, i) => cols[i]!.push(v));
    created = (await db.run(statement("postgres", "job_insert"), [...cols, now])).rows.map((r) => [
      Number(r[0]),
      r[2] === null ? null : slot(String(r[1]), String(r[2])),
    ]);
  } else if (db.flavor === "sqlite") {
    const flat = chunk.flatMap((j) => [...values(j, now), j.uniqueKey, now]);
    created = (await db.run(statement("sqlite", "job_insert", 0, chunk.length, 9), flat, true)).rows.map((r) => [
      Number(r[0]),
      r[2] === null ? null : slot(String(r[1]), String(r[2])),
    ]);
  } else {
    // No RETURNING: a marker in lease_token finds the rows this statement created.
    const marker = newToken();
    const flat: unknown[] = [];
    for (const j of chunk) {
      const n = await shards(db, key, j.queue);
      flat.push(...values(j, now), j.uniqueKey, now, marker, Math.floor(Math.random() * n));
    }
    const res = await db.run(statement("mysql", "job_insert", 0, chunk.length, 11), flat);
    created = [];
    if (res.affected > 0) {
      const found = await db.run(statement("mysql", "job_insert_created"), [res.insertId, marker]);
      created = found.rows.map((r) => [Number(r[0]), r[2] === null ? null : slot(String(r[1]), String(r[2]))]);
      if (created.length) {
        await db.run(statement("mysql", "job_insert_unmark", created.length), created.map((c) => c[0]));
      }
    }
  }
  created.sort((a, b) => a[0] - b[0]);
  const createdKeys = new Set(created.map((c) => c[1]).filter((k) => k !== null));
  let next = 0;
  return chunk.map((j) => {
    if (j.uniqueKey !== null && !createdKeys.has(slot(j.queue, j.uniqueKey))) return null;
    return created[next++]![0];
  });
}

/** The unfinished job of `queue` holding unique key `key` (job_find_unique.sql). */
async function holder(db: Db, queue: string, key: string): Promise<number | null> {
  const res = await db.run(statement(db.flavor, "job_find_unique"), [queue, key]);
  return res.rows.length ? Number(res.rows[0]![0]) : null;
}

/** Puts just-inserted jobs in their ordered groups: waiting (job_group_set.sql). */
async function groupSet(db: Db, jobs: { id: number; group: string }[]): Promise<void> {
  if (!jobs.length) return;
  if (db.flavor === "postgres") {
    await db.run(statement("postgres", "job_group_set"), [jobs.map((j) => j.id), jobs.map((j) => j.group)]);
    return;
  }
  for (const j of jobs) await db.run(statement(db.flavor, "job_group_set"), [j.group, j.id]);
}

/**
 * Inserts checked jobs on `db` in order, in its current transaction, and returns their ids (for
 * a unique key an unfinished job of the queue holds, that job's id). Never commits; a batch that
 * takes more than one statement runs under a savepoint (or in a transaction of its own when
 * none is open), so it is written whole or not at all. `nowUs`: the database's time.
 */
export async function insert(db: Db, jobs: Row[], key: object, nowUs?: number): Promise<number[]> {
  if (!jobs.length) return [];
  const now = nowUs ?? (await nowOn(db, key));
  const simple = jobs.length <= INSERT_CHUNK && jobs.every((j) => j.uniqueKey === null && j.group === null);
  if (simple) {
    const got = await plain(db, key, jobs, now);
    if (got) return got;
  }
  return atomically(db, async () => {
    const out: number[] = [];
    for (let at = 0; at < jobs.length; at += INSERT_CHUNK) {
      const chunk = jobs.slice(at, at + INSERT_CHUNK);
      let got: (number | null)[] | null = null;
      if (chunk.every((j) => j.uniqueKey === null)) got = await plain(db, key, chunk, now);
      if (got === null) {
        // Fold repeated keys into their first row: the others get its id.
        const first = new Map<string, number>();
        const distinct: Row[] = [];
        const index = chunk.map((j) => {
          if (j.uniqueKey === null) return distinct.push(j) - 1;
          const s = slot(j.queue, j.uniqueKey);
          if (!first.has(s)) first.set(s, distinct.push(j) - 1);
          return first.get(s)!;
        });
        const made = await keyed(db, key, distinct, now);
        for (let i = 0; i < distinct.length; i++) {
          const j = distinct[i]!;
          // Taken: the holder is the job already there. None: it finished in between, and the
          // key is free again, so insert again.
          for (let tries = 0; made[i] === null && tries < 3; tries++) {
            made[i] = await holder(db, j.queue, j.uniqueKey!);
            if (made[i] === null) made[i] = (await keyed(db, key, [j], now))[0]!;
          }
          if (made[i] === null) throw new Error(`unique key ${j.uniqueKey}: no holder after three inserts`);
        }
        got = index.map((i) => made[i]!);
      }
      out.push(...(got as number[]));
    }
    // Grouped jobs wait for their group's turn (a job that already held its key keeps its state).
    const created = new Set<number>();
    const grouped: { id: number; group: string }[] = [];
    jobs.forEach((j, i) => {
      if (j.group !== null && !created.has(out[i]!)) grouped.push({ id: out[i]!, group: j.group });
      created.add(out[i]!);
    });
    await groupSet(db, grouped);
    return out;
  });
}

/** A fresh lease token: a random non-zero signed 64-bit integer, never a counter. */
export function newToken(): bigint {
  for (;;) {
    const b = randomBytes(8).readBigInt64LE();
    if (b !== 0n) return b;
  }
}

/**
 * Enqueues one job on `conn`, a connection you own (a better-sqlite3 `Database`, a pg `Client`
 * or `PoolClient`, a mysql2 connection), inside the transaction you have open on it: the job
 * exists exactly when your transaction commits. Never commits. Returns the job's id (for a
 * taken unique key, the holder's). Bad input throws InvalidPayload, InvalidName or
 * InvalidOption before anything is written.
 *
 * @example
 * await client.query("BEGIN");
 * await client.query("INSERT INTO account (id) VALUES (42)");
 * await enqueue(client, "emails", { account: 42 }, { kind: "welcome", delay: 60 });
 * await client.query("COMMIT");
 */
export async function enqueue(conn: unknown, queue: string, payload: unknown, opts: EnqueueOpts = {}): Promise<number> {
  const job = row({ ...opts, queue, payload });
  const db = dbOf(conn);
  return (await insert(db, [job], conn as object))[0]!;
}

/**
 * Enqueues jobs as `enqueue` does, on `conn`, in its current transaction, with one multi-row
 * INSERT per 1,000 jobs. Every job is checked before the first is written. Returns their ids,
 * in order.
 */
export async function enqueueMany(conn: unknown, jobs: Iterable<NewJob>): Promise<number[]> {
  const checked = rows(jobs);
  const db = dbOf(conn);
  return insert(db, checked, conn as object);
}
