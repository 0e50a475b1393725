// The drain and enqueue benchmark of the TypeScript client on one database (BENCHMARKS.md):
//
//     node examples/bench.mjs postgres://postgres@127.0.0.1:5432/bench [jobs]
//
// 1. enqueue: `jobs` no-op jobs by `Client.enqueueMany`, 1,000 a call, against the same rows
//    sent as one plain multi-row INSERT a call through the same driver connection;
// 2. drain: a `Worker` (batch 1,000, concurrency 1,000) completes them all, no-op handler.
// The database must be migrated (`backlog migrate`) and is emptied of queue `bench` first.
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

async function raw(total) {
  const t = performance.now();
  for (let at = 0; at < total; at += 1000) {
    const values = [];
    const rows = [];
    for (let i = 0; i < 1000; i++) {
      rows.push(`(${mark(2 * i + 1)}, ${mark(2 * i + 2)}${flavor === "postgres" ? "::jsonb" : ""})`);
      values.push("bench_raw", JSON.stringify({ i: at + i }));
    }
    await db.run(`INSERT INTO backlog_job (queue, payload) VALUES ${rows.join(", ")}`, values, true);
  }
  return total / ((performance.now() - t) / 1000);
}

async function batched(total) {
  const t = performance.now();
  for (let at = 0; at < total; at += 1000) {
    await client.enqueueMany(Array.from({ length: 1000 }, (_, i) => ({ queue: "bench", payload: { i: at + i } })));
  }
  return total / ((performance.now() - t) / 1000);
}

await clear();
// Alternating rounds of 10,000 each, the raw INSERT first in odd rounds.
const rawRates = [];
const oursRates = [];
for (let round = 0; round < 6; round++) {
  if (round % 2 === 0) {
    rawRates.push(await raw(10_000));
    oursRates.push(await batched(10_000));
  } else {
    oursRates.push(await batched(10_000));
    rawRates.push(await raw(10_000));
  }
  await clear();
}
const median = (xs) => [...xs].sort((p, q) => p - q)[Math.floor(xs.length / 2)];
const r = median(rawRates);
const o = median(oursRates);
console.log(`enqueue 1,000 a call: enqueueMany ${Math.round(o)} jobs/s, raw multi-row INSERT ${Math.round(r)} jobs/s: ${(100 * o / r).toFixed(0)}% (median of 6 rounds of 10,000)`);

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
