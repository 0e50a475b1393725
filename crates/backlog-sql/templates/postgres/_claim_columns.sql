--# A claim's columns, in the order claimed_from_row! (src/rows.rs) reads them: `p` the table's
--# alias, `next=yes` for a claim that returns the attempt the job will run as (it writes
--# nothing), and the shard (by name, for the claim cursor) where the order is FIFO.
{{p}}id, {{p}}kind, {{p}}payload::text AS payload, {{p}}priority, {{p}}attempt{{? next=yes :  + 1 AS attempt}}, {{p}}max_attempts,
{{p}}run_at, {{p}}created_at, {{p}}trace_context, {{p}}group_key{{? order=fifo : , {{p}}shard}}
