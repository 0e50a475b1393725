//! `serve` and `token …`.

use std::process::ExitCode;
use std::sync::Arc;

use backlog::{CancellationToken, Client};
use backlog_server::{Scope, ServerConfig, Tokens};

use crate::cli::{ServeArgs, TokenCommand};

/// The tokens `serve` takes: from `--tokens FILE` and `BACKLOG_API_TOKENS`, together.
pub fn tokens(a: &ServeArgs) -> anyhow::Result<Tokens> {
    let mut text = String::new();
    if let Some(path) = &a.tokens {
        text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read the tokens file {}: {e}", path.display()))?;
    }
    if let Some(inline) = &a.tokens_env {
        text.push('\n');
        text.push_str(inline);
    }
    Ok(Tokens::parse(&text)?)
}

/// Checks `serve` arguments before connecting.
pub fn check(a: &ServeArgs) -> anyhow::Result<ServerConfig> {
    let mut config = ServerConfig::new(a.listen);
    config.tokens = tokens(a)?;
    config.body_limit = a.body_limit as usize;
    config.allowed_hosts = a.allow_hosts.clone();
    if config.tokens.is_empty() && !a.listen.ip().is_loopback() {
        return Err(backlog_server::ServeError::OpenOnNetwork(a.listen).into());
    }
    Ok(config)
}

/// `serve`: until SIGINT or SIGTERM, then requests in flight finish.
pub async fn run(client: Client, config: ServerConfig) -> anyhow::Result<ExitCode> {
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        stop.cancel();
    });
    eprintln!(
        "backlog: serving http://{} ({})",
        config.listen,
        if config.tokens.is_empty() {
            "no tokens: loopback only, every request is admin"
        } else {
            "bearer tokens required"
        }
    );
    let client = Arc::new(client);
    backlog_server::serve(client.clone(), config, shutdown).await?;
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

/// `token …` (no database needed).
pub fn token(cmd: TokenCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        TokenCommand::New { name, scope } => {
            let scope: Scope = scope.parse()?;
            let secret = backlog_server::auth::new_secret();
            let line = format!(
                "{name} {scope} {}",
                backlog_server::auth::hash_secret(&secret)
            );
            // The line must read back as a token list before it is shown.
            Tokens::parse(&line)?;
            eprintln!("Add the first line to the tokens file of `backlog serve --tokens FILE`;");
            eprintln!("give the second (the secret) to the client. It is not shown again.");
            println!("{line}");
            println!("{secret}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
