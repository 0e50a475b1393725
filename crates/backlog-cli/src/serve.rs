//! `serve` and `token …`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use backlog::{CancellationToken, Client};
use backlog_server::{Scope, ServerConfig, Tokens};

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on: `IP:PORT`, or `localhost:PORT`. Without tokens only loopback is
    /// allowed.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = parse_listen)]
    pub listen: std::net::SocketAddr,
    /// A host name to answer besides those the listen address stands for (`localhost` on
    /// loopback): the name a reverse proxy forwards. Repeat for several. Requests naming any
    /// other host are refused (421), which keeps DNS-rebinding pages out.
    #[arg(long = "allow-host", value_name = "NAME", value_parser = parse_host_name)]
    pub allow_hosts: Vec<String>,
    /// A file of tokens, one per line: `NAME SCOPE SECRET` (SECRET may be `sha256:HEX`; see
    /// `backlog token new`). SCOPE is read, produce or admin.
    #[arg(long)]
    pub tokens: Option<PathBuf>,
    /// Tokens in the same form, separated by commas or newlines (added to --tokens).
    #[arg(
        long = "tokens-inline",
        env = "BACKLOG_API_TOKENS",
        hide_env_values = true
    )]
    pub tokens_env: Option<String>,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 32 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..=1024 * 1024 * 1024))]
    pub body_limit: u64,
}

/// `IP:PORT`, or `localhost:PORT` (IPv4 loopback). Other names are refused: the address a
/// name resolves to can change under a running server.
fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    match text.rsplit_once(':') {
        Some((host, port)) if host.eq_ignore_ascii_case("localhost") => port
            .parse::<u16>()
            .map(|port| std::net::SocketAddr::from(([127, 0, 0, 1], port)))
            .map_err(|_| format!("{port:?} is not a port number (0 to 65535)")),
        _ => Err(format!(
            "{text:?} is not an address to listen on: give IP:PORT (127.0.0.1:8080, \
             [::1]:8080, 0.0.0.0:8080) or localhost:PORT"
        )),
    }
}

/// A DNS name or address literal, without a port.
fn parse_host_name(text: &str) -> Result<String, String> {
    let name = text.trim().trim_end_matches('.');
    let literal = name.starts_with('[') && name.ends_with(']');
    let plain = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if literal || plain {
        Ok(name.to_ascii_lowercase())
    } else {
        Err(format!(
            "{text:?} is not a host name: give a DNS name (queue.example.com) or an address, \
             without a scheme or port"
        ))
    }
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Makes a token: prints the line for the tokens file (holding only the secret's SHA-256)
    /// and the secret to give the client.
    New {
        /// The token's name, recorded as who did what.
        name: String,
        /// read, produce or admin.
        #[arg(long)]
        scope: String,
    },
}

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
    // Bound first, so that "serving" is said only once the address is taken.
    let listener = backlog_server::bind(&config).await?;
    eprintln!(
        "backlog: serving http://{} ({})",
        listener.local_addr().unwrap_or(config.listen),
        if config.tokens.is_empty() {
            "no tokens: loopback only, every request is admin"
        } else {
            "bearer tokens required"
        }
    );
    let client = Arc::new(client);
    backlog_server::serve_on(listener, client.clone(), config, shutdown).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_and_host_names_parse_or_say_why() {
        assert_eq!(
            parse_listen("localhost:8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(parse_listen("[::1]:0").unwrap(), "[::1]:0".parse().unwrap());
        assert!(parse_listen("localhost").is_err());
        assert!(parse_listen("localhost:http").unwrap_err().contains("port"));
        assert_eq!(parse_host_name("Proxy.Example.").unwrap(), "proxy.example");
        assert_eq!(parse_host_name("[::1]").unwrap(), "[::1]");
        for bad in ["", "a..b", "http://x", "x:80", "a b", "x/y"] {
            assert!(parse_host_name(bad).is_err(), "{bad:?}");
        }
    }
}
