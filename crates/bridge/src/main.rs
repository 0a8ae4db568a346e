//! `countersign-bridge <server>`: MCP over stdio for agents that can only launch a command
//! (Claude Desktop and the like), relayed to the running Countersign app's gateway.
//!
//! The agent writes newline-delimited JSON-RPC on stdin; the bridge posts every message,
//! unchanged, to the gateway's Streamable HTTP endpoint for `<server>` and writes back what comes
//! from it, a line per message. It is only a transport: the gateway does the asking, the policy
//! and the upstream session. When the app is not running the bridge says so on stderr and in the
//! answer to the agent's first request, and exits, rather than leaving the agent waiting.

mod discovery;
mod headers;
mod owner;
mod relay;

use std::{process::ExitCode, time::Duration};

use tokio::io::BufReader;

/// How long the bridge waits for the agent's first request when it can only refuse it.
const FIRST_REQUEST_WAIT: Duration = Duration::from_secs(5);

const USAGE: &str = "\
usage: countersign-bridge <server>

Speaks MCP on stdin/stdout and relays it to the running Countersign app, which asks you
before the server acts. <server> is a server's name in Countersign.

Agent config (for example Claude Desktop's claude_desktop_config.json):
  \"mcpServers\": {\"demo\": {\"command\": \"countersign-bridge\", \"args\": [\"demo\"],
                            \"env\": {\"COUNTERSIGN_TOKEN\": \"<the agent's token>\"}}}

Environment:
  COUNTERSIGN_TOKEN               the agent's own token (from Countersign's Connect agents page)
  COUNTERSIGN_GATEWAY_URL         the gateway's base URL (default: from the app's gateway.json)
  COUNTERSIGN_GATEWAY_TOKEN_FILE  without COUNTERSIGN_TOKEN, the shared token's file (default:
                                  the app's gateway-token)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server = match args.as_slice() {
        [flag] if flag == "--version" || flag == "-V" => {
            println!("countersign-bridge {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        [server] if !server.starts_with('-') && !server.is_empty() => server.clone(),
        _ => {
            eprint!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Started by Countersign as one of its servers (or by a program such a server started):
    // this would reach Countersign through Countersign, each session opening another.
    if let Some(by) = std::env::var_os(countersign_core::mcp::STARTED_AS_SERVER_ENV) {
        relay::log(format_args!(
            "refused: Countersign started this bridge as its server {:?} (or a program that \
             server started), so it would reach Countersign through itself; remove that server \
             from Countersign's config",
            by.to_string_lossy()
        ));
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            relay::log(format_args!("cannot start: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(bridge(&server));
    // Reading stdin blocks a thread that cannot be interrupted; waiting for it could hang.
    runtime.shutdown_background();
    code
}

async fn bridge(server: &str) -> ExitCode {
    let (out, writer) = relay::spawn_writer();
    let stdin = BufReader::new(tokio::io::stdin());
    let code = match discovery::locate().await {
        Ok(gateway) => match relay::Relay::new(gateway, server, out.clone()) {
            Ok(relay) => match relay.run(stdin).await {
                relay::Ended::Normally => ExitCode::SUCCESS,
                relay::Ended::Refused => ExitCode::FAILURE,
            },
            Err(why) => refuse(stdin, &out, &why).await,
        },
        Err(why) => refuse(stdin, &out, &why.0).await,
    };
    drop(out);
    // Every line already handed to the writer goes out before exit; tasks that still hold a
    // sender (only after a drain timeout) are not waited for.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    code
}

/// No gateway: say why on stderr at once, then in the answer to the agent's first request.
async fn refuse(
    stdin: BufReader<tokio::io::Stdin>,
    out: &tokio::sync::mpsc::Sender<String>,
    why: &str,
) -> ExitCode {
    relay::log(why);
    relay::refuse_first_request(stdin, out, why, FIRST_REQUEST_WAIT).await;
    ExitCode::FAILURE
}
