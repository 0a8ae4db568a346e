//! The person's own runs: the server's progress notifications for a call reach the caller
//! (and only that call's), as the server sent them.

use countersign_core::ServerConfig;
use countersign_core::config::ProtocolChoice;
use tokio_util::sync::CancellationToken;

mod common;
use common::{Harness, with_test_timeouts};

#[tokio::test(flavor = "multi_thread")]
async fn a_calls_progress_reaches_its_caller() {
    let h = Harness::new("runner-progress");
    let script = common::peer_path("raw-server.mjs");
    let mut config = with_test_timeouts(ServerConfig::stdio(
        "raw",
        common::node(),
        &[script.as_str()],
    ));
    config.protocol = ProtocolChoice::Legacy;
    h.start(config).await;
    let (sink, mut progress) = tokio::sync::mpsc::unbounded_channel();
    let result = h
        .sessions
        .call_tool_with_progress("raw", "chatty", None, CancellationToken::new(), Some(sink))
        .await
        .expect("chatty answers");
    assert_ne!(result.is_error, Some(true));
    let first = progress
        .try_recv()
        .expect("its progress arrived before its result");
    assert_eq!((first.progress, first.total), (1.0, Some(2.0)));
    assert_eq!(first.message.as_deref(), Some("half way"));
    // A call without a sink gets none, and nothing is left routed to this one.
    h.sessions
        .call_tool("raw", "chatty", None, CancellationToken::new())
        .await
        .unwrap();
    assert!(progress.try_recv().is_err());
    h.shutdown().await;
}
