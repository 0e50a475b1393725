//! SQLite's own faults (issue 18 item 5): a lock another process holds past the busy timeout, a
//! full disk, a file system that is or turns read-only, and a corrupt file. Each gives a clear
//! error, the process goes on (or stops cleanly), and afterwards `PRAGMA integrity_check` passes
//! with every acknowledged job there.
//!
//! The full disk is shown twice: as a file-size limit (`RLIMIT_FSIZE`) on a child process, which
//! is this test binary run again with `BACKLOG_FAULT_ROLE` set, and as a small tmpfs that really
//! fills up. Read-only files are read-only mounts: the tests run as root, and root writes a file
//! whatever its permissions say (a `chmod 0444` database stays writable to it). Mounting needs
//! root, which CI has; a test that cannot mount fails, it is not skipped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backlog::{
    BackendConfig, CancellationToken, Client, DbErrorKind, Error, JobContext, JobState, Outcome,
    RunReport, Worker,
};
use sqlx::{Connection, SqliteConnection};

fn url_of(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("q.db").display())
}

/// `PRAGMA integrity_check` on its own connection.
async fn integrity(url: &str) -> String {
    let mut c = SqliteConnection::connect(url).await.unwrap();
    sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut c)
        .await
        .unwrap()
}

async fn all_there(client: &Client, ids: &[i64]) {
    for &id in ids {
        if let Err(e) = client.job(id).await {
            panic!("acknowledged job {id} is gone: {e}");
        }
    }
}

/// Enqueues `n` jobs with `payload` one at a time; their ids.
async fn enqueue(client: &Client, n: usize, payload: &str) -> Vec<i64> {
    let mut ids = vec![];
    for _ in 0..n {
        let job = client.new_job("q", payload).unwrap();
        ids.push(client.enqueue(job).await.unwrap().id);
    }
    ids
}

async fn state(client: &Client, id: i64) -> JobState {
    client.job(id).await.unwrap().state
}

