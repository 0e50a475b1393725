/**
 * One seam over the three drivers: a connection (`Db`) runs a catalog statement with its
 * values and answers rows (as arrays), the rows it affected and the id it inserted. The
 * statements' own placeholders are what each driver takes as they are: better-sqlite3 binds
 * SQLite's numbered `?N` from an object keyed by number (and the bare `?` of a multi-row
 * INSERT from an array), pg binds PostgreSQL's `$N`, mysql2 MySQL's positional `?`. Nothing is
 * rewritten but the lists a file declares (`/*IDS*\/`, `/*ROWS*\/`); every value is bound.
 */
import { QUERIES } from "./queries.js";

/** Which database a connection talks to. */
export type Flavor = "sqlite" | "postgres" | "mysql";

/** What a statement answered. */
export interface Answer {
  /** Its rows, each an array of the columns in order (empty for a statement without rows). */
  rows: unknown[][];
  /** Rows it affected (for UPDATE on MySQL: matched, with FOUND_ROWS; see docs/sql.md). */
  affected: number;
  /** The id it inserted (SQLite's last rowid, MySQL's first id of the statement), else 0. */
  insertId: number;
  /** MySQL's server status flags after it (bit 1: in a transaction), else undefined. */
  serverStatus?: number;
}

/** A connection that runs statements. */
export interface Db {
  readonly flavor: Flavor;
  /** The driver's connection underneath: a better-sqlite3 `Database`, a pg `Client`, a mysql2/promise connection. */
  readonly conn: unknown;
  /** Runs `sql` with `values`: numbered placeholders on SQLite unless `positional`. */
  run(sql: string, values: readonly unknown[], positional?: boolean): Promise<Answer>;
}

const statements = new Map<string, string>();

/**
 * The catalog's statement `flavor/name.sql`, its `/*IDS*\/` list filled in with `ids`
 * placeholders and its `/*ROWS*\/` with `rows` rows of `width` values.
 */
