-- @if order=fifo
ORDER BY priority, run_at, id
-- @else
ORDER BY priority, run_at DESC, id DESC
-- @end