/// Waits (10 s at most) until every job of `ids` is in `want`.
async fn wait_for(client: &Client, ids: &[i64], want: JobState) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for &id in ids {
        while state(client, id).await != want {
            assert!(Instant::now() < deadline, "job {id} is not {want:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A worker on queue `q` that completes each job at once, except those whose payload says
/// "hold": they run until `gate` hands them a permit.
fn worker(client: Arc<Client>, gate: Arc<tokio::sync::Semaphore>) -> Worker {
    Worker::builder(client)
        .queue("q", 8)
        .fallback_handler(move |ctx: JobContext| {
            let gate = gate.clone();
            async move {
                if ctx.job().payload.contains("hold") {
                    gate.acquire().await.unwrap().forget();
                }
                Ok(Outcome::Complete)
            }
        })
        .configure(|c| {
            c.poll_max = Duration::from_millis(100);
            c.lease = Some(LEASE);
        })
        .build()
        .unwrap()
}

/// The workers' lease: a job whose completion the database refuses runs again after it.
const LEASE: Duration = Duration::from_secs(5);

fn start(
    worker: &Worker,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<backlog::Result<RunReport>>,
) {
    let stop = CancellationToken::new();
    let run = tokio::spawn({
        let (worker, stop) = (worker.clone(), stop.clone());
        async move { worker.run(stop).await }
    });
    (stop, run)
}

/// Runs `mount` with `args`; its complaint when it fails.
fn mount(args: &[&str]) -> Result<(), String> {
    let out = Command::new("mount")
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// A file system mounted on a directory of its own for one test. Dropping it unmounts it lazily
/// (`umount -l`: detached at once, gone once its last open file is closed), also when the test
/// fails, so no mount outlives the test.
struct Mount {
    dir: tempfile::TempDir,
    /// The ext4 image behind a loop mount, in a directory of its own.
    image: Option<(tempfile::TempDir, PathBuf)>,
}

impl Mount {
    /// A tmpfs of `size` (`2m`).
    fn tmpfs(size: &str) -> Mount {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap();
        if let Err(e) = mount(&["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", path]) {
            panic!(
                "mounting a {size} tmpfs on {path} failed: {e} (it needs root; CI runs as root)"
            );
        }
        Mount { dir, image: None }
    }

    /// A fresh ext4 file system of `mib` MiB on a loop device, which the kernel makes read-only
    /// when it finds an error (`errors=remount-ro`).
    fn ext4(mib: u64) -> Mount {
        let image_dir = tempfile::tempdir().unwrap();
        let image = image_dir.path().join("fs.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(mib << 20)
            .unwrap();
        let made = Command::new("mkfs.ext4")
            .arg("-q")
            .arg(&image)
            .output()
            .map(|o| o.status.success().then_some(()).ok_or(o))
            .unwrap_or_else(|e| panic!("cannot run mkfs.ext4 (e2fsprogs): {e}"));
        if let Err(o) = made {
            panic!("mkfs.ext4 failed: {}", String::from_utf8_lossy(&o.stderr));
        }
        let m = Mount {
            dir: tempfile::tempdir().unwrap(),
            image: Some((image_dir, image)),
        };
        m.mount_image();
        m
    }

    fn mount_image(&self) {
        let (image, path) = (self.image(), self.path().to_str().unwrap());
        let opts = "loop,errors=remount-ro";
        if let Err(e) = mount(&["-o", opts, image.to_str().unwrap(), path]) {
            panic!(
                "mounting an ext4 image on a loop device at {path} failed: {e} (it needs root \
                 and a loop device; CI runs as root)"
            );
        }
    }

    fn image(&self) -> &Path {
        &self.image.as_ref().expect("an ext4 image").1
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn url(&self) -> String {
        format!("sqlite://{}", self.path().join("q.db").display())
    }

    fn remount(&self, opts: &str) -> Result<(), String> {
        let path = self.path().to_str().unwrap();
        mount(&["-o", &format!("remount,{opts}"), path])
    }

    /// Has the kernel find an error on the ext4 file system (its `trigger_fs_error`), which,
    /// with `errors=remount-ro`, it makes read-only at once, as after a failing disk.
    fn fail_ext4(&self) {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        let here = self.path().to_str().unwrap();
        let device = mounts
            .lines()
            .map(|l| l.split(' ').collect::<Vec<_>>())
            .find(|f| f.get(1) == Some(&here))
            .map(|f| f[0].trim_start_matches("/dev/").to_owned())
            .expect("the ext4 mount");
        std::fs::write(format!("/sys/fs/ext4/{device}/trigger_fs_error"), "1").unwrap();
    }

    /// What an operator does once nothing has the file system open: unmount it, check it
    /// (`e2fsck -fy`, which exits 1 when it corrected errors) and mount it again.
    fn repair_ext4(&self) {
        let out = Command::new("umount").arg(self.path()).output().unwrap();
        assert!(
            out.status.success(),
            "umount: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let checked = Command::new("e2fsck")
            .arg("-fy")
            .arg(self.image())
            .output()
            .expect("e2fsck (e2fsprogs)");
        assert!(
            matches!(checked.status.code(), Some(0 | 1)),
            "e2fsck: {checked:?}"
        );
        self.mount_image();
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.path())
            .stderr(Stdio::null())
            .status();
    }
}

/// Another process holds the write lock past the busy timeout: an enqueue fails with a lock
/// timeout that says so, within the timeout and a little; once the lock is gone, the same
/// client goes on, and nothing acknowledged is lost.
#[tokio::test]
async fn a_lock_held_past_the_busy_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let url = url_of(&dir);
    let config = BackendConfig {
        sqlite_busy_timeout: Duration::from_millis(300),
        ..BackendConfig::default()
    };
    let client = Client::connect_with(&url, &config).await.unwrap();
    client.migrate().await.unwrap();
    let mut acked = vec![];
    for i in 0..20 {
        acked.push(
            client
                .enqueue(client.new_job("q", &i).unwrap())
                .await
                .unwrap()
                .id,
        );
    }
    let mut holder = SqliteConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("BEGIN EXCLUSIVE")
        .execute(&mut holder)
        .await
        .unwrap();
    let started = Instant::now();
    let err = client
        .enqueue(client.new_job("q", &"blocked").unwrap())
        .await
        .expect_err("the database is locked by another connection");
    let waited = started.elapsed();
    assert!(
        matches!(
            err,
            Error::Database {
                kind: DbErrorKind::LockTimeout,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("locked"), "{err}");
    assert!(
        waited >= Duration::from_millis(250),
        "gave up after {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    eprintln!("locked for {waited:?}: {err}");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut holder)
        .await
        .unwrap();
    holder.close().await.unwrap();
    acked.push(
        client
            .enqueue(client.new_job("q", &"after").unwrap())
            .await
            .unwrap()
            .id,
    );
    all_there(&client, &acked).await;
    assert_eq!(
        client.jobs(None, None, 0, 100).await.unwrap().len(),
        acked.len()
    );
    client.close().await;
    assert_eq!(integrity(&url).await, "ok");
}

/// The child processes of the tests below, by `BACKLOG_FAULT_ROLE`. Each prints `ok ID` for
/// each job acknowledged to it.
///
/// - `fill` (`a_file_size_limit`): enqueues 4 KiB jobs one at a time under a file-size limit,
///   then prints `err MESSAGE` for the first refusal, shows it still reads the database
///   (`read N`) and exits 0.
/// - `crash` (`a_read_only_mount`): enqueues 10 jobs and exits without closing the database,
///   as a crash would, leaving its `-wal` and `-shm` files behind.
#[tokio::test]
async fn fault_child() {
    let Ok(role) = std::env::var("BACKLOG_FAULT_ROLE") else {
        return; // run by the tests below only
    };
    // The test harness has printed "test fault_child ... " without a newline: the first line
    // of ours starts on a line of its own.
    println!();
    let url = std::env::var("BACKLOG_FAULT_URL").unwrap();
    if role == "crash" {
        let client = Client::connect(&url).await.unwrap();
        for id in enqueue(&client, 10, "crash").await {
            println!("ok {id}");
        }
        std::process::exit(0);
    }
    assert_eq!(role, "fill");
    let limit: u64 = std::env::var("BACKLOG_FAULT_LIMIT")
        .unwrap()
        .parse()
        .unwrap();
    // Past the limit a write fails with EFBIG instead of killing the process with SIGXFSZ: the
    // signal is blocked here, before the connection's threads start (they inherit the mask).
    nix::sys::signal::SigSet::from(nix::sys::signal::Signal::SIGXFSZ)
        .thread_block()
        .unwrap();
    let client = Client::connect(&url).await.unwrap();
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE, limit, limit)
        .unwrap();
    let payload = "x".repeat(4096);
    for _ in 0..100_000 {
        match client.enqueue(client.new_job("q", &payload).unwrap()).await {
            Ok(o) => println!("ok {}", o.id),
            Err(e) => {
                println!("err {e}");
                break;
            }
        }
    }
    let listed = client.jobs(None, None, 0, 10).await.unwrap();
    println!("read {}", listed.len());
    client.close().await;
}

/// What a child said: the jobs acknowledged to it, its error and what it read.
#[derive(Default)]
struct ChildReport {
    acked: Vec<i64>,
    refused: Option<String>,
    read: Option<usize>,
}

/// Runs [`fault_child`] as `role` on `url` (with more environment in `env`) to its end.
fn run_child(role: &str, url: &str, env: &[(&str, String)]) -> (ExitStatus, ChildReport) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fault_child", "--nocapture", "--test-threads=1"])
        .env("BACKLOG_FAULT_ROLE", role)
        .env("BACKLOG_FAULT_URL", url)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut report = ChildReport::default();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(id) = line.strip_prefix("ok ") {
            report.acked.push(id.parse::<i64>().unwrap());
        } else if let Some(e) = line.strip_prefix("err ") {
            report.refused = Some(e.to_owned());
        } else if let Some(n) = line.strip_prefix("read ") {
            report.read = Some(n.parse::<usize>().unwrap());
        }
    }
    (child.wait().unwrap(), report)
}

/// A file-size limit on one producer process (`RLIMIT_FSIZE`): the enqueue that does not fit
/// fails with the database's own words (a disk I/O error, as the kernel answers EFBIG), the
/// producer goes on reading and exits cleanly, and afterwards the file passes `integrity_check`
/// with every job that was acknowledged in it. A limit of one process, which other processes
/// on the same file do not share; `a_full_file_system` fills a real one.
#[tokio::test]
async fn a_file_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let url = url_of(&dir);
    let client = Client::connect(&url).await.unwrap();
    client.migrate().await.unwrap();
    client.close().await;
    let size = std::fs::metadata(dir.path().join("q.db")).unwrap().len();
    let limit = size.max(64 * 1024) + 512 * 1024;
    let env = [("BACKLOG_FAULT_LIMIT", limit.to_string())];
    let (status, report) = run_child("fill", &url, &env);
    assert!(
        status.success(),
        "the producer did not exit cleanly: {status}"
    );
    let refused = report.refused.expect("the file never reached the limit");
    assert!(
        refused.contains("full") || refused.contains("disk I/O"),
        "not a clear error: {refused}"
    );
    assert!(
        report.read.is_some(),
        "the producer could not read after the limit"
    );
    let acked = report.acked;
    assert!(acked.len() >= 10, "only {} jobs fitted", acked.len());
    assert_eq!(integrity(&url).await, "ok");
    eprintln!(
        "file-size limit: {} jobs acknowledged under a {limit}-byte limit, then: {refused}",
        acked.len()
    );
    let client = Client::connect(&url).await.unwrap();
    all_there(&client, &acked).await;
    client.close().await;
}

/// A real full file system, a 2 MiB tmpfs, under a producer: once it is full, the enqueue fails
/// with "database or disk is full" (`DbErrorKind::StorageUnavailable`: transient, though
/// retrying at once does not help until space is freed), and goes on failing; the client still reads. Freeing space (a ballast
/// file put there first is deleted) lets the same client enqueue again at once, without a
/// restart. Afterwards `integrity_check` passes with every acknowledged job there, also after
/// the client closed on the nearly full file system.
#[tokio::test]
async fn a_full_file_system() {
    let fs = Mount::tmpfs("2m");
    let ballast = fs.path().join("ballast");
    std::fs::write(&ballast, vec![0u8; 512 * 1024]).unwrap();
    let url = fs.url();
    let client = Client::connect(&url).await.unwrap();
    client.migrate().await.unwrap();
    let payload = "x".repeat(4096);
    let mut acked = vec![];
    let err = loop {
        match client.enqueue(client.new_job("q", &payload).unwrap()).await {
            Ok(o) => acked.push(o.id),
            Err(e) => break e,
        }
        assert!(acked.len() < 1000, "2 MiB never filled up");
    };
    assert!(
        matches!(
            err,
            Error::Database {
                kind: DbErrorKind::StorageUnavailable,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_transient(), "{err}");
    assert!(
        err.to_string().contains("database or disk is full"),
        "not a clear error: {err}"
    );
    let full = acked.len();
    assert!(full >= 10, "only {full} jobs fitted");
    let listed = client.jobs(None, None, 0, 1000).await.unwrap();
    assert_eq!(listed.len(), full, "the client cannot read on a full disk");
    let again = client.enqueue(client.new_job("q", &payload).unwrap()).await;
    assert!(again.is_err(), "an enqueue fitted on the full disk");
    std::fs::remove_file(&ballast).unwrap();
    let freed = Instant::now();
    acked.extend(enqueue(&client, 5, &payload).await);
    let recovered = freed.elapsed();
    all_there(&client, &acked).await;
    assert_eq!(integrity(&url).await, "ok");
    client.close().await;
    assert_eq!(integrity(&url).await, "ok");
    let client = Client::connect(&url).await.unwrap();
    all_there(&client, &acked).await;
    client.close().await;
    eprintln!(
        "full file system: {full} jobs of 4 KiB acknowledged on a 2 MiB tmpfs, then: {err}; \
         5 more {recovered:?} after 512 KiB were freed"
    );
}

/// A full disk under a running worker (four `backlog work` processes on a 4 MB tmpfs all
/// exited with "database or disk is full" when it filled): the worker stays up while the disk
/// is full, retrying the completions of the jobs it ran while their lease holds; once space is
/// freed it completes them, each run once, and goes on with new jobs, without a restart.
#[tokio::test]
async fn a_worker_waits_out_a_full_disk() {
    let fs = Mount::tmpfs("2m");
    let ballast = fs.path().join("ballast");
    std::fs::write(&ballast, vec![0u8; 512 * 1024]).unwrap();
    let url = fs.url();
    let client = Arc::new(Client::connect(&url).await.unwrap());
    client.migrate().await.unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let worker = worker(client.clone(), gate.clone());
    let (stop, mut run) = start(&worker);
    let held = enqueue(&client, 4, "hold").await;
    wait_for(&client, &held, JobState::Running).await;

    // Jobs of a queue no worker serves fill the disk, to the last page (smaller ones once the
    // large ones no longer fit), so the completions cannot be written either.
    let mut full = None;
    for size in [4096, 512, 1] {
        let payload = "x".repeat(size);
        full = loop {
            match client
                .enqueue(client.new_job("fill", &payload).unwrap())
                .await
            {
                Ok(_) => {}
                Err(e) => break Some(e),
            }
        };
    }
    let full = full.unwrap();
    assert!(full.to_string().contains("full"), "{full}");
    let filled = Instant::now();
    gate.add_permits(held.len());
    let waited = tokio::time::timeout(LEASE / 4, &mut run).await;
    assert!(
        waited.is_err(),
        "the worker ended on a full disk: {waited:?}"
    );
    for &id in &held {
        assert_eq!(state(&client, id).await, JobState::Running, "job {id}");
    }

    std::fs::remove_file(&ballast).unwrap();
    let freed = Instant::now();
    wait_for(&client, &held, JobState::Completed).await;
    let caught_up = freed.elapsed();
    for &id in &held {
        let job = client.job(id).await.unwrap();
        assert_eq!(job.attempt, 1, "job {id} ran again");
    }
    let after = enqueue(&client, 3, "done").await;
    wait_for(&client, &after, JobState::Completed).await;
    stop.cancel();
    let report = run.await.unwrap().expect("the worker stops cleanly");
    assert_eq!(
        report.completed,
        (held.len() + after.len()) as u64,
        "{report:?}"
    );
    client.close().await;
    assert_eq!(integrity(&url).await, "ok");
    eprintln!(
        "full disk under a worker: up throughout; the held jobs completed {caught_up:?} after \
         space was freed ({:?} after the disk filled), each once",
        filled.elapsed()
    );
}

/// Connecting to `url` fails, and soon: the error, which must not call itself a lost connection.
async fn refused_connect(url: &str) -> (Error, Duration) {
    let started = Instant::now();
    let connect = tokio::time::timeout(Duration::from_secs(10), Client::connect(url));
    let err = match connect.await.expect("connecting hangs") {
        Ok(_) => panic!("connected to a read-only database to write it"),
        Err(e) => e,
    };
    assert!(
        matches!(
            err,
            Error::Database {
                kind: DbErrorKind::Other | DbErrorKind::StorageUnavailable,
                ..
            }
        ),
        "{err:?}"
    );
    (err, started.elapsed())
}

/// A read-only mount (a tmpfs: a `chmod 0444` file would not do, root writes it all the same,
/// and the tests run as root). Linux refuses to make a file system read-only while a file on it
/// is open for writing ("mount point is busy"), and a client keeps its database open, so under a
/// running client and worker `mount -o remount,ro` fails and they go on untouched (the file
/// system that turns read-only under a running process is the kernel's doing, after an error:
/// `a_file_system_gone_read_only`). What does happen is a client started while the mount is
/// read-only. After a clean stop (no `-wal` file) SQLite cannot open the file ("unable to open
/// database file"); after a crash, which leaves the `-wal` and `-shm` files, SQLite opens it
/// read-only without a word, and such a client failed every write with "attempt to write a
/// readonly database" for good, even after `remount,rw`. Now both refuse to connect, saying
/// why; `?mode=ro` still opens the file to read. Once the mount is writable again, a client
/// connects and goes on, and every acknowledged job is there, the completed ones completed.
#[tokio::test]
async fn a_read_only_mount() {
    let fs = Mount::tmpfs("8m");
    let url = fs.url();
    let client = Arc::new(Client::connect(&url).await.unwrap());
    client.migrate().await.unwrap();
    let worker = worker(client.clone(), Arc::new(tokio::sync::Semaphore::new(0)));
    let (stop, run) = start(&worker);
    let mut completed = enqueue(&client, 20, "done").await;
    wait_for(&client, &completed, JobState::Completed).await;

    let busy = fs
        .remount("ro")
        .expect_err("remounted read-only under an open database");
    assert!(busy.contains("busy"), "{busy}");
    let more = enqueue(&client, 5, "done").await;
    wait_for(&client, &more, JobState::Completed).await;
    completed.extend(more);
    stop.cancel();
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.completed, completed.len() as u64);
    drop(worker);
    client.close().await;
    drop(client);

    // Stopped cleanly: no -wal file, and SQLite cannot make one.
    fs.remount("ro").unwrap();
    let (clean, took_clean) = refused_connect(&url).await;
    let msg = clean.to_string();
    assert!(msg.contains("unable to open database file"), "{msg}");
    assert!(msg.contains("read-only"), "no hint: {msg}");

    // A producer crashed, leaving -wal and -shm.
    fs.remount("rw").unwrap();
    let (status, crashed) = run_child("crash", &url, &[]);
    assert!(status.success(), "{status}");
    assert_eq!(crashed.acked.len(), 10);
    assert!(fs.path().join("q.db-wal").exists());
    fs.remount("ro").unwrap();
    let (left, took_left) = refused_connect(&url).await;
    let msg = left.to_string();
    assert!(
        msg.contains("attempt to write a readonly database"),
        "{msg}"
    );
    assert!(msg.contains("?mode=ro"), "no hint: {msg}");
    let reader = Client::connect(&format!("{url}?mode=ro")).await.unwrap();
    let listed = reader.jobs(None, None, 0, 100).await.unwrap();
    assert_eq!(listed.len(), completed.len() + crashed.acked.len());
    let refused = reader
        .enqueue(reader.new_job("q", &"ro").unwrap())
        .await
        .expect_err("wrote through ?mode=ro");
    assert!(refused.to_string().contains("readonly"), "{refused}");
    reader.close().await;
    eprintln!("read-only mount, stopped cleanly, in {took_clean:?}: {clean}");
    eprintln!("read-only mount, after a crash, in {took_left:?}: {left}");
    eprintln!("through ?mode=ro: {refused}");

    fs.remount("rw").unwrap();
    let client = Client::connect(&url).await.unwrap();
    let after = enqueue(&client, 1, "after").await;
    assert_eq!(integrity(&url).await, "ok");
    all_there(&client, &crashed.acked).await;
    all_there(&client, &after).await;
    for &id in &completed {
        assert_eq!(state(&client, id).await, JobState::Completed, "job {id}");
    }
    client.close().await;
}

/// A file system that turns read-only under a running worker and producer: ext4 mounted with
/// `errors=remount-ro` (as many systems mount their root) does so when it meets an error, such as
/// a failing disk; `trigger_fs_error` stands in for one. Writes fail with a "disk I/O error"
/// (`DbErrorKind::StorageUnavailable`, not a lost connection: the client still reads); the
/// worker, whose completions fail, stays up, retrying them while their lease holds and then
/// its claims (as after a full disk: `a_worker_waits_out_a_full_disk`), and stops cleanly when
/// told; a new client refuses to connect, saying the database can only be read. `remount,rw` does not bring it back: it takes an operator to stop
/// the processes, unmount, run `e2fsck` and mount again. Then `integrity_check` passes, the
/// completed jobs are completed, and the jobs whose completion was refused are still running
/// under their lease, to be rescued and run again once it ends.
#[tokio::test]
async fn a_file_system_gone_read_only() {
    let fs = Mount::ext4(8);
    let url = fs.url();
    let client = Arc::new(Client::connect(&url).await.unwrap());
    client.migrate().await.unwrap();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let worker = worker(client.clone(), gate.clone());
    let (stop, run) = start(&worker);
    let completed = enqueue(&client, 20, "done").await;
    wait_for(&client, &completed, JobState::Completed).await;
    let held = enqueue(&client, 4, "hold").await;
    wait_for(&client, &held, JobState::Running).await;

    fs.fail_ext4();
    let started = Instant::now();
    let err = client
        .enqueue(client.new_job("q", &"after").unwrap())
        .await
        .expect_err("wrote to a read-only file system");
    let took = started.elapsed();
    assert!(
        matches!(
            err,
            Error::Database {
                kind: DbErrorKind::StorageUnavailable,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("disk I/O error"), "{err}");
    let listed = client.jobs(None, None, 0, 100).await.unwrap();
    assert_eq!(listed.len(), completed.len() + held.len());
    let (refused, _) = refused_connect(&url).await;
    assert!(refused.to_string().contains("readonly"), "{refused}");
    // An operator's first try brings nothing back: `mount -o remount,rw` fails (here because it
    // passes the file system's options back, one of which ext4 does not take; the remount
    // system call alone leaves the file system read-only too), and writes go on failing.
    let rw = fs.remount("rw");
    let still = client
        .enqueue(client.new_job("q", &"after remount").unwrap())
        .await
        .expect_err("wrote after remount,rw");
    assert!(still.to_string().contains("disk I/O error"), "{still}");

    gate.add_permits(held.len());
    // The jobs end; their completions are refused. The worker goes on (retrying them for
    // their lease, then claiming at each poll) until it is told to stop.
    let mut run = run;
    let waited = tokio::time::timeout(LEASE * 2, &mut run).await;
    assert!(
        waited.is_err(),
        "the worker ended on a read-only file system: {waited:?}"
    );
    let stopping = Instant::now();
    stop.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the worker stops when told")
        .expect("the worker panicked");
    let stopped = stopping.elapsed();
    let report = ended.expect("the worker stops cleanly on a read-only file system");
    assert_eq!(report.completed, completed.len() as u64, "{report:?}");
    drop(worker);
    tokio::time::timeout(Duration::from_secs(10), client.close())
        .await
        .expect("closing hangs");
    drop(client);

    let repairing = Instant::now();
    fs.repair_ext4();
    let repaired = repairing.elapsed();
    assert_eq!(integrity(&url).await, "ok");
    let client = Client::connect(&url).await.unwrap();
    for &id in &completed {
        assert_eq!(state(&client, id).await, JobState::Completed, "job {id}");
    }
    for &id in &held {
        assert_eq!(state(&client, id).await, JobState::Running, "job {id}");
    }
    client
        .enqueue(client.new_job("q", &"repaired").unwrap())
        .await
        .unwrap();
    client.close().await;
    eprintln!("ext4 gone read-only: enqueue refused in {took:?}: {err}");
    eprintln!("a new client: {refused}");
    eprintln!("remount,rw: {rw:?}, then: {still}");
    eprintln!("the worker stayed up, and stopped {stopped:?} after it was told to");
    eprintln!("umount, e2fsck -fy, mount: {repaired:?}");
}

/// A file that is not a database (its header overwritten) or is cut short: opening it gives a
/// clear error, not a panic and not an empty queue.
#[tokio::test]
async fn a_corrupt_or_torn_file() {
    for damage in ["overwritten", "torn"] {
        let dir = tempfile::tempdir().unwrap();
        let url = url_of(&dir);
        let client = Client::connect(&url).await.unwrap();
        client.migrate().await.unwrap();
        let jobs = (0..500).map(|i| client.new_job("q", &i).unwrap()).collect();
        client.enqueue_many(jobs).await.unwrap();
        client.close().await;
        let path = dir.path().join("q.db");
        let mut bytes = std::fs::read(&path).unwrap();
        // Closing the last connection checkpointed the WAL into the file and removed it.
        assert!(!dir.path().join("q.db-wal").exists());
        match damage {
            "overwritten" => bytes[..100].fill(0x5a),
            _ => bytes.truncate(bytes.len() / 2),
        }
        std::fs::write(&path, &bytes).unwrap();
        let opened = async {
            let client = Client::connect(&url).await?;
            client.migrate().await?;
            client.jobs(None, None, 0, 1000).await
        };
        let err = opened.await.expect_err(damage);
        assert!(
            !matches!(
                err,
                Error::Database {
                    kind: DbErrorKind::ConnectionLost,
                    ..
                }
            ),
            "{damage}: a damaged file is not a lost connection: {err:?}"
        );
        let msg = err.to_string();
        eprintln!("{damage} file: {msg}");
        assert!(
            msg.contains("not a database") || msg.contains("malformed") || msg.contains("corrupt"),
            "{damage}: not a clear error: {msg}"
        );
    }
}
