//! The web dashboard in a real browser: `backlog serve` on a temporary SQLite database, headless
//! Chromium driven over WebDriver (chromedriver), and the API to set up and check what the
//! clicks did. Needs `chromium` and `chromium-driver` (scripts/services.sh installs them); the
//! test fails, never skips, without them.
//!
//! Screenshots land in `<target>/dashboard-screenshots/` (the path is printed).
#![cfg(feature = "servers")]

mod common;

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Engine, TestDb};
use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

const ADMIN: &str = "dash-admin-secret-0123456789";
const READ: &str = "dash-read-secret-0123456789";
const PRODUCE: &str = "dash-produce-secret-0123456789";
/// Longest any one wait may take.
const WAIT: Duration = Duration::from_secs(10);

/// The processes this test started; each is ended (with its process group: chromedriver's
/// browsers) when the test ends, passed or failed.
struct Procs(Vec<(&'static str, Child)>);

impl Drop for Procs {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        for (name, child) in &mut self.0 {
            let group = Pid::from_raw(child.id() as i32);
            let _ = killpg(group, Signal::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = killpg(group, Signal::SIGKILL);
            let _ = child.wait();
            eprintln!("dashboard test: stopped {name}");
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One request to the server (ureq, off the async runtime); the status and the JSON body (Null
/// when empty), whatever the status.
async fn http(
    port: u16,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let req = ureq::request(method, &format!("http://127.0.0.1:{port}{path}"))
        .set("Authorization", &format!("Bearer {token}"))
        .timeout(WAIT);
    let what = format!("{method} {path}");
    tokio::task::spawn_blocking(move || {
        let res = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        let res = match res {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{what}: {e}"),
        };
        (res.status(), res.into_json().unwrap_or(Value::Null))
    })
    .await
    .unwrap()
}

/// Expects 2xx.
async fn api(port: u16, method: &str, path: &str, token: &str, body: Option<Value>) -> Value {
    let (status, v) = http(port, method, path, token, body).await;
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {v}"
    );
    v
}

async fn wait_until<F, Fut>(what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while !ready().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {WAIT:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The browser, with helpers that wait (bounded) and survive the page's live re-renders.
struct Browser {
    client: Client,
    base: String,
    shots: PathBuf,
}

impl Browser {
    async fn goto(&self, hash: &str) {
        self.client
            .goto(&format!("{}/{hash}", self.base))
            .await
            .unwrap();
    }

    async fn find(&self, css: &str) -> Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} within {WAIT:?}: {e}"))
    }

    /// The text of the first element matching `css`, or None (read in one script call, so a
    /// re-render between finding and reading cannot make it stale).
    async fn text(&self, css: &str) -> Option<String> {
        let v = self
            .client
            .execute(
                "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
                vec![json!(css)],
            )
            .await
            .unwrap();
        v.as_str().map(str::to_owned)
    }

    async fn exists(&self, css: &str) -> bool {
        self.text(css).await.is_some()
    }

    async fn wait_text(&self, css: &str, needle: &str) -> String {
        let mut last = None;
        let deadline = Instant::now() + WAIT;
        loop {
            last = self.text(css).await.or(last);
            if let Some(t) = &last
                && t.contains(needle)
            {
                return t.clone();
            }
            assert!(
                Instant::now() < deadline,
                "{css} did not show {needle:?} within {WAIT:?}; last text: {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks, finding the element again if a re-render replaced it in between, and scrolling
    /// it to the middle of the window if the sticky header covered it.
    async fn click(&self, css: &str) {
        for _ in 0..5 {
            match self.find(css).await.click().await {
                Ok(()) => return,
                Err(CmdError::Standard(e))
                    if e.error == fantoccini::error::ErrorStatus::StaleElementReference => {}
                Err(CmdError::Standard(e))
                    if e.error == fantoccini::error::ErrorStatus::ElementClickIntercepted =>
                {
                    let center = "document.querySelector(arguments[0])\
                                  .scrollIntoView({block: 'center'});";
                    self.client.execute(center, vec![json!(css)]).await.unwrap();
                }
                Err(e) => panic!("click {css}: {e}"),
            }
        }
        panic!("{css} went stale five times");
    }

    /// Replaces a field's value, finding it again if a re-render replaced it in between (the live
    /// refresh pauses only once typing has begun).
    async fn type_into(&self, css: &str, text: &str) {
        for _ in 0..5 {
            let field = self.find(css).await;
            let typed = match field.clear().await {
                Ok(()) => field.send_keys(text).await,
                Err(e) => Err(e),
            };
            match typed {
                Ok(()) => return,
                Err(CmdError::Standard(e))
                    if e.error == fantoccini::error::ErrorStatus::StaleElementReference => {}
                Err(e) => panic!("type into {css}: {e}"),
            }
        }
        panic!("{css} went stale five times");
    }

    async fn banner(&self, needle: &str) -> String {
        self.wait_text("#banner:not([hidden]) #banner-text", needle)
            .await
    }

    /// A screenshot of the top of the page.
    async fn shot(&self, name: &str) {
        self.client
            .execute("window.scrollTo(0, 0);", vec![])
            .await
            .unwrap();
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(self.shots.join(name), png).unwrap();
    }

    async fn login(&self, token: &str) {
        self.goto("").await;
        let input = self.find("#token").await;
        input.send_keys(token).await.unwrap();
        self.click("#login button[type=submit]").await;
        self.find("#who:not([hidden])").await;
    }

    async fn logout(&self) {
        self.click("#logout").await;
        self.find("#login").await;
    }
}

fn screenshots_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.parent().unwrap_or(tmp).join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start_server(db: &TestDb, port: u16, procs: &mut Procs) {
    let tokens = db.path("tokens");
    std::fs::write(
        &tokens,
        format!("ops admin {ADMIN}\nviewer read {READ}\nci produce {PRODUCE}\n"),
    )
    .unwrap();
    let child = db
        .cmd(&[
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--tokens",
            tokens.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("backlog serve starts");
    procs.0.push(("backlog serve", child));
}

fn start_chromedriver(port: u16, procs: &mut Procs) {
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start chromedriver ({e}): install chromium and chromium-driver \
                 (scripts/services.sh does)"
            )
        });
    procs.0.push(("chromedriver", child));
}

async fn port_open(port: u16) -> bool {
    tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_ok()
}

async fn connect_browser(driver_port: u16) -> Client {
    connect_browser_with(driver_port, &[]).await
}

async fn connect_browser_with(driver_port: u16, extra: &[&str]) -> Client {
    let mut args = vec![
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,800",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ];
    args.push("--lang=en-US");
    args.extend_from_slice(extra);
    let mut options = json!({ "args": args });
    if Path::new("/usr/bin/chromium").exists() {
        options["binary"] = json!("/usr/bin/chromium");
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), options);
    let mut builder = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
    builder.capabilities(caps);
    let url = format!("http://127.0.0.1:{driver_port}");
    let connect = builder.connect(&url);
    let client = tokio::time::timeout(Duration::from_secs(30), connect)
        .await
        .expect("chromedriver starts a browser within 30 s")
        .expect("a WebDriver session");
    client.set_window_size(1280, 800).await.unwrap();
    client
}

/// A job in `queue` that has died: enqueued with one attempt, claimed over the worker protocol
/// and failed.
async fn dead_job(port: u16, queue: &str, payload: Value, error: &str) -> i64 {
    let id = api(
        port,
        "POST",
        "/api/v1/jobs",
        PRODUCE,
        Some(
            json!({"queue": queue, "payload": payload, "max_attempts": 1, "priority": -10,
                    "kind": "send"}),
        ),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    let claimed = api(
        port,
        "POST",
        &format!("/api/v1/queues/{queue}/claim"),
        PRODUCE,
        Some(json!({"worker": "test-worker"})),
    )
    .await;
    assert_eq!(
        claimed["jobs"][0]["id"], id,
        "the priority -10 job is claimed first"
    );
    let token = claimed["jobs"][0]["token"].clone();
    let failed = api(
        port,
        "POST",
        &format!("/api/v1/jobs/{id}/fail"),
        PRODUCE,
        Some(json!({"token": token, "error": error})),
    )
    .await;
    assert_eq!(failed["outcome"], "dead");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_a_real_browser() {
    let started = Instant::now();
    let db = TestDb::new(Engine::Sqlite);
    let (port, driver_port) = (free_port(), free_port());
    let mut procs = Procs(vec![]);
    start_server(&db, port, &mut procs);
    start_chromedriver(driver_port, &mut procs);
    wait_until("backlog serve listens", || port_open(port)).await;
    wait_until("chromedriver listens", || port_open(driver_port)).await;

    // Jobs to look at: four waiting in `emails`, two in `reports`, and one dead in `emails`.
    for i in 0..4 {
        api(
            port,
            "POST",
            "/api/v1/jobs",
            PRODUCE,
            Some(
                json!({"queue": "emails", "payload": {"to": format!("user{i}@example.com")},
                        "kind": "welcome"}),
            ),
        )
        .await;
    }
    for i in 0..2 {
        api(
            port,
            "POST",
            "/api/v1/jobs",
            PRODUCE,
            Some(json!({"queue": "reports", "payload": {"month": i + 1}})),
        )
        .await;
    }
    let dead = dead_job(
        port,
        "emails",
        json!({"to": "bounce@example.com", "template": "receipt"}),
        "smtp: 550 mailbox unavailable",
    )
    .await;

    // A worker on `thumbnails` completes its jobs, and its leader samples every queue's depth
    // as it starts: the charts have something to draw.
    for i in 0..5 {
        api(
            port,
            "POST",
            "/api/v1/jobs",
            PRODUCE,
            Some(json!({"queue": "thumbnails", "payload": {"image": i}})),
        )
        .await;
    }
    let worker = db
        .cmd(&["work", "thumbnails", "--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("backlog work starts");
    procs.0.push(("backlog work", worker));

    let client = connect_browser(driver_port).await;
    let b = Browser {
        client,
        base: format!("http://127.0.0.1:{port}"),
        shots: screenshots_dir(),
    };
    eprintln!("dashboard screenshots: {}", b.shots.display());

    // Sign in as admin; the overview shows each queue's counts.
    b.login(ADMIN).await;
    assert_eq!(b.text("#who-name").await.as_deref(), Some("ops"));
    assert_eq!(b.text("#who-scope").await.as_deref(), Some("admin"));
    // Times say their zone; a command's failure shows its stderr before its exit status.
    let text = b
        .client
        .execute(
            r#"const t = window.backlogText;
               return [
                 t.localTime(0),
                 t.errorSummary("command exit status: 1: connecting\nthe upstream refused"),
                 t.errorSummary("command exit status: 2"),
                 t.errorSummary("command signal: 9 (SIGKILL)"),
                 t.errorSummary("smtp: 550 mailbox unavailable"),
               ];"#,
            vec![],
        )
        .await
        .unwrap();
    let zoned = text[0].as_str().unwrap();
    assert!(
        zoned.starts_with("19")
            && (zoned.ends_with(" UTC") || zoned.contains(" UTC+") || zoned.contains(" UTC-")),
        "{zoned}"
    );
    assert_eq!(
        text.as_array().unwrap()[1..],
        [
            json!("the upstream refused · exit status: 1"),
            json!("command exit status: 2"),
            json!("command signal: 9 (SIGKILL)"),
            json!("smtp: 550 mailbox unavailable"),
        ]
    );
    // The page's icon is inline and draws (no /favicon.ico request that would answer 404).
    let icon = b
        .client
        .execute_async(
            r#"const done = arguments[arguments.length - 1];
               const link = document.querySelector("link[rel=icon]");
               const img = new Image();
               img.onload = () => done(link.href.startsWith("data:image/svg+xml") && img.width > 0);
               img.onerror = () => done(false);
               img.src = link.href;"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(icon, json!(true));
    // The live refresh sends one page's requests at a time, however slow the answers: with every
    // answer 4 s late (the overview asks for its queues and its history side by side), no more
    // than those two are ever in flight, and the next refresh waits three times as long as the
    // last one took.
    let slow = b
        .client
        .execute(
            r#"const real = window.fetch;
               const seen = { inflight: 0, most: 0, calls: 0, real };
               window.__slow = seen;
               window.fetch = async (...args) => {
                 seen.inflight++; seen.calls++; seen.most = Math.max(seen.most, seen.inflight);
                 try {
                   await new Promise((r) => setTimeout(r, 4000));
                   return await real(...args);
                 } finally { seen.inflight--; }
               };
               return true;"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(slow, json!(true));
    tokio::time::sleep(Duration::from_secs(14)).await;
    let seen = b
        .client
        .execute(
            "const s = window.__slow; window.fetch = s.real; \
             return {most: s.most, calls: s.calls};",
            vec![],
        )
        .await
        .unwrap();
    let (most, calls) = (
        seen["most"].as_i64().unwrap(),
        seen["calls"].as_i64().unwrap(),
    );
    assert!(most <= 2, "{most} requests in flight at once: {seen}");
    // 14 s: a refresh starts within 3 s and takes 4, the next waits 12: at most two refreshes.
    assert!((1..=4).contains(&calls), "{calls} requests in 14 s: {seen}");
    // Answers on time again: once the slow ones are in, showing the tab refreshes at once and
    // the refresh is back to every 3 s.
    let settled = "return window.__slow.inflight === 0;";
    let mut rounds = 0;
    while b.client.execute(settled, vec![]).await.unwrap() != json!(true) {
        rounds += 1;
        assert!(rounds < 100, "the slow answers never came");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.client
        .execute(
            "document.dispatchEvent(new Event('visibilitychange')); return true;",
            vec![],
        )
        .await
        .unwrap();
    // The chart code on made-up minutes: lines break where a depth is unknown (null).
    let drawn = b
        .client
        .execute(
            r#"const t0 = Date.UTC(2025, 0, 1, 12, 0) * 1000;
               const minutes = Array.from({length: 30}, (_, i) => ({
                 minute: t0 + i * 60e6, minute_rfc3339: new Date(t0 / 1000 + i * 60e3).toISOString(),
                 enqueued: i, started: i, completed: 2 * i, failed: i % 3, dead: i % 5 === 0 ? 1 : 0,
                 rescued: 0, available: i >= 10 && i < 15 ? null : 100 - i, running: 3,
                 scheduled: null, dead_total: 1 }));
               const c = window.backlogCharts;
               const line = c.draw(minutes, [{key: "completed", label: "c"}], "line");
               const depth = c.draw(minutes, [{key: "available", label: "a"},
                                             {key: "scheduled", label: "s"}], "line-gauge");
               const bars = c.draw(minutes, [{key: "failed", label: "f"}, {key: "dead", label: "d"}], "bars");
               return {
                 line: line.querySelector("path.s-completed").getAttribute("d"),
                 ymax: [...line.querySelectorAll(".ylabel")].map(e => e.textContent),
                 depth: depth.querySelector("path.s-available").getAttribute("d"),
                 depthPaths: depth.querySelectorAll("path").length,
                 bars: bars.querySelectorAll("rect.bar").length,
                 tips: bars.querySelectorAll("rect.hover title").length,
                 nice: [0, 7, 58, 100, 101].map(c.niceMax),
                 // Large counts fit the axis: no label cut to "00,000".
                 big: [...c.draw(minutes.map((m) => ({...m, completed: 250000 + m.completed})),
                         [{key: "completed", label: "c"}], "line").querySelectorAll(".ylabel")]
                       .map((e) => e.textContent),
               };"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(drawn["line"].as_str().unwrap().matches('M').count(), 1);
    assert_eq!(drawn["line"].as_str().unwrap().matches('L').count(), 29);
    assert_eq!(
        drawn["ymax"],
        json!(["0", "50", "100"]),
        "completed peaks at 58"
    );
    assert_eq!(
        drawn["depth"].as_str().unwrap().matches('M').count(),
        2,
        "a gap where depth is null: {}",
        drawn["depth"]
    );
    assert_eq!(drawn["depthPaths"], 1, "an all-null series draws nothing");
    // failed is non-zero in 20 of 30 minutes, dead in 6.
    assert_eq!(drawn["bars"], 26);
    assert_eq!(drawn["tips"], 30);
    assert_eq!(drawn["nice"], json!([1, 10, 100, 100, 200]));
    assert_eq!(
        drawn["big"],
        json!(["0", "250K", "500K"]),
        "large counts are labelled short enough for the axis"
    );

    b.find("#queues tr[data-queue=emails]").await;
    let count = |q: &str, s: &str| format!("#queues tr[data-queue={q}] td[data-count={s}]");
    assert_eq!(b.text(&count("emails", "available")).await.unwrap(), "4");
    assert_eq!(b.text(&count("emails", "dead")).await.unwrap(), "1");
    assert_eq!(b.text(&count("reports", "available")).await.unwrap(), "2");
    assert_eq!(b.text(&count("reports", "dead")).await.unwrap(), "0");
    // The dead-letter view, from the overview's dead count.
    b.click(&format!("{} a", count("emails", "dead"))).await;
    b.wait_text(".tabs a.on", "dead").await;
    b.find(&format!("#jobs tr[data-job='{dead}']")).await;
    b.wait_text(
        &format!("#jobs tr[data-job='{dead}']"),
        "550 mailbox unavailable",
    )
    .await;
    b.shot("dead-letters.png").await;

    // The dead job's page: payload, error history and the actions a dead job allows.
    b.click(&format!("#jobs tr[data-job='{dead}'] a")).await;
    b.wait_text("#job-state", "dead").await;
    b.wait_text("#payload", "\"bounce@example.com\"").await;
    b.wait_text("#errors", "smtp: 550 mailbox unavailable")
        .await;
    assert!(b.exists("button[data-action=retry]").await);
    assert!(
        !b.exists("button[data-action=hold]").await,
        "a dead job cannot be held"
    );
    assert!(!b.exists("button[data-action=cancel]").await);
    b.shot("job-dead.png").await;

    // Redrive from the dead-letter view; the job is available again.
    b.goto("#/queues/emails/dead").await;
    b.click("#redrive").await;
    b.banner("1 dead job of emails redriven").await;
    b.wait_text("#main", "No dead jobs.").await;
    // "Redrive 1,500" redrives 1,500, not the API's default 1,000 a call.
    db.sql(
        "INSERT INTO backlog_job (queue, payload, state, attempt, max_attempts, finished_at) \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1500) \
         SELECT 'bulk', '{}', 'dead', 1, 1, 1 FROM n",
    );
    b.goto("#/queues/bulk/dead").await;
    b.wait_text("#redrive", "Redrive 1,500").await;
    b.click("#redrive").await;
    b.banner("1,500 dead jobs of bulk redriven").await;
    b.wait_text("#main", "No dead jobs.").await;
    // The 1,500 are available now, 50 a page: on to the next page and back.
    b.goto("#/queues/bulk/available").await;
    b.wait_text(".pager", "Page 1 · 50 jobs").await;
    b.click("#next-page").await;
    b.wait_text(".pager", "Page 2 · 50 jobs").await;
    b.click("#prev-page").await;
    b.wait_text(".pager", "Page 1 · 50 jobs").await;
    // Bulk actions, each after a confirmation: the checked jobs, then all of the tab.
    b.click("#jobs tbody tr:first-child input.pick").await;
    b.click("#bulk-hold-checked").await;
    b.client.accept_alert().await.unwrap();
    b.banner("Hold: 1 of 1 checked jobs changed").await;
    b.wait_text("#bulk-hold-all", "Hold all 1,499").await;
    b.click("#bulk-hold-all").await;
    b.client.dismiss_alert().await.unwrap();
    b.wait_text("#bulk-hold-all", "Hold all 1,499").await;
    b.click("#bulk-hold-all").await;
    b.client.accept_alert().await.unwrap();
    b.banner("Hold: 1,499 of 1,499 available jobs changed")
        .await;
    b.goto("#/queues/bulk/held").await;
    b.wait_text(".tabs a.on", "1,500").await;
    assert!(b.exists("#bulk-release-all").await && !b.exists("#bulk-retry-all").await);
    b.click("#bulk-release-all").await;
    b.client.accept_alert().await.unwrap();
    b.banner("Release: 1,500 of 1,500 held jobs changed").await;
    b.goto("#/audit?action=job.bulk").await;
    b.wait_text("#audit", "Release (held): 1,500 of 1,500 changed")
        .await;
    b.goto("#/queues/bulk/available").await;
    b.wait_text(".pager", "Page 1 · 50 jobs").await;
    // Delete one job from its page (after a confirmation), then all of the tab, with progress.
    let one = db.sql("SELECT MIN(id) FROM backlog_job WHERE queue = 'bulk'");
    let one = one.trim();
    b.goto(&format!("#/jobs/{one}")).await;
    b.click("button[data-action=delete]").await;
    b.client.dismiss_alert().await.unwrap();
    b.wait_text("#job-state", "available").await;
    b.click("button[data-action=delete]").await;
    b.client.accept_alert().await.unwrap();
    b.banner(&format!("Job {one} deleted")).await;
    b.wait_text(".tabs a.on", "1,499").await;
    b.goto("#/queues/bulk/available").await;
    b.wait_text("#bulk-delete-all", "Delete all 1,499").await;
    b.click("#bulk-delete-all").await;
    b.client.accept_alert().await.unwrap();
    b.banner("Delete: 1,499 of 1,499 available jobs changed")
        .await;
    assert_eq!(
        db.sql("SELECT COUNT(*) FROM backlog_job WHERE queue = 'bulk'")
            .trim(),
        "0"
    );
    b.goto("#/audit?action=job.delete").await;
    b.wait_text("#audit", "deleted, was").await;
    b.goto(&format!("#/jobs/{dead}")).await;
    b.wait_text("#job-state", "available").await;
    assert!(b.exists("button[data-action=hold]").await);
    // Its page refreshes every 3 s; the queue (read for max attempts, with its counts) is read
    // at most once a minute, not at each refresh.
    let counting = r#"const real = window.fetch; const seen = { real, queue: 0, job: 0 };
        window.__count = seen;
        window.fetch = (path, ...rest) => {
          if (String(path).includes("/api/v1/queues/")) seen.queue++;
          if (String(path).includes("/api/v1/jobs/")) seen.job++;
          return real(path, ...rest);
        };
        return true;"#;
    b.client.execute(counting, vec![]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(7000)).await;
    let seen = b
        .client
        .execute(
            "const s = window.__count; window.fetch = s.real; return {queue: s.queue, job: s.job};",
            vec![],
        )
        .await
        .unwrap();
    assert!(seen["job"].as_i64().unwrap() >= 2, "refreshed: {seen}");
    assert_eq!(seen["queue"], json!(0), "the queue read again: {seen}");

    // A worker completes it over the API; the open page shows it without a reload.
    let claimed = api(
        port,
        "POST",
        "/api/v1/queues/emails/claim",
        PRODUCE,
        Some(json!({})),
    )
    .await;
    assert_eq!(claimed["jobs"][0]["id"], dead);
    b.wait_text("#job-state", "running").await;
    api(
        port,
        "POST",
        &format!("/api/v1/jobs/{dead}/complete"),
        PRODUCE,
        Some(json!({"token": claimed["jobs"][0]["token"], "result": {"delivered": true}})),
    )
    .await;
    b.wait_text("#job-state", "completed").await;
    b.wait_text("#result", "\"delivered\": true").await;
    b.shot("job-completed.png").await;

    // Pause the queue from its page.
    b.click(".crumbs a[href='#/queues/emails']").await;
    b.click("#pause").await;
    b.wait_text("#queue-status", "paused").await;
    let q = api(port, "GET", "/api/v1/queues/emails", READ, None).await;
    assert_eq!(q["settings"]["paused"], true);
    assert!(b.exists("#resume").await);
    // Who paused it, from the audit log.
    b.wait_text("#paused-by", "Paused by ops").await;

    // The settings form: typing pauses the live refresh (the value survives it), saving changes
    // the queue.
    b.type_into("#settings input[name=max_attempts]", "7").await;
    b.wait_text("#live", "paused while editing").await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let field = b.find("#settings input[name=max_attempts]").await;
    assert_eq!(field.prop("value").await.unwrap().as_deref(), Some("7"));
    b.click("#settings button[type=submit]").await;
    b.banner("Settings of emails saved").await;
    let q = api(port, "GET", "/api/v1/queues/emails", READ, None).await;
    assert_eq!(q["settings"]["max_attempts"], 7);
    b.wait_text("#live", "live").await;
    // Every setting is in the form, and one emptied goes back to its default (null): flow
    // control set, then lifted.
    b.wait_text("#live", "live").await;
    b.type_into("#settings input[name=rate_limit]", "100/1m")
        .await;
    b.type_into("#settings input[name=global_concurrency]", "5")
        .await;
    b.click("#settings button[type=submit]").await;
    let settings = |want: Value| async move {
        for _ in 0..50 {
            let q = api(port, "GET", "/api/v1/queues/emails", READ, None).await;
            let got = json!([
                q["settings"]["rate_limit"],
                q["settings"]["global_concurrency"]
            ]);
            if got == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the settings never became {want}");
    };
    settings(json!(["100/1m", 5])).await;
    b.wait_text("#live", "live").await;
    b.type_into("#settings input[name=rate_limit]", "").await;
    b.type_into("#settings input[name=global_concurrency]", "")
        .await;
    b.click("#settings button[type=submit]").await;
    settings(json!([null, null])).await;
    b.shot("queue.png").await;

    // The audit log: the queue's link opens it filtered to the queue; the settings change shows
    // each setting as before → after; the action filter narrows it.
    b.click("#queue-audit").await;
    b.find("#audit tr[data-audit-action='queue.pause']").await;
    b.wait_text(
        "#audit tr[data-audit-action='queue.settings'] li[data-setting=max_attempts]",
        "→ 7",
    )
    .await;
    let queues = b
        .client
        .execute(
            "return [...document.querySelectorAll('#audit tbody tr td:nth-child(4)')].map(td => td.textContent);",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        queues.as_array().unwrap().iter().all(|q| q == "emails"),
        "{queues}"
    );
    b.client
        .execute(
            "document.querySelector('#audit-filter select[name=action]').value = 'queue.pause';
             document.querySelector('#audit-filter button[type=submit]').click();",
            vec![],
        )
        .await
        .unwrap();
    b.wait_text("#audit-clear", "clear").await;
    let actions = b
        .client
        .execute(
            "return [...document.querySelectorAll('#audit tbody tr')].map(tr => tr.dataset.auditAction);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(actions, json!(["queue.pause"]));
    b.shot("audit.png").await;

    // A kind filter: `?kind=` in the page's address (a kind in the table links to it) lists
    // that kind's jobs only, on every tab.
    let digest = api(
        port,
        "POST",
        "/api/v1/jobs",
        PRODUCE,
        Some(json!({"queue": "emails", "payload": {"weekly": true}, "kind": "digest"})),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    b.goto("#/queues/emails/available?kind=digest").await;
    b.wait_text("#kind-filter", "digest").await;
    b.find(&format!("#jobs tr[data-job='{digest}']")).await;
    let rows = b
        .client
        .execute(
            "return document.querySelectorAll('#jobs tbody tr').length;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(rows, json!(1), "welcome jobs are filtered out");
    let tab = b
        .client
        .execute(
            "return document.querySelector('nav.tabs a[data-state=dead]').getAttribute('href');",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(tab, json!("#/queues/emails/dead?kind=digest"));

    // The workers: the `backlog work` process on thumbnails is there, live.
    b.goto("#/workers").await;
    b.find("#workers a[data-queue=thumbnails]").await;
    b.wait_text("#workers-summary", "1 running").await;
    b.wait_text("#workers tbody tr", "live").await;
    b.shot("workers.png").await;

    // The schedules: one a leader declared and fired, one declared only.
    let lib = backlog::Client::connect(&db.url).await.unwrap();
    let now = lib.now();
    let declared = |name: &str| backlog::CronSchedule {
        name: name.into(),
        schedule: Some("every 1h".into()),
        queue: Some("reports".into()),
        kind: None,
        last_tick: 0,
        next_tick: Some(now + 3_600_000_000),
        declared_at: Some(now),
    };
    lib.backend()
        .cron_declare(&[declared("hourly-report"), declared("never-yet")])
        .await
        .unwrap();
    lib.backend()
        .cron_fire(backlog_core::CronFireParams {
            name: "hourly-report".into(),
            tick: now - 60_000_000,
            job: lib.new_job("reports", &json!({"hourly": true})).unwrap(),
            now,
        })
        .await
        .unwrap();
    lib.close().await;
    b.goto("#/cron").await;
    b.wait_text("#cron tr[data-cron=hourly-report]", "every 1h")
        .await;
    b.wait_text("#cron tr[data-cron=hourly-report]", "1m ago")
        .await;
    b.wait_text("#cron tr[data-cron=never-yet]", "never").await;
    b.shot("schedules.png").await;
    let cli = db.ok(&["cron"]);
    assert!(
        cli.contains("hourly-report") && cli.contains("never"),
        "{cli}"
    );

    // Flow control on a queue's page: the limits in force, the jobs waiting for their group's
    // turn, and the group held up by its rate limit (one start an hour), with the job that
    // holds it. The jobs carry their group and trace context to their pages.
    api(
        port,
        "PATCH",
        "/api/v1/queues/ledger",
        ADMIN,
        Some(json!({"global_concurrency": 4, "rate_limit": "10/1s",
                    "group_concurrency": 2, "group_rate_limit": "1/1h"})),
    )
    .await;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let ledger: Vec<i64> = (0..3)
        .map(|i| {
            let payload = format!("{{\"entry\": {i}}}");
            db.ok(&[
                "enqueue",
                "ledger",
                &payload,
                "--group",
                "acct-1",
                "--traceparent",
                traceparent,
            ])
            .trim()
            .parse()
            .unwrap()
        })
        .collect();
    b.goto("#/queues/ledger").await;
    b.wait_text("#flow", "10/1s").await;
    b.wait_text("#flow-waiting", "1 job in 1 group").await;
    b.wait_text("#blocked tr[data-group=acct-1]", &format!("#{}", ledger[1]))
        .await;
    b.wait_text("#blocked tr[data-group=acct-1]", "rate limit")
        .await;
    b.shot("flow.png").await;
    // The waiting job: its group, no past "run at", and it can be cancelled.
    b.goto(&format!("#/jobs/{}", ledger[2])).await;
    b.wait_text("#job-state", "waiting").await;
    b.wait_text("#job-group", "acct-1").await;
    b.wait_text("#job-trace", traceparent).await;
    assert!(b.exists("[data-action=cancel]").await);
    // The job its group's rate limit holds back is scheduled: it can be run now.
    b.goto(&format!("#/jobs/{}", ledger[1])).await;
    b.wait_text("#job-state", "scheduled").await;
    assert!(b.exists("[data-action=run-now]").await);

    // An archived job says so and offers no action; its queue counts it.
    api(
        port,
        "PATCH",
        "/api/v1/queues/vault",
        ADMIN,
        Some(json!({"retention": "archive"})),
    )
    .await;
    let kept = api(
        port,
        "POST",
        "/api/v1/jobs",
        PRODUCE,
        Some(json!({"queue": "vault", "payload": {"invoice": 9}})),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    let claimed = api(
        port,
        "POST",
        "/api/v1/queues/vault/claim",
        PRODUCE,
        Some(json!({"worker": "test-worker"})),
    )
    .await;
    assert_eq!(claimed["jobs"][0]["id"], kept);
    let token = claimed["jobs"][0]["token"].clone();
    api(
        port,
        "POST",
        &format!("/api/v1/jobs/{kept}/complete"),
        PRODUCE,
        Some(json!({"token": token})),
    )
    .await;
    b.goto(&format!("#/jobs/{kept}")).await;
    b.wait_text("#job-archived", "archived").await;
    b.find("#archived-note").await;
    assert!(
        !b.exists("[data-action]:not([data-action=delete])").await,
        "an archived job offers an action other than delete"
    );
    assert!(b.exists("[data-action=delete]").await);
    b.goto("#/queues/vault/completed").await;
    b.wait_text("#archived-count", "1 job archived").await;

    // The overview's charts: what the API and the worker did, per minute.
    b.goto("#/").await;
    for css in [
        "[data-chart=throughput] svg path.s-completed",
        "[data-chart=throughput] svg path.s-enqueued",
        "[data-chart=failures] svg rect.bar.s-failed",
        "[data-chart=failures] svg rect.bar.s-dead",
        "[data-chart=depth] svg .s-available",
    ] {
        b.find(css).await;
    }
    b.wait_text(
        "#queues tr[data-queue=thumbnails] td[data-count=completed]",
        "5",
    )
    .await;
    // Its refreshes read only the newest minutes of the history, not the whole window again,
    // and the charts stay drawn.
    let spying = r#"const real = window.fetch; const seen = { real, history: [] };
        window.__history = seen;
        window.fetch = (path, ...rest) => {
          if (String(path).includes("/api/v1/history")) seen.history.push(String(path));
          return real(path, ...rest);
        };
        return true;"#;
    b.client.execute(spying, vec![]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(7000)).await;
    let asked = b
        .client
        .execute(
            "const s = window.__history; window.fetch = s.real; return s.history;",
            vec![],
        )
        .await
        .unwrap();
    let asked = asked.as_array().unwrap();
    assert!(!asked.is_empty(), "no refresh read the history");
    assert!(
        asked
            .iter()
            .all(|p| p.as_str().unwrap().ends_with("minutes=3")),
        "a refresh read the whole window: {asked:?}"
    );
    b.find("[data-chart=throughput] svg path.s-completed").await;
    b.shot("overview.png").await;

    // The search box: a unique key finds its job, a queue name its queue.
    let keyed = api(
        port,
        "POST",
        "/api/v1/jobs",
        PRODUCE,
        Some(json!({"queue": "billing", "payload": {"order": 42}, "unique_key": "order-42"})),
    )
    .await["id"]
        .as_i64()
        .unwrap();
    b.find("#search-input")
        .await
        .send_keys("order-42\u{E007}")
        .await
        .unwrap();
    b.wait_text("#main[data-page=job] .crumbs", &format!("job {keyed}"))
        .await;
    b.wait_text("#payload", "\"order\": 42").await;
    b.find("#search-input")
        .await
        .send_keys("reports\u{E007}")
        .await
        .unwrap();
    b.wait_text("#main[data-page=queue] h1", "reports").await;

    // A read token sees the same pages without any button that changes something.
    let dead2 = dead_job(port, "reports", json!({"month": 3}), "timeout").await;
    b.logout().await;
    b.login(READ).await;
    assert_eq!(b.text("#who-scope").await.as_deref(), Some("read"));
    b.find("#queues tr[data-queue=reports]").await;
    b.goto("#/queues/reports/dead").await;
    b.find(&format!("#jobs tr[data-job='{dead2}']")).await;
    b.find("aside dl.facts").await;
    for css in [
        "#pause",
        "#resume",
        "#redrive",
        "#settings",
        "button.btn.primary",
    ] {
        assert!(!b.exists(css).await, "a read token sees {css}");
    }
    b.shot("read-only-dead-letters.png").await;
    // The audit log is there for a read token too.
    b.goto("#/audit?action=queue.pause").await;
    b.find("#audit tr[data-audit-action='queue.pause']").await;
    b.goto(&format!("#/jobs/{dead2}")).await;
    b.wait_text("#job-state", "dead").await;
    assert!(
        !b.exists("[data-action]").await,
        "a read token sees job actions"
    );
    // An API error shows in the banner.
    b.goto("#/jobs/999999").await;
    b.banner("job_not_found: no job with id 999999").await;
    // A queue that does not exist is said so, with no action that would create it.
    b.goto("#/queues/no-such").await;
    b.wait_text("#no-such-queue h1", "No such queue").await;
    assert!(
        b.client
            .find(fantoccini::Locator::Css("#pause"))
            .await
            .is_err()
    );
    let list = api(port, "GET", "/api/v1/queues", ADMIN, None).await;
    assert!(!list.to_string().contains("no-such"), "{list}");

    b.client.close().await.unwrap();
    drop(procs);
    let took = started.elapsed();
    eprintln!("dashboard test took {took:?}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
}

/// A page that serves `html` to every request on a free port (the other site of the CSRF test).
async fn serve_page(html: String) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let html = html.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let res = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{html}",
                    html.len()
                );
                let _ = conn.write_all(res.as_bytes()).await;
            });
        }
    });
    port
}

/// `backlog serve` without tokens (every request is admin, on loopback) and a page of another
/// site open in the same browser: the page tries every body-less action by HTML form and by
/// `fetch` in `no-cors` mode, against `localhost` and `127.0.0.1` (another port of localhost
/// is same-site, not same-origin), and then the same actions as a DNS-rebinding page would
/// (same-origin to the browser, naming its own host). Nothing changes in the database, and the
/// audit log stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_site_changes_nothing() {
    let db = TestDb::new(Engine::Sqlite);
    let (port, driver_port) = (free_port(), free_port());
    let mut procs = Procs(vec![]);
    let child = db
        .cmd(&["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("backlog serve starts");
    procs.0.push(("backlog serve", child));
    start_chromedriver(driver_port, &mut procs);
    wait_until("backlog serve listens", || port_open(port)).await;
    wait_until("chromedriver listens", || port_open(driver_port)).await;

    let job: i64 = db.ok(&["enqueue", "mail", "{}"]).trim().parse().unwrap();
    db.ok(&["enqueue", "stopped", "{}"]);
    db.ok(&["queue", "pause", "stopped"]);
    let dead = db.ok(&["enqueue", "dlq", "{}", "--max-attempts", "1"]);
    db.ok(&["work", "dlq", "--drain", "--", "false"]);
    assert!(
        db.ok(&["job", "show", dead.trim(), "--json"])
            .contains("\"dead\"")
    );
    let before = (
        db.ok(&["job", "show", &job.to_string(), "--json"]),
        db.ok(&["queue", "list", "--json"]),
        db.ok(&["job", "show", dead.trim(), "--json"]),
    );
    let paths = [
        "/api/v1/queues/mail/pause".to_owned(),
        "/api/v1/queues/stopped/resume".to_owned(),
        "/api/v1/queues/dlq/redrive".to_owned(),
        format!("/api/v1/jobs/{job}/cancel"),
        format!("/api/v1/jobs/{job}/hold"),
        format!("/api/v1/jobs/{job}/release"),
        format!("/api/v1/jobs/{job}/retry"),
    ];
    let paths_js = serde_json::to_string(&paths).unwrap();
    let html = format!(
        r#"<!doctype html><html><body><script>
const paths = {paths_js};
const bases = ["http://localhost:{port}", "http://127.0.0.1:{port}"];
let pending = 0;
const settle = () => {{ if (--pending === 0) document.title = "done"; }};
for (const base of bases) {{
  for (const path of paths) {{
    const name = "f" + (pending++);
    const frame = document.createElement("iframe");
    frame.name = name;
    frame.onload = settle;
    document.body.appendChild(frame);
    const form = document.createElement("form");
    form.method = "POST";
    form.action = base + path;
    form.target = name;
    document.body.appendChild(form);
    form.submit();
    pending++;
    fetch(base + path, {{ method: "POST", mode: "no-cors" }}).then(settle, settle);
  }}
}}
</script></body></html>"#
    );
    let page = serve_page(html).await;

    let rules = "--host-resolver-rules=MAP rebind.test 127.0.0.1";
    let client = connect_browser_with(driver_port, &[rules]).await;
    client
        .goto(&format!("http://localhost:{page}/"))
        .await
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while client.title().await.unwrap() != "done" {
        assert!(
            Instant::now() < deadline,
            "the page's requests did not all end"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // DNS rebinding: the attacker's name now resolves to the server, so its page's requests
    // are same-origin to the browser, and name the attacker's host.
    client
        .goto(&format!("http://rebind.test:{port}/"))
        .await
        .unwrap();
    let statuses = client
        .execute_async(
            r#"const [paths, done] = arguments;
Promise.all([fetch("/api/v1/stats").then(r => r.status)].concat(
  paths.map(p => fetch(p, { method: "POST" }).then(r => r.status))
)).then(done, e => done(String(e)));"#,
            vec![json!(paths)],
        )
        .await
        .unwrap();
    let expected: Vec<u16> = vec![421; paths.len() + 1];
    assert_eq!(
        statuses,
        json!(expected),
        "rebinding requests were answered"
    );
    client.close().await.ok();

    let after = (
        db.ok(&["job", "show", &job.to_string(), "--json"]),
        db.ok(&["queue", "list", "--json"]),
        db.ok(&["job", "show", dead.trim(), "--json"]),
    );
    assert_eq!(before, after, "a page of another site changed something");
    let audit = api(port, "GET", "/api/v1/audit", "", None).await;
    let served = audit["entries"].as_array().unwrap().iter();
    let served: Vec<_> = served.filter(|e| e["actor"] == "local").collect();
    assert!(served.is_empty(), "{served:?}");
}
