#![allow(missing_docs)]
//! The conformance suite: every operation and state transition of the backend seam, written once
//! and run against SQLite, PostgreSQL, MariaDB/MySQL and the in-memory backend. PostgreSQL and
//! MySQL are required: a database that cannot be reached fails these tests, it never skips them.
//! One file per area; this one holds what they share and the list of tests.

// The SQLite and in-memory tier leaves the servers' helpers unused.
#[cfg_attr(not(feature = "servers"), allow(dead_code))]
#[path = "../harness/mod.rs"]
mod harness;

mod claims;
mod concurrency;
mod counts;
mod dependencies;
mod enqueue;
mod operators;
mod outcomes;
mod running;
mod transaction_claims;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use backlog_core::*;
use harness::Db;

// The tests of each area, for the list below.
use claims::*;
use concurrency::*;
use counts::*;
use dependencies::*;
use enqueue::*;
use operators::*;
use outcomes::*;
use running::*;
use transaction_claims::*;

const SEC: i64 = 1_000_000;

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn job(queue: &str, payload: &str) -> NewJob {
    NewJob::new(
        q(queue),
        Payload::parse(payload, DEFAULT_PAYLOAD_LIMIT).unwrap(),
    )
}

fn keyed(queue: &str, key: &str) -> NewJob {
    let mut j = job(queue, "{}");
    j.unique_key = Some(UniqueKey::new(key).unwrap());
    j
}

fn claim(queue: &str, limit: u32, now: i64, strategy: ClaimStrategy) -> JobClaimParams {
    JobClaimParams {
        queue: q(queue),
        kinds: vec![],
        limit,
        owner: "test-worker".into(),
        lease: Duration::from_secs(30),
        now,
        order: Ordering::Fifo,
        strategy,
        global_limit: false,
    }
}

async fn enqueue(db: &Db, jobs: Vec<NewJob>, now: i64) -> Vec<EnqueueOutcome> {
    db.b.job_insert(JobInsertParams { jobs, now })
        .await
        .unwrap()
}

async fn ids(db: &Db, jobs: Vec<NewJob>, now: i64) -> Vec<i64> {
    enqueue(db, jobs, now)
        .await
        .into_iter()
        .map(|o| o.id)
        .collect()
}

async fn state_of(db: &Db, id: i64) -> JobState {
    db.b.job_get(id).await.unwrap().expect("job exists").state
}

async fn complete(db: &Db, refs: Vec<JobRef>, now: i64, retention: Retention) -> Vec<JobRef> {
    db.b.job_complete(JobCompleteParams {
        jobs: refs,
        now,
        retention,
    })
    .await
    .unwrap()
}

/// Jobs of the queues left to do, of any kind and whenever due.
async fn pending(db: &Db, queues: &[&str]) -> i64 {
    db.b.job_count_pending(&JobCountPendingParams {
        queues: queues.iter().map(|n| q(n)).collect(),
        kinds: vec![],
        due_by: None,
    })
    .await
    .unwrap()
}

harness::conformance!(
    migrate_is_idempotent_and_concurrent,
    enqueue_defaults_and_claim,
    trace_context_travels_with_the_job,
    batch_enqueue_keeps_input_order,
    unique_keys,
    unique_keys_under_concurrent_producers,
    fifo_lifo_and_priority,
    delayed_jobs_wait_for_run_at,
    paused_queues_hand_out_nothing,
    kinds_filter_claims,
    pending_counts_by_kind_and_due_time,
    completion_retention,
    complete_claim_completes_then_claims,
    one_claims_batch_is_fenced_job_by_job,
    fencing_after_lease_takeover,
    fail_retries_then_dies,
    release_and_heartbeat,
    rescue_of_last_attempt_is_dead,
    operator_actions,
    run_now_makes_a_job_due,
    delete_takes_a_job_from_wherever_it_is_kept,
    rescue_and_redrive_stay_within_their_limit,
    redrive_skips_taken_unique_keys,
    stats_and_lists,
    kept_counts_equal_a_scan,
    queue_settings_round_trip,
    schema_version_and_oldest_due,
    stats_history_and_audit,
    oldest_open_transaction,
    worker_registrations,
    concurrent_claimers_never_share_a_job,
    sharded_claims_take_every_job_once,
    lowering_a_queues_shards_strands_no_job,
    shards_raised_elsewhere_are_claimed_at_once,
    claimers_of_several_processes_never_share_a_job,
    concurrent_complete_claim_loops,
    transaction_claim_mode,
    transaction_claims_in_batches,
    transaction_claim_never_stalls_others,
    heartbeat_reports_cancel_requests,
    progress_and_result,
    pruning_in_bounded_batches,
    leader_election,
    cron_ticks_fire_once,
    topic_subscriptions,
    transactions_the_caller_controls,
    a_child_waits_for_every_parent,
    a_fan_in_is_released_once_by_its_last_parent,
    a_failed_parent_cancels_its_children_in_cascade,
    parents_that_ended_already_or_never_were,
    bad_dependencies_change_nothing,
    operator_cancel_delete_and_rescue_end_parents,
    parents_completed_in_a_callers_transaction,
    parents_ending_at_once_release_their_child_once,
);

#[allow(dead_code)]
fn _unused(_: Arc<dyn Backend>) {}
