// The drain and enqueue benchmark of the TypeScript client on one database (issue 48's targets):
//
//     node examples/bench.mjs postgres://postgres@127.0.0.1:5432/bench [jobs]
//
// 1. enqueue: `Client.enqueueMany` of 1,000 jobs a call against the same rows sent as one plain
//    multi-row INSERT (queue, payload) through the same driver connection, call by call;
// 2. drain: a `Worker` (batch 1,000, concurrency 1,000) completes them all, no-op handler.
// Give it a freshly migrated database (`backlog migrate`): each run leaves 2 to 4 dead rows per
// job behind, and until vacuum removes them this client's claims (a full pass from the head,
// without docs/sql.md's claim cursors) walk their index entries, so a second run drains slower.
import { Client, Worker } from "backlog-client";

const url = process.argv[2];
const n = Number(process.argv[3] ?? 100_000);
const client = await Client.connect(url);
const db = client.db;
const flavor = client.flavor;
const mark = (i) => (flavor === "postgres" ? `$${i}` : "?");

async function clear() {
  await db.run(`DELETE FROM backlog_job WHERE queue IN ('bench', 'bench_raw')`, []);
}

/** One call of 1,000 rows as a plain multi-row INSERT, sent through the client's own driver connection. */
async function raw(round) {
  const values = [];
  const rows = [];
  for (let i = 0; i < 1000; i++) {
    rows.push(`(${mark(2 * i + 1)}, ${mark(2 * i + 2)}${flavor === "postgres" ? "::jsonb" : ""})`);
    values.push("bench_raw", JSON.stringify({ i: round * 1000 + i }));
  }
  const t = performance.now();
  await db.run(`INSERT INTO backlog_job (queue, payload) VALUES ${rows.join(", ")}`, values, true);
  return performance.now() - t;
}

/** One call of 1,000 jobs by enqueueMany (validation and all). */
async function batched(round) {
  const jobs = Array.from({ length: 1000 }, (_, i) => ({ queue: "bench", payload: { i: round * 1000 + i } }));
  const t = performance.now();
  await client.enqueueMany(jobs);
  return performance.now() - t;
}

// Rounds of one call each, the order alternating, so that both see the same load; the ratio
// of each round's pair, and its median over the rounds.
await clear();
const ratios = [];
const rawMs = [];
const oursMs = [];
for (let round = 0; round < 60; round++) {
  let r, o;
  if (round % 2 === 0) {
    r = await raw(round);
    o = await batched(round);
  } else {
    o = await batched(round);
    r = await raw(round);
  }
  if (round >= 10) {
    ratios.push(r / o);
    rawMs.push(r);
    oursMs.push(o);
  }
  if (round % 10 === 9) await clear();
}
const median = (xs) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)];
console.log(
  `enqueue 1,000 a call: enqueueMany ${Math.round(1e6 / median(oursMs))} jobs/s, raw multi-row INSERT ` +
    `${Math.round(1e6 / median(rawMs))} jobs/s: ${(100 * median(ratios)).toFixed(0)}% ` +
    `(median of 50 paired calls, after 10 to warm up)`,
);

await clear();
for (let at = 0; at < n; at += 1000) {
  await client.enqueueMany(Array.from({ length: Math.min(1000, n - at) }, (_, i) => ({ queue: "bench", payload: { i: at + i } })));
}
await client.close();
let done = 0;
const t = performance.now();
await new Worker(url, "bench", () => {}, { batch: 1000, concurrency: 1000, signals: false, onOutcome: (_, o) => o === "completed" && done++ }).run({ drain: true });
const s = (performance.now() - t) / 1000;
console.log(`drain: ${done} no-op jobs in ${s.toFixed(2)} s: ${Math.round(done / s)} jobs/s`);
