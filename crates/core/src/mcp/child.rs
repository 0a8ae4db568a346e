//! A stdio server as a child process: its stdout read through the raw tap, its stderr kept,
//! and its whole process group stopped on close, so a server started through a wrapper
//! (`npx`, a shell script) leaves nothing behind.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

use crate::mcp::direct::{ChannelWrite, StdinWriter};
use crate::mcp::raw::{RawRequests, TapRead};

/// How long a server gets to exit after its stdin closes, and again after SIGTERM.
const GRACE: Duration = Duration::from_secs(2);

pub struct ChildTransport {
    io: AsyncRwTransport<RoleClient, TapRead<ChildStdout>, ChannelWrite>,
    child: Child,
    /// Also the process group id. Kept because `Child::id` forgets it once the child is reaped,
    /// and the group can outlive its leader.
    pid: Option<u32>,
}

impl ChildTransport {
    /// Starts `command` in a process group of its own, stdio piped. Its stdin is shared with
    /// the gateway's own requests (`raw.direct`).
    pub fn spawn(
        mut command: Command,
        raw: Arc<RawRequests>,
    ) -> std::io::Result<(Self, ChildStderr)> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("the child's stdio was not piped"));
        };
        let (writer, rmcp_side) = StdinWriter::spawn(stdin);
        raw.direct.attach(writer);
        let io = AsyncRwTransport::new_client(TapRead::new(stdout, raw), rmcp_side);
        let pid = child.id();
        Ok((ChildTransport { io, child, pid }, stderr))
    }

    /// The MCP stdio shutdown sequence: close stdin, wait; SIGTERM, wait; SIGKILL. Signals go
    /// to the whole group.
    async fn stop(&mut self) -> std::io::Result<()> {
        // Closing waits for the writer, which a server that stopped reading its stdin holds in
        // a write to the full pipe: bounded, so the signals below (which end that write) come.
        let _ = tokio::time::timeout(GRACE, self.io.close()).await;
        if tokio::time::timeout(GRACE, self.child.wait()).await.is_ok() {
            self.signal_group(Signal::Kill);
            return Ok(());
        }
        self.signal_group(Signal::Term);
        if tokio::time::timeout(GRACE, self.child.wait()).await.is_ok() {
            self.signal_group(Signal::Kill);
            return Ok(());
        }
        self.signal_group(Signal::Kill);
        self.child.kill().await
    }

    fn signal_group(&self, signal: Signal) {
        #[cfg(unix)]
        if let Some(pid) = self.pid {
            let sig = match signal {
                Signal::Term => libc::SIGTERM,
                Signal::Kill => libc::SIGKILL,
            };
            // SAFETY: killpg has no memory effects; the group id is our child's own pid, set
            // by process_group(0) at spawn. A group that is already gone yields ESRCH.
            unsafe {
                libc::killpg(pid as libc::pid_t, sig);
            }
        }
        #[cfg(not(unix))]
        let _ = signal;
    }
}

#[derive(Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        // kill_on_drop reaches only the direct child; its descendants share its group.
        self.signal_group(Signal::Kill);
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.io.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.io.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.stop()
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ClientResult, CustomResult, JsonRpcMessage, RequestId};

    use super::*;

    /// A server that never reads its stdin, while a large message to it is being written: the
    /// write holds the transport, and stopping still ends the server within its grace periods
    /// instead of waiting for a write that never finishes.
    #[tokio::test]
    async fn a_server_that_stops_reading_is_stopped_all_the_same() {
        let mut command = Command::new("sleep");
        command.arg("600");
        let (mut transport, _stderr) = ChildTransport::spawn(command, RawRequests::new()).unwrap();
        let pid = transport.pid.unwrap();
        let big = ClientResult::CustomResult(CustomResult::new(serde_json::json!({
            "filler": "x".repeat(4 * 1024 * 1024)
        })));
        let sending =
            tokio::spawn(transport.send(JsonRpcMessage::response(big, RequestId::Number(1))));
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stopped = tokio::time::timeout(GRACE * 4, transport.close()).await;
        assert!(stopped.is_ok(), "stopping waited for the stuck write");
        let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
        assert!(!alive, "the server still runs");
        sending.abort();
    }
}
