//! Runs in a row, without a retry: the check behind the e2e harness's "a run is never made
//! twice" (`App::run_until`). Not in the test command (minutes): `make e2e-runs` (RUNS=N, 200
//! by default) runs it. Three kinds of run, RUNS each:
//! - a tool that answers at once (`list_tickets`): the result is shown;
//! - a tool that asks (`delete_ticket`): the dialog is shown and declined;
//! - a question the server withdraws after 300 ms (`slow_question`): the page itself records
//!   the dialog opening and closing, which WebDriver's polling can miss.
//!
//! Every run must reach the app once (its log), and every dialog must be seen.

use std::time::Instant;

use countersign_e2e::*;
use serde_json::{Value, json};

const OBSERVER: &str = r#"
    if (!window.__dialogChanges) {
      window.__dialogChanges = [];
      new MutationObserver((changes) => {
        for (const m of changes) {
          if (m.target.tagName === 'DIALOG') window.__dialogChanges.push(m.oldValue === null ? 'shown' : 'gone');
        }
      }).observe(document.body, {subtree: true, attributes: true, attributeFilter: ['open'], attributeOldValue: true});
    }
"#;

fn runs() -> usize {
    std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn received(app: &App) -> usize {
    app.log().matches("running a tool for the person").count()
}

#[tokio::test]
async fn e2e_runs_in_a_row_each_reach_the_app_once() {
    let n = runs();
    let app = App::start(
        "runs",
        json!({"demo": {"command": demo_server(), "protocol": "legacy"}}),
    )
    .await;
    app.find("#app[data-ready]").await;
    let started = Instant::now();

    for _ in 0..n {
        app.run_until_result("list_tickets", "{}", "tickets").await;
    }
    assert_eq!(received(&app), n, "each result run reached the app once");
    let results = started.elapsed();

    for _ in 0..n {
        app.run_until_dialog("delete_ticket", r#"{"id": "t4"}"#)
            .await;
        app.press_in_dialog("Decline").await;
        app.gone(DIALOG).await;
    }
    assert_eq!(
        received(&app),
        2 * n,
        "each asking run reached the app once"
    );
    let dialogs = started.elapsed() - results;

    app.client.execute(OBSERVER, vec![]).await.unwrap();
    for _ in 0..n {
        app.run_until_result("slow_question", r#"{"timeout_ms": 300}"#, "Timed out")
            .await;
        app.gone(DIALOG).await;
    }
    assert_eq!(
        received(&app),
        3 * n,
        "each withdrawn run reached the app once"
    );
    let changes: Vec<Value> = serde_json::from_value(
        app.client
            .execute("return window.__dialogChanges", vec![])
            .await
            .unwrap(),
    )
    .unwrap();
    let shown = changes.iter().filter(|c| *c == "shown").count();
    let gone = changes.iter().filter(|c| *c == "gone").count();
    assert_eq!(
        (shown, gone),
        (n, n),
        "each short-lived dialog was shown and withdrawn"
    );
    println!(
        "e2e runs in a row, none made twice: {n} results in {:.1} s, {n} dialogs answered in {:.1} s, {n} dialogs withdrawn after 300 ms in {:.1} s",
        results.as_secs_f64(),
        dialogs.as_secs_f64(),
        (started.elapsed() - results - dialogs).as_secs_f64()
    );
    app.close().await;
}
