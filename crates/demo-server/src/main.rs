//! `countersign-demo-server`: the ticket desk as a program.
//!
//! stdio by default (stdout carries the protocol, so logs go to stderr);
//! `--http ADDR` serves Streamable HTTP at `/mcp` and prints
//! `listening on http://ADDR/mcp` to stderr once bound, so callers can bind
//! port 0 and read the real port.

use std::{net::SocketAddr, process::ExitCode};

use countersign_demo_server::{TicketDesk, TicketStore, serve_http_with, serve_stdio};

const USAGE: &str = "usage: countersign-demo-server [--http 127.0.0.1:PORT]\n\
    \n\
    Without options, serves MCP over stdio. With --http, serves Streamable HTTP at /mcp.\n\
    Logs go to stderr; set RUST_LOG to change the level (default info).";

enum Mode {
    Stdio,
    Http(SocketAddr),
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Mode, String> {
    let mut mode = Mode::Stdio;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => {
                let value = args
                    .next()
                    .ok_or("--http needs an address, e.g. 127.0.0.1:0")?;
                let addr = value
                    .parse()
                    .map_err(|e| format!("--http {value}: not a socket address ({e})"))?;
                mode = Mode::Http(addr);
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(mode)
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();

    let mode = match parse_args(std::env::args().skip(1)) {
        Ok(mode) => mode,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("countersign-demo-server: {message}");
            }
            eprintln!("{USAGE}");
            return if message.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };

    let store = TicketStore::seeded();
    match mode {
        Mode::Stdio => match serve_stdio(TicketDesk::new(store).with_crash_enabled(true)).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("countersign-demo-server: {error}");
                ExitCode::FAILURE
            }
        },
        Mode::Http(addr) => {
            let server = match serve_http_with(addr, move || {
                TicketDesk::new(store.clone()).with_crash_enabled(true)
            })
            .await
            {
                Ok(server) => server,
                Err(error) => {
                    eprintln!("countersign-demo-server: cannot listen on {addr}: {error}");
                    return ExitCode::FAILURE;
                }
            };
            eprintln!("listening on {}", server.url());
            let result = tokio::select! {
                result = server.wait() => result,
                _ = tokio::signal::ctrl_c() => Ok(()),
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("countersign-demo-server: {error}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
