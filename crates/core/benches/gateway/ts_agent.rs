//! The TypeScript SDK agent rows: one agent written with the TypeScript SDK 1.32 client
//! (`tests/peers/ts-bench-agent.mjs`), keeping its connections alive as agent hosts do, one call
//! at a time, through each proxy fronting the same stdio desk, and to that desk directly.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{
    Proc, ROLE_ENV, Run, Sides, TOOL, UPSTREAM_ENV, UpstreamPids, WARMUP_CALLS, free_port,
    mcp_proxy_command, spawn_logged, spawn_role, supergateway_command, wait_for_port,
};

/// What `UPSTREAM_ENV` says when the gateway's upstream is the desk on stdio.
pub const STDIO_UPSTREAM: &str = "stdio";

fn agent_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/ts-bench-agent.mjs")
}

/// Runs the agent against `target` (its arguments), reading the CPU of the sides `sides_of`
/// names (given the agent's pid) around the measured calls only.
fn measure(
    target: &[String],
    desk_role: bool,
    sides_of: impl FnOnce(u32) -> Sides,
    calls: usize,
) -> Result<Run, String> {
    let mut cmd = Command::new("node");
    // The SDK's HTTP client adds an abort listener per call to one signal and Node warns past
    // 1,500, once per call after that: noise in the bench's output, not a failure.
    cmd.arg("--no-warnings")
        .arg(agent_script())
        .args(["--tool", TOOL, "--warmup", &WARMUP_CALLS.to_string()])
        .args(["--calls", &calls.to_string()])
        .args(target)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if desk_role {
        // The desk the agent starts itself inherits its role.
        cmd.env(ROLE_ENV, "desk-stdio");
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start node (run `make deps`): {e}"))?;
    let sides = sides_of(child.id());
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let mut next = || -> Result<serde_json::Value, String> {
        let line = lines
            .next()
            .ok_or("the agent exited")?
            .map_err(|e| e.to_string())?;
        let value: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| format!("agent said {line:?}: {e}"))?;
        match value["step"].as_str() {
            Some("error") => Err(format!("the agent failed: {}", value["message"])),
            _ => Ok(value),
        }
    };
    next()?;
    let (m0, u0) = sides.cpu();
    let start = Instant::now();
    writeln!(stdin, "go").map_err(|e| e.to_string())?;
    let done = next()?;
    let wall = start.elapsed();
    let (m1, u1) = sides.cpu();
    let _ = child.wait();
    let mut samples: Vec<u64> = done["ns"]
        .as_array()
        .ok_or("no samples")?
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    samples.sort_unstable();
    Ok(Run {
        samples,
        wall,
        middle_cpu_ms: m0.zip(m1).map(|(a, b)| b - a),
        upstream_cpu_ms: u1 - u0,
    })
}

async fn blocking(f: impl FnOnce() -> Result<Run, String> + Send + 'static) -> Result<Run, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())?
}

/// The agent starts the desk itself, over stdio: the floor for the rows through a proxy.
pub async fn direct(calls: usize) -> Result<Run, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let target = vec!["--".to_owned(), exe.display().to_string()];
    blocking(move || {
        measure(
            &target,
            true,
            |agent| Sides {
                middle: None,
                upstream: UpstreamPids::ChildrenOf(agent),
            },
            calls,
        )
    })
    .await
}

/// Through a middle process `pid` (a proxy or the gateway) whose children are the desk.
async fn via(target: Vec<String>, pid: u32, calls: usize) -> Result<Run, String> {
    blocking(move || {
        measure(
            &target,
            false,
            |_| Sides {
                middle: Some(pid),
                upstream: UpstreamPids::ChildrenOf(pid),
            },
            calls,
        )
    })
    .await
}

pub async fn countersign(calls: usize) -> Result<Run, String> {
    let (gateway, line) = spawn_role("gateway", &[(UPSTREAM_ENV, STDIO_UPSTREAM)])?;
    let mut words = line.split(' ');
    let (Some(url), Some(token)) = (words.next(), words.next()) else {
        return Err(format!("gateway said {line:?}"));
    };
    let target = vec![
        "--url".to_owned(),
        url.to_owned(),
        "--token".to_owned(),
        token.to_owned(),
    ];
    let run = via(target, gateway.pid(), calls).await;
    drop(gateway);
    run
}

/// A proxy listening on `port` at `path`, fronting the stdio desk.
async fn through(mut proxy: Proc, port: u16, path: &str, calls: usize) -> Result<Run, String> {
    wait_for_port(&mut proxy, port).await?;
    let target = vec!["--url".to_owned(), format!("http://127.0.0.1:{port}{path}")];
    via(target, proxy.pid(), calls)
        .await
        .map_err(|e| format!("{e}\n    {}", proxy.log_tail()))
}

pub async fn mcp_proxy(calls: usize, program: &Path, dir: &Path) -> Result<Run, String> {
    let port = free_port();
    let proxy = spawn_logged("mcp-proxy-ts", mcp_proxy_command(program, port)?, dir)?;
    through(proxy, port, "/mcp", calls).await
}

pub async fn supergateway(calls: usize, program: &Path, dir: &Path) -> Result<Run, String> {
    let port = free_port();
    let proxy = spawn_logged("supergateway-ts", supergateway_command(program, port)?, dir)?;
    through(proxy, port, "/mcp", calls).await
}
