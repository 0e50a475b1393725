// An example worker built on backlog-client: works one queue and writes a line per event to a
// log file, so that what it did can be checked from outside (backlog's CI test of the SQL
// contract, crates/backlog-cli/tests/typescript_contract.rs, runs it beside `backlog work`):
//
//     run I ID ATTEMPT     the handler started job ID, whose payload is {"i": I, ...}
//     OUTCOME I ID         completed, retry, dead, cancelled, or lost
//
// A payload with "fail_once": true fails its first attempt. `--stall-after N` freezes the
// worker when it holds its (N+1)-th job, as a hung process would: it writes {"id", "token"} of
// that job to --stall-file and waits while its heartbeats keep the lease, until it is killed
// (run it with --concurrency 1, or its other slots go on working).
//
//     node examples/worker.mjs sqlite:///tmp/q.db emails --log emails.log --drain
import { appendFileSync, renameSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Worker } from "backlog-client";

const { values: a, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    log: { type: "string" },
    owner: { type: "string" },
    batch: { type: "string", default: "10" },
    concurrency: { type: "string", default: "4" },
    drain: { type: "boolean", default: false },
    "work-ms": { type: "string", default: "1" },
    "stall-after": { type: "string" },
    "stall-file": { type: "string" },
  },
});
const [url, queue] = positionals;
// appendFileSync: a line at a time, nothing lost to a SIGKILL.
const log = (line) => appendFileSync(a.log, line + "\n");
const stallAfter = a["stall-after"] === undefined ? null : Number(a["stall-after"]);
let handled = 0;
let heard = 0;

const worker = new Worker(
  url,
  queue,
  async (job) => {
    if (stallAfter !== null && handled === stallAfter) {
      // Freeze once every job before this one has its outcome written and logged (completions
      // are written in batches, after the handler returns): what a process that hangs here
      // leaves behind is the frozen job alone.
      while (heard < handled) await new Promise((r) => setTimeout(r, 5));
      handled++;
      writeFileSync(a["stall-file"] + ".tmp", JSON.stringify({ id: job.id, token: String(job.token) }));
      renameSync(a["stall-file"] + ".tmp", a["stall-file"]); // appears whole
      log(`run ${job.payload.i} ${job.id} ${job.attempt}`);
      await new Promise(() => {}); // frozen; the heartbeats go on
    }
    handled++;
    log(`run ${job.payload.i} ${job.id} ${job.attempt}`);
    await new Promise((r) => setTimeout(r, Number(a["work-ms"])));
    if (job.payload.fail_once && job.attempt === 1) throw new Error("fails once on purpose");
  },
  {
    batch: Number(a.batch),
    concurrency: Number(a.concurrency),
    ...(a.owner ? { owner: a.owner } : {}),
    onOutcome: (job, outcome) => {
      log(`${outcome} ${job.payload.i} ${job.id}`);
      heard++;
    },
  },
);
await worker.run({ drain: a.drain });
process.exit(0);
