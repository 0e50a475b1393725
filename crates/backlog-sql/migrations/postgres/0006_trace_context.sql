-- The W3C trace context a job was enqueued with (JSON: {"traceparent": …, "tracestate": …}),
-- so that the span of the handler that runs it continues the enqueuer's trace. NULL when the
-- enqueuer had none. A new nullable column without a default changes no stored row.
ALTER TABLE backlog_job ADD COLUMN trace_context TEXT NULL;
ALTER TABLE backlog_job_archive ADD COLUMN trace_context TEXT NULL;
