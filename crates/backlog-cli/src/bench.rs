//! `backlog bench`: runs the benchmark, a binary of its own (`backlog-bench`, crate
//! `crates/backlog-bench`) so that the shipped `backlog` carries neither its code nor its HTTP
//! client. It is looked for next to this binary (a workspace build puts both in
//! `target/release/`), then on PATH, and replaces this process, so that signals and the exit
//! code are its own.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::ExitCode;

/// The benchmark's binary.
pub const BINARY: &str = "backlog-bench";

/// Runs `backlog-bench ARGS` on `url` (given as `BACKLOG_DATABASE_URL`, so that a
/// `--database-url` among the arguments still wins); returns only if it cannot start.
pub fn run(url: &str, args: &[OsString]) -> anyhow::Result<ExitCode> {
    let Some(bin) = find() else {
        anyhow::bail!(
            "`backlog bench` runs the `{BINARY}` binary, found neither next to this one nor on \
             PATH: build it with `cargo build --release -p backlog-bench` (a build of the whole \
             workspace makes both) or install it with `cargo install --path crates/backlog-bench`"
        );
    };
    let err = std::process::Command::new(&bin)
        .args(args)
        .env("BACKLOG_DATABASE_URL", url)
        .exec();
    Err(anyhow::anyhow!("could not run {}: {err}", bin.display()))
}

/// `backlog-bench` next to the running binary, else the first on PATH.
fn find() -> Option<PathBuf> {
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(BINARY)));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(BINARY));
    sibling.into_iter().chain(on_path).find(|p| p.is_file())
}
