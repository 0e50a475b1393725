//! Beginning a transaction on a pool so that a call given up mid-`BEGIN` (its deadline passed,
//! its task was dropped) never leaves a connection in the pool with a transaction open on the
//! server.
//!
//! sqlx counts a transaction open only once `BEGIN` answers. A `BEGIN` future dropped before
//! that (a network stall longer than the statement deadline, say) returns its connection to the
//! pool, whose release ping waits for the late answer; the server then has a transaction open
//! that the client does not know of. Every later call on that connection runs inside it:
//! uncommitted, invisible to other sessions, and undone by the next `ROLLBACK` or when the
//! connection closes. Claims and completions reported as done were lost that way after a 40 s
//! stall on PostgreSQL (RELIABILITY.md, "Network stalls"); MySQL's driver behaves the same.
//!
//! So the `BEGIN` runs in a task of its own. A caller that gives up drops only its wait: the
//! task still reads the answer, and the transaction it then drops is rolled back (sqlx queues
//! the `ROLLBACK`, the release ping sends it) before the connection serves another call. SQLite
//! needs none of this: its driver's worker thread rolls back a `BEGIN` nobody waits for.

use sqlx::{Database, Pool, Transaction};
use tracing::Instrument;

/// Begins a transaction on a connection from `pool` with `statement` (`BEGIN` when `None`),
/// safe to give up on at any point (see the module's doc).
pub(crate) async fn begin<DB: Database>(
    pool: &Pool<DB>,
    statement: Option<&'static str>,
) -> sqlx::Result<Transaction<'static, DB>> {
    let pool = pool.clone();
    let begun = tokio::spawn(
        async move {
            match statement {
                Some(statement) => pool.begin_with(statement).await,
                None => pool.begin().await,
            }
        }
        .in_current_span(),
    );
    match begun.await {
        Ok(tx) => tx,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only a runtime shutting down cancels the task.
        Err(_) => Err(sqlx::Error::PoolClosed),
    }
}
