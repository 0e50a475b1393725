#!/usr/bin/env python3
"""What each part of the runtime's claim-and-complete statement costs PostgreSQL.

    scripts/pg_claim_costs.py [postgres://postgres@127.0.0.1:5432/test] [--jobs 100000] [--runs 2] [--only TEXT]

For each part, a procedure drains a scratch copy of `backlog_job` (`claim_cost_lab`, made and
dropped here; the database must be migrated) in batches of 50, alternating two statements: the bare
one-statement claim of `backlog bench` (each batch deleted in the statement that claims the next,
returning id, kind and payload), and the same statement with that part added. Each batch commits.
The ratio is the time inside the added-to statement over the time inside the bare one, both
measured by the server in the same run, so a noisy machine slows both alike. Needs `psql`.
"""
import argparse
import re
import subprocess

COLS = ("id, queue, kind, payload::text AS payload, priority, attempt, max_attempts, "
        "lease_token, lease_expires_at, run_at, created_at")

# The parts, each added alone to the bare statement, then the runtime's statement whole
# (queries/postgres with retention delete, as sqltext::complete_then_claim builds it): with one
# token for the batch (one claim's jobs) and with per-job tokens (jobs of several claims), and as
# it was before the seventh stop (done ids joined onto the claimed rows).
PARTS = {
    "all columns returned": {"cols"},
    "lease owner written": {"owner"},
    "per-job tokens (array_position) and state check": {"tokens"},
    "one token for the batch, and state check": {"tok1"},
    "kinds and paused-queue filters": {"kinds", "paused"},
    "paused-queue filter": {"paused"},
    "UPDATE ... FROM picked (join) form": {"join"},
    "claimed rows through a CTE": {"cte"},
    "done ids returned (a window over a join)": {"done"},
    "done ids returned (a row of their own, UNION ALL)": {"union"},
    "done RETURNING id, not read": {"dret"},
    "done ids on the first claimed row (InitPlans)": {"first"},
    "done count on the first claimed row (InitPlans)": {"firstcount"},
    "done ids on the first claimed row, completing only beside a claim": {"first", "guard"},
    "done ids a row of their own, typed NULLs": {"union2"},
    "runtime statement, one token, done on the first row": {"cols", "owner", "tok1", "kinds",
                                                            "paused", "join", "first", "guard"},
    "runtime statement, one token": {"cols", "owner", "tok1", "kinds", "paused", "join", "union"},
    "runtime statement, per-job tokens": {"cols", "owner", "tokens", "kinds", "paused", "join",
                                          "union"},
    "runtime statement before (per-job tokens, window)": {"cols", "owner", "tokens", "kinds",
                                                          "paused", "join", "done"},
}


def statement(f):
    if "tokens" in f:
        done = ("DELETE FROM claim_cost_lab WHERE id = ANY(prev) AND state = 'running' "
                "AND lease_token = ptoks[array_position(prev, id)] RETURNING id")
    elif "tok1" in f:
        done = ("DELETE FROM claim_cost_lab WHERE id = ANY(prev) AND state = 'running' "
                "AND lease_token = ptok RETURNING id")
    else:
        done = "DELETE FROM claim_cost_lab WHERE id = ANY(prev) AND lease_token = ptok RETURNING id"
    filters = ""
    if "kinds" in f:
        filters += "AND (NULL::text[] IS NULL OR kind = ANY(NULL::text[])) "
    if "paused" in f:
        filters += "AND NOT EXISTS (SELECT 1 FROM backlog_queue WHERE name = 'q' AND paused)"
    picked = (f"SELECT id FROM claim_cost_lab WHERE queue = 'q' AND state = 'available' "
              f"AND run_at <= now_ {filters} ORDER BY priority, run_at, id LIMIT 50 "
              f"FOR UPDATE SKIP LOCKED")
    owner = ", lease_owner = 'host:12345'" if "owner" in f else ""
    cols = COLS if "cols" in f else "id, kind, payload::text AS payload"
    sets = (f"state = 'running', attempt = j.attempt + 1, lease_token = tok, "
            f"lease_expires_at = now_ + 30000000, attempted_at = now_{owner}")
    returning = ", ".join("j." + c for c in cols.split(", "))
    if "join" in f:
        update = f"UPDATE claim_cost_lab j SET {sets} FROM picked WHERE j.id = picked.id"
    else:
        update = f"UPDATE claim_cost_lab j SET {sets} WHERE j.id IN (SELECT id FROM picked)"
    update += f" RETURNING {returning}"
    if not {"done", "union", "union2", "dret", "first", "firstcount"} & f:
        done = done.removesuffix(" RETURNING id")
    head = f"WITH done AS ({done}), picked AS ({picked})"
    if "guard" in f:
        done = done.replace(" RETURNING", " AND EXISTS (SELECT 1 FROM picked) RETURNING")
        head = f"WITH picked AS ({picked}), done AS ({done})"
    if "first" in f or "firstcount" in f:
        agg = "array_agg(id)" if "first" in f else "count(*)"
        update = update.replace(" RETURNING ", f" RETURNING CASE WHEN j.id = (SELECT min(id) "
                                f"FROM picked) THEN (SELECT {agg} FROM done) END AS done_ids, ")
        return f"{head} {update}"
    if "done" in f:
        return (f"{head}, claimed AS ({update}) SELECT CASE WHEN row_number() OVER () = 1 "
                f"THEN d.done_ids END AS done_ids, c.* FROM (SELECT array_agg(id) AS done_ids "
                f"FROM done) AS d LEFT JOIN claimed AS c ON true")
    if "union" in f:
        return (f"{head}, claimed AS ({update}) SELECT NULL::bigint[] AS done_ids, c.* "
                f"FROM claimed AS c UNION ALL SELECT d.done_ids, c.* FROM (SELECT array_agg(id) "
                f"AS done_ids FROM done) AS d LEFT JOIN claimed AS c ON false")
    if "union2" in f:
        nulls = ", ".join("NULL" for _ in cols.split(", "))
        return (f"{head}, claimed AS ({update}) SELECT NULL::bigint[] AS done_ids, c.* "
                f"FROM claimed AS c UNION ALL SELECT array_agg(id), {nulls} FROM done")
    if "cte" in f:
        return f"{head}, claimed AS ({update}) SELECT * FROM claimed"
    return f"{head} {update}"


