//! The real app killed with SIGKILL at each step of an answer (the fault matrix's first rows):
//! before the outcome is recorded, after it is recorded, after the transport took the answer,
//! and after that is recorded too. Afterwards the audit log and what the server received
//! agree, History says what happened, and nothing is answered twice once the app is back.
//!
//! The kill comes from inside, at the exact step: debug builds honour `COUNTERSIGN_KILL_AT`
//! (`crates/core/src/ask/kill_point.rs`). The server is `tests/peers/fault-server.mjs`, which
//! writes every answer it receives to its log; it outlives the app (its own process group)
//! until it reads the end of its stdin.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use countersign_e2e::*;
use serde_json::{Value, json};

const KILL_AT: &str = "COUNTERSIGN_KILL_AT";

/// The audit log's records, in order.
fn records(app: &App) -> Vec<Value> {
    std::fs::read_to_string(app.audit_log())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The answers the server received, in order (from every one of its runs).
fn answers(server_log: &Path) -> Vec<String> {
    std::fs::read_to_string(server_log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("answer "))
        .map(str::to_owned)
        .collect()
}

/// Waits until no process of the server started with `server_log` in its arguments is left:
/// it has read all that reached its stdin, and logged it.
async fn server_gone(server_log: &Path) {
    let deadline = Instant::now() + WAIT;
    while Command::new("pgrep")
        .args(["-f", &server_log.display().to_string()])
        .output()
        .is_ok_and(|o| !o.stdout.is_empty())
    {
        assert!(Instant::now() < deadline, "the server outlived its stdin");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What History's newest row says in its Outcome column.
async fn newest_history_row(app: &App) -> String {
    app.find("#tab-history").await.click().await.unwrap();
    let mut text = String::new();
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        text = app
            .find(".history-table tbody tr td:nth-child(4)")
            .await
            .text()
            .await
            .unwrap_or_default();
        if !text.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    text.replace('\n', " ").trim().to_owned()
}

struct Expect {
    /// The outcome recorded, if any.
    resolved: bool,
    /// The delivery recorded.
    delivered: bool,
    /// The server received the answer.
    received: bool,
    /// Words History's row must hold.
    history: &'static str,
}

async fn killed_at(step: &str, expect: Expect) -> bool {
    let scratch = std::env::temp_dir().join(format!("cs-e2e-kill-{step}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let server_log: PathBuf = scratch.join("server.log");
    let script = repo().join("tests/peers/fault-server.mjs");
    // The log's path is also an argument, so the test can find the server's process.
    let servers = json!({"faulty": {
        "command": "node",
        "args": [script, server_log],
        "env": {"FAULT_SERVER_LOG": server_log},
        "protocol": "legacy",
    }});
    let app = App::start_with_env(
        &format!("kill-{step}"),
        servers,
        &[(KILL_AT, Path::new(step))],
    )
    .await;
    app.run_until_dialog("fault", r#"{"kind": "none"}"#).await;
    // Submit, and the app dies at `step` (the click may not get its reply).
    let _ = app.armed_button("Submit").await.click().await;
    app.wait_gone().await;
    // Before the restart starts it again.
    server_gone(&server_log).await;
    let app = app.restart_after_crash(KILL_AT).await;
    assert!(
        app.log().contains(&format!("killed at {step}")),
        "{step}: the app did not die at its kill point:\n{}",
        app.log()
    );

    let log = records(&app);
    let asked = log.iter().filter(|r| r["event"] == "asked").count();
    let resolved: Vec<&Value> = log.iter().filter(|r| r["event"] == "resolved").collect();
    let delivered = log.iter().filter(|r| r["event"] == "delivered").count();
    let received = answers(&server_log);
    let history = newest_history_row(&app).await;

    // Back up: the new session is ready, nothing is asked again, and the server hears no
    // second answer.
    app.find("#tab-servers").await.click().await.unwrap();
    app.find_xpath("//nav[@aria-label='Servers']//button[starts-with(normalize-space(.), 'faulty')]//span[contains(@class, 'state-ready')]")
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let asked_again = app.exists(DIALOG).await;
    let received_after = answers(&server_log);

    let pass = asked == 1
        && (resolved.len() == 1) == expect.resolved
        && resolved.iter().all(|r| r["outcome"] == "accepted")
        && (delivered == 1) == expect.delivered
        && received == if expect.received { vec!["answer accept".to_owned()] } else { vec![] }
        && received_after == received
        && !asked_again
        && history.contains(expect.history)
        // Doubt only where the log lacks the delivery.
        && history.contains("Not on record as sent") == (expect.resolved && !expect.delivered);
    fault_row(
        &format!(
            "the app killed (SIGKILL) {}",
            match step {
                "before-record" => "as the person submits, before the outcome is recorded",
                "after-record" => "after recording the outcome, before sending it",
                "after-send" => "after sending the answer, before recording its delivery",
                _ => "after recording the delivery",
            }
        ),
        &format!("after the restart, History: “{}”", history.trim()),
        &if received.is_empty() {
            "no answer (its stdin closed)".to_owned()
        } else {
            format!(
                "{} ({} after the restart)",
                received.join(", "),
                received_after.len() - received.len()
            )
        },
        &format!(
            "the question{}{}",
            if resolved.is_empty() {
                ", NO outcome".to_owned()
            } else {
                format!(", then {}", resolved[0]["outcome"].as_str().unwrap_or("?"))
            },
            if delivered == 1 {
                ", then delivered"
            } else {
                ""
            },
        ),
        pass,
    );
    app.close().await;
    let _ = std::fs::remove_dir_all(&scratch);
    pass
}

#[tokio::test]
async fn e2e_the_app_killed_at_each_step_of_an_answer_leaves_the_log_and_the_server_agreeing() {
    let mut failed = Vec::new();
    let steps = [
        (
            "before-record",
            Expect {
                resolved: false,
                delivered: false,
                received: false,
                history: "No answer: Countersign stopped before recording one, so none was sent",
            },
        ),
        (
            "after-record",
            Expect {
                resolved: true,
                delivered: false,
                received: false,
                history: "Not on record as sent",
            },
        ),
        // The answer is in the server's stdin, its delivery not on record: History stays
        // cautious ("may not have"), which is still true.
        (
            "after-send",
            Expect {
                resolved: true,
                delivered: false,
                received: true,
                history: "The server may not have received it",
            },
        ),
        (
            "after-delivered",
            Expect {
                resolved: true,
                delivered: true,
                received: true,
                history: "Accepted",
            },
        ),
    ];
    for (step, expect) in steps {
        if !killed_at(step, expect).await {
            failed.push(step);
        }
    }
    assert!(failed.is_empty(), "failed: {failed:?} (rows above)");
}

/// A small tmpfs for the app's data (we run as root in CI), unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: PathBuf) -> SmallDisk {
        std::fs::create_dir_all(&at).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs"])
            .arg(&at)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            mounted,
            "cannot mount a tmpfs at {} (needs root)",
            at.display()
        );
        SmallDisk(at)
    }

    /// Writes until the file system is full.
    fn fill(&self) {
        use std::io::Write;
        let mut filler = std::fs::File::create(self.0.join("filler")).unwrap();
        let block = [0u8; 4096];
        while filler.write_all(&block).is_ok() {}
        while filler.write_all(&block[..1]).is_ok() {}
        let _ = filler.sync_all();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The disk fills while a question is open: the person's Submit cannot be recorded, so the
/// server gets `cancel`, the person is told why, and the app carries on.
#[tokio::test]
async fn e2e_a_full_disk_turns_the_persons_submit_into_a_no() {
    let scratch = std::env::temp_dir().join(format!("cs-e2e-small-disk-{}", std::process::id()));
    let _ = Command::new("umount").arg(scratch.join("data")).status();
    let _ = std::fs::remove_dir_all(&scratch);
    let disk = SmallDisk::mount(scratch.join("data"));
    let server_log = scratch.join("server.log");
    let script = repo().join("tests/peers/fault-server.mjs");
    let servers = json!({"faulty": {
        "command": "node",
        "args": [script],
        "env": {"FAULT_SERVER_LOG": server_log},
        "protocol": "legacy",
    }});
    let app = App::start_with_env("disk-full", servers, &[("XDG_DATA_HOME", &disk.0)]).await;
    app.run_until_dialog("fault", r#"{"kind": "note"}"#).await;
    let audit = disk.0.join("countersign/audit.jsonl");
    let asked = std::fs::read_to_string(&audit).unwrap_or_default();
    disk.fill();
    // Longer than a page: a full tmpfs still takes what fits in the slack of a file's last
    // page, and the outcome's line carries the answer. Typing 5,000 keys takes WebKitWebDriver
    // 14 s, so the text is pasted in by script and the last key typed.
    let field = app.find("dialog[open] input").await;
    app.client
        .execute(
            "arguments[0].value = 'a'.repeat(5000);",
            vec![serde_json::to_value(&field).unwrap()],
        )
        .await
        .unwrap();
    field.send_keys("a").await.unwrap();
    app.press_in_dialog("Submit").await;
    eventually("the server gets an answer", async || {
        !answers(&server_log).is_empty()
    })
    .await;
    app.gone(DIALOG).await;
    let told = app
        .find_xpath("//*[@role='status'][contains(., 'audit log')]")
        .await
        .text()
        .await
        .unwrap_or_default();
    let received = answers(&server_log);
    let after = std::fs::read_to_string(&audit).unwrap_or_default();
    // The app is still there and answers the next question (space freed).
    std::fs::remove_file(disk.0.join("filler")).unwrap();
    app.run_until_dialog("fault", r#"{"kind": "none"}"#).await;
    app.press_in_dialog("Decline").await;
    eventually("the next answer", async || answers(&server_log).len() == 2).await;
    let next = answers(&server_log);
    // The outcome's line did not fit; the shorter line of the no that went out may have.
    let outcome = if after.contains("\"accepted\"") {
        "ACCEPTED"
    } else if after.contains("\"auditFailed\"") {
        "then cancelled (audit failed), the shorter line fitting"
    } else {
        "no outcome: nothing more could be written"
    };
    let pass = received == ["answer cancel"]
        && asked.contains("\"asked\"")
        && outcome != "ACCEPTED"
        && told.contains("could not write its audit log")
        && next[1] == "answer decline";
    fault_row(
        "the disk full when the person submits",
        &format!("the dialog closes; “{}”", told.trim()),
        &format!(
            "{} (the next question, with space again: {})",
            received.join(", "),
            next[1]
        ),
        &format!("the question; {outcome}"),
        pass,
    );
    app.close().await;
    drop(disk);
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        pass,
        "received {received:?}, told {told:?}, log after: {after}"
    );
}

/// The person allows an agent's call through the gateway and the app is killed (SIGKILL) after
/// recording the allow, before forwarding the call: the server never sees the call, the agent
/// gets an error, and after the restart History says the allowed call may not have run.
#[tokio::test]
async fn e2e_the_app_killed_between_an_allow_and_the_forwarded_call() {
    let scratch = std::env::temp_dir().join(format!("cs-e2e-kill-gate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let server_log = scratch.join("server.log");
    let script = repo().join("tests/peers/fault-server.mjs");
    let (app, port) = App::start_with_gateway(
        "kill-gate",
        json!({
            "mcpServers": {"faulty": {
                "command": "node",
                "args": [script, server_log],
                "env": {"FAULT_SERVER_LOG": server_log},
                "protocol": "legacy",
            }},
        }),
        &[(KILL_AT, Path::new("after-record"))],
    )
    .await;
    let token_file = app.dir.join("data/countersign/gateway-token");
    eventually("the gateway listens with its token", async || {
        app.log().contains("gateway listening")
            && std::fs::read_to_string(&token_file).is_ok_and(|t| !t.trim().is_empty())
    })
    .await;
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    let agent = tokio::process::Command::new("node")
        .arg(repo().join("tests/peers/ts-agent.mjs"))
        .args(["--url", &format!("http://127.0.0.1:{port}/mcp/faulty")])
        .args([
            "--token",
            &token,
            "--call",
            "fault",
            "--args",
            r#"{"kind":"none"}"#,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    app.find(&format!("{DIALOG} .call-summary")).await;
    let _ = app.armed_button("Allow once").await.click().await;
    app.wait_gone().await;
    server_gone(&server_log).await;
    // The SDK retries its broken stream for a while: what it has said by now is its answer.
    let mut agent = agent;
    let _ = agent.start_kill();
    let agent_out = agent.wait_with_output().await.unwrap();
    let agent_said = String::from_utf8_lossy(&agent_out.stdout).into_owned();
    let server_saw = std::fs::read_to_string(&server_log).unwrap_or_default();
    let app = app.restart_after_crash(KILL_AT).await;
    let history = newest_history_row(&app).await;
    let log = records(&app);
    let allowed = log
        .iter()
        .any(|r| r["event"] == "resolved" && r["outcome"] == "accepted");
    let delivered = log.iter().any(|r| r["event"] == "delivered");
    let call_reached = server_saw.lines().any(|l| l.starts_with("fault "));
    let agent_got_a_result = agent_said.contains("\"step\":\"call\"");
    let pass = allowed
        && !delivered
        && !call_reached
        && !agent_got_a_result
        && history.contains("Not on record as carried out");
    fault_row(
        "the app killed (SIGKILL) after recording the person's allow, before forwarding the agent's call",
        &format!("after the restart, History: “{history}”"),
        &format!(
            "the server: {}; the agent: {}",
            if call_reached { "THE CALL" } else { "no call" },
            if agent_got_a_result {
                "A RESULT"
            } else {
                "no result (its connection is gone)"
            }
        ),
        "the approval, then allowed; no delivery",
        pass,
    );
    app.close().await;
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(
        pass,
        "server saw {server_saw:?}; agent said {agent_said}; log {log:?}"
    );
}
