--# A claim's columns, in the order claimed_from_row! (src/rows.rs) reads them: `p` the table's
--# alias, `next=yes` for a claim that returns the attempt the job will run as (before
--# job_claim_update writes it).
{{p}}id, {{p}}kind, CAST({{p}}payload AS CHAR) AS payload, {{p}}priority, {{p}}attempt{{? next=yes :  + 1 AS attempt}},
{{p}}max_attempts, {{p}}run_at, {{p}}created_at, {{p}}trace_context, {{p}}group_key