def procedure(parts):
    return f"""
CREATE OR REPLACE PROCEDURE claim_cost_lab_run() LANGUAGE plpgsql AS $$
DECLARE prev bigint[] := '{{}}'; ptoks bigint[] := '{{}}'; ptok bigint := 0; tok bigint;
  ids bigint[]; now_ bigint; r record; t0 timestamptz; ta interval := '0'; tb interval := '0';
  i int := 0;
BEGIN
  LOOP
    i := i + 1;
    tok := (random() * 1e15)::bigint;
    now_ := (extract(epoch FROM clock_timestamp()) * 1e6)::bigint;
    ids := NULL;
    t0 := clock_timestamp();
    IF i % 2 = 0 THEN
      FOR r IN {statement(set())} LOOP ids := ids || r.id; END LOOP;
      ta := ta + (clock_timestamp() - t0);
    ELSE
      FOR r IN {statement(parts)} LOOP
        IF r.id IS NOT NULL THEN ids := ids || r.id; END IF;
      END LOOP;
      tb := tb + (clock_timestamp() - t0);
    END IF;
    EXIT WHEN ids IS NULL;
    prev := ids; ptok := tok; ptoks := array_fill(tok, ARRAY[cardinality(ids)]);
    COMMIT;
  END LOOP;
  RAISE NOTICE 'ratio %', extract(epoch FROM tb) / extract(epoch FROM ta);
END $$;
"""


def psql(url, *sql):
    args = ["psql", url, "-v", "ON_ERROR_STOP=1", "-q"]
    for s in sql:
        args += ["-c", s]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return out.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url", nargs="?", default="postgres://postgres@127.0.0.1:5432/test")
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--only", metavar="TEXT", help="only the parts whose name contains TEXT")
    a = ap.parse_args()
    psql(a.url, "DROP TABLE IF EXISTS claim_cost_lab",
         "CREATE TABLE claim_cost_lab (LIKE backlog_job INCLUDING ALL)")
    try:
        print(f"| part added to the bare statement | time ratio, {a.runs} runs of {a.jobs} jobs |")
        print("|---|---|")
        for name, parts in PARTS.items():
            if a.only and a.only not in name:
                continue
            psql(a.url, procedure(parts))
            ratios = []
            for _ in range(a.runs):
                log = psql(a.url, "TRUNCATE claim_cost_lab",
                           f"INSERT INTO claim_cost_lab (queue, payload) SELECT 'q', "
                           f"jsonb_build_object('i', g) FROM generate_series(1, {a.jobs}) g",
                           "VACUUM ANALYZE claim_cost_lab", "CALL claim_cost_lab_run()")
                ratios.append(float(re.search(r"ratio ([0-9.]+)", log).group(1)))
            print(f"| {name} | {', '.join(f'{r:.3f}' for r in ratios)} |", flush=True)
    finally:
        psql(a.url, "DROP PROCEDURE IF EXISTS claim_cost_lab_run()",
             "DROP TABLE IF EXISTS claim_cost_lab")


if __name__ == "__main__":
    main()