export function statement(flavor: Flavor, name: string, ids = 0, rows = 0, width = 0): string {
  const key = `${flavor}/${name}.sql`;
  const memo = `${key}:${ids}:${rows}:${width}`;
  let text = statements.get(memo);
  if (text === undefined) {
    const file = QUERIES[key];
    if (file === undefined) throw new Error(`no statement ${key} in the catalog copy`);
    text = file.replace(/\/\*(IDS|QUEUES)\*\//, Array(ids).fill("?").join(", "));
    if (rows > 0) {
      const one = `(${Array(width).fill("?").join(", ")})`;
      text = text.replace("/*ROWS*/", Array(rows).fill(one).join(", "));
    }
    if (statements.size < 4096) statements.set(memo, text);
  }
  return text;
}

// ---- better-sqlite3

/** The part of a better-sqlite3 Database this package uses. */
export interface SqliteDatabase {
  prepare(sql: string): SqliteStatement;
  exec(sql: string): unknown;
  readonly inTransaction: boolean;
  close(): unknown;
}
interface SqliteStatement {
  readonly reader: boolean;
  raw(on?: boolean): SqliteStatement;
  safeIntegers(on?: boolean): SqliteStatement;
  all(...values: unknown[]): unknown[];
  run(...values: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}

const prepared = new WeakMap<object, Map<string, SqliteStatement>>();

/** Integers go to SQLite as integers (a JS number would be bound as REAL). */
function sqliteValue(v: unknown): unknown {
  if (typeof v === "number" && Number.isInteger(v)) return BigInt(v);
  if (typeof v === "boolean") return v ? 1n : 0n;
  return v === undefined ? null : v;
}

export class SqliteDb implements Db {
  readonly flavor = "sqlite" as const;
  constructor(readonly conn: SqliteDatabase) {}

  run(sql: string, values: readonly unknown[], positional = false): Promise<Answer> {
    try {
      return Promise.resolve(this.runSync(sql, values, positional));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  runSync(sql: string, values: readonly unknown[], positional = false): Answer {
    let cache = prepared.get(this.conn);
    if (!cache) prepared.set(this.conn, (cache = new Map()));
    let stmt = cache.get(sql);
    if (!stmt) {
      stmt = this.conn.prepare(sql);
      if (stmt.reader) stmt.raw(true).safeIntegers(true);
      if (cache.size < 512) cache.set(sql, stmt);
    }
    let args: unknown[];
    if (positional) {
      args = values.map(sqliteValue);
    } else if (values.length === 0) {
      args = [];
    } else {
      const named: Record<number, unknown> = {};
      values.forEach((v, i) => (named[i + 1] = sqliteValue(v)));
      args = [named];
    }
    if (stmt.reader) {
      const rows = stmt.all(...args) as unknown[][];
      return { rows, affected: rows.length, insertId: 0 };
    }
    const res = stmt.run(...args);
    return { rows: [], affected: res.changes, insertId: Number(res.lastInsertRowid) };
  }
}

// ---- pg

/** The part of a pg Client (or PoolClient) this package uses. */
export interface PgClient {
  query(config: { text: string; values?: unknown[]; rowMode?: "array"; name?: string }): Promise<{
    rows: unknown[][];
    rowCount: number | null;
  }>;
}

const pgNames = new Map<string, string>();

export class PgDb implements Db {
  readonly flavor = "postgres" as const;
  /** `named`: prepare each statement once on this connection (the client's own connections). */
  constructor(readonly conn: PgClient, readonly named = false) {}

  async run(sql: string, values: readonly unknown[]): Promise<Answer> {
    let name: string | undefined;
    if (this.named) {
      name = pgNames.get(sql);
      if (name === undefined && pgNames.size < 256) pgNames.set(sql, (name = `backlog_ts_${pgNames.size}`));
    }
    const res = await this.conn.query({ text: sql, values: [...values], rowMode: "array", ...(name ? { name } : {}) });
    return { rows: res.rows ?? [], affected: res.rowCount ?? 0, insertId: 0 };
  }
}

// ---- mysql2

/** The part of a mysql2/promise Connection this package uses. */
export interface MysqlConnection {
  query(options: { sql: string; rowsAsArray?: boolean }, values?: unknown[]): Promise<[unknown, unknown]>;
}

export class MysqlDb implements Db {
  readonly flavor = "mysql" as const;
  constructor(readonly conn: MysqlConnection) {}

  async run(sql: string, values: readonly unknown[]): Promise<Answer> {
    const [res] = await this.conn.query({ sql, rowsAsArray: true }, [...values]);
    if (Array.isArray(res)) return { rows: res as unknown[][], affected: res.length, insertId: 0 };
    const h = res as { affectedRows?: number; insertId?: number | string; serverStatus?: number };
    return {
      rows: [],
      affected: h.affectedRows ?? 0,
      insertId: Number(h.insertId ?? 0),
      ...(h.serverStatus === undefined ? {} : { serverStatus: h.serverStatus }),
    };
  }
}

/**
 * The `Db` of a connection the caller owns, recognised by its driver: a better-sqlite3
 * `Database`, a pg `Client` or `PoolClient` (not a `Pool`: a job must join the caller's
 * transaction, on one connection), or a mysql2 connection (promise or callback API).
 */
export function dbOf(conn: unknown): Db {
  if (conn instanceof SqliteDb || conn instanceof PgDb || conn instanceof MysqlDb) return conn;
  const c = conn as Record<string, unknown> | null;
  if (c && typeof c === "object") {
    if (typeof c.prepare === "function" && typeof c.pragma === "function") {
      return new SqliteDb(c as unknown as SqliteDatabase);
    }
    if (typeof c.query === "function" && "connectionParameters" in c) {
      return new PgDb(c as unknown as PgClient);
    }
    if (typeof c.query === "function" && "totalCount" in c && "idleCount" in c) {
      throw new TypeError("a pg Pool cannot hold a transaction: give a client (await pool.connect())");
    }
    if (typeof c.promise === "function" && "config" in c && typeof c.beginTransaction === "function") {
      return new MysqlDb((c.promise as () => MysqlConnection).call(c));
    }
    if (typeof c.query === "function" && typeof c.execute === "function" && "connection" in c) {
      return new MysqlDb(c as unknown as MysqlConnection);
    }
  }
  const what = c && typeof c === "object" ? c.constructor?.name : typeof conn;
  throw new TypeError(`expected a better-sqlite3 Database, a pg Client or a mysql2 connection, not ${String(what)}`);
}
