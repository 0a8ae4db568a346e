//! Requests the gateway writes on a stdio server's wire itself, beside rmcp's client session,
//! and their answers, taken off the wire before rmcp would parse them. The same for a
//! Streamable HTTP server is in `http`: posted in rmcp's session, answered off the response.
//!
//! Through rmcp's session a forwarded request is handed to its worker task and back, and its
//! answer is parsed whole into rmcp's types (an untagged `JsonRpcMessage`: buffered, then tried
//! variant by variant), only for the gateway to pass on the server's own bytes. Here the
//! request is written as one line among rmcp's (`StdinWriter`), and the answer's line is
//! handed over as it came, in its place in the stream (`raw::TapRead`): whatever the server
//! wrote before it (progress for the call) has reached rmcp, and through it the agent, first.
//!
//! Our ids are strings with [`PREFIX`]; rmcp numbers its own, so the two never meet. The
//! server's progress is taken off the wire too (`Direct::take_progress`), so it reaches the
//! agent as the server wrote it but for the token, not read into rmcp's model and written
//! again (which turned `1` into `1.0` and dropped what the model lacks).
//!
//! From 2026-07-28 on, rmcp's session refuses a server's question (elicitation, sampling,
//! roots) unless it holds a request of its own in flight for the question to belong to
//! (SEP-2260), and over stdio nothing on the wire says which request that is. While requests
//! of ours are in flight, such a question is ours: taken off the wire here in its place
//! (`Direct::question`) and answered by whoever took the session's questions
//! (`Direct::take_questions`), on the same stdin.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};

use rmcp::model::{
    JsonRpcMessage, JsonRpcRequest, NumberOrString, RequestId, ServerJsonRpcMessage, ServerRequest,
    ServerResult,
};
use serde_json::value::RawValue;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use crate::lock;

mod http;
pub(crate) use http::{HttpWay, PostedWith, SignIn};

/// How our request ids begin.
pub(crate) const PREFIX: &str = "countersign:";

/// Our requests awaiting their answers, and the way to the server's stdin or its endpoint.
pub struct Direct {
    writer: OnceLock<StdinWriter>,
    /// `None` once the server's stdout has ended: no answer can come any more.
    waiting: Mutex<Option<HashMap<u64, oneshot::Sender<Answer>>>>,
    next: AtomicU64,
    /// For a Streamable HTTP server: the session to post ours in (`http`).
    pub(crate) http: HttpWay,
    /// Who answers a server's questions that belong to requests of ours (see the module).
    questions: OnceLock<TakeQuestion>,
    /// Where progress for requests of ours goes as sent, rather than through rmcp's session.
    progress: OnceLock<TakeProgress>,
}

/// Takes one server question off the wire, in its place in the stream: what it does at once
/// happens before rmcp reads the next message (a cancellation of that question, say).
pub(crate) type TakeQuestion = Box<dyn Fn(RequestId, ServerRequest) + Send + Sync>;

/// Takes a server's progress notification off the wire (the message as sent), in its place in
/// the stream; false when the message is not one after all (then it is rmcp's).
pub(crate) type TakeProgress = Box<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// A server's requests that must belong to a request of the client's in flight (SEP-2260).
const RESTRICTED: [&str; 3] = ["elicitation/create", "sampling/createMessage", "roots/list"];

impl Default for Direct {
    fn default() -> Self {
        Direct {
            writer: OnceLock::new(),
            waiting: Mutex::new(Some(HashMap::new())),
            next: AtomicU64::new(0),
            http: HttpWay::default(),
            questions: OnceLock::new(),
            progress: OnceLock::new(),
        }
    }
}

/// One request of ours, until it is answered or given up: dropping it forgets the request, so
/// an answer that comes later is dropped, not kept.
pub(crate) struct Waiting<'a> {
    direct: &'a Direct,
    number: u64,
    pub(crate) id: RequestId,
    pub(crate) answer: oneshot::Receiver<Answer>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(waiting) = lock(&self.direct.waiting).as_mut() {
            waiting.remove(&self.number);
        }
    }
}

/// What [`Direct::claim`] makes of a line.
pub(crate) enum Claim {
    /// Not an answer to a request of ours: rmcp's to read.
    Not,
    /// A progress notification that names our id (as its token), to be taken as sent.
    Progress,
    /// An answer to ours: hand it over (the request may have been given up meanwhile).
    Ours(Option<oneshot::Sender<Answer>>, Answer),
}

impl Direct {
    /// Whether requests can be written here (a stdio server whose stdin is ours).
    pub(crate) fn is_open(&self) -> bool {
        self.writer.get().is_some()
    }

    pub(crate) fn attach(&self, writer: StdinWriter) {
        let _ = self.writer.set(writer);
    }

    /// A new request id, and where its answer will come.
    pub(crate) fn open(&self) -> Waiting<'_> {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        // After the end, the sender is dropped at once: the request fails as it is made.
        if let Some(waiting) = lock(&self.waiting).as_mut() {
            waiting.insert(number, tx);
        }
        Waiting {
            direct: self,
            number,
            id: NumberOrString::String(format!("{PREFIX}{number}").into()),
            answer: rx,
        }
    }

    /// Writes one whole line (a message and its `\n`) to the server's stdin, between rmcp's.
    pub(crate) async fn write(&self, line: Vec<u8>) -> io::Result<()> {
        match self.writer.get() {
            Some(writer) => writer.write(line).await,
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }

    /// The server's stdout has ended: every request waiting fails now, and every later one
    /// as it is made.
    pub(crate) fn end(&self) {
        lock(&self.waiting).take();
    }

    /// From now on, the server's questions asked while requests of ours are in flight go to
    /// `take` rather than to rmcp (see the module). Set once per session.
    pub(crate) fn take_questions(&self, take: TakeQuestion) {
        let _ = self.questions.set(take);
    }

    /// Whether `line`, one message from the server, is a question of the kind that must belong
    /// to a request in flight, asked while ours are: then it is ours to answer.
    pub(crate) fn question(&self, line: &[u8]) -> Option<(RequestId, ServerRequest)> {
        self.questions.get()?;
        use crate::mcp::needle::{finders, holds_any};
        if !holds_any(line, finders!(RESTRICTED)) {
            return None;
        }
        if lock(&self.waiting).as_ref().is_none_or(HashMap::is_empty) {
            return None;
        }
        // Read as rmcp would read it; a line it could not read stays rmcp's to refuse.
        let Ok(JsonRpcMessage::Request(JsonRpcRequest { id, request, .. })) =
            serde_json::from_slice::<ServerJsonRpcMessage>(line)
        else {
            return None;
        };
        let restricted = match &request {
            ServerRequest::ElicitRequest(_)
            | ServerRequest::CreateMessageRequest(_)
            | ServerRequest::ListRootsRequest(_) => true,
            ServerRequest::CustomRequest(custom) => RESTRICTED.contains(&custom.method.as_str()),
            _ => false,
        };
        restricted.then_some((id, request))
    }

    /// From now on, the server's progress goes to `take` as the server wrote it rather than to
    /// rmcp, which would read it into its model (dropping what it does not know) for it to be
    /// written again: over stdio progress for requests of ours (whose token is the request's
    /// id), over HTTP all of it (`TapHttpClient`). Set once per session.
    pub(crate) fn take_progress(&self, take: TakeProgress) {
        let _ = self.progress.set(take);
    }

    /// Hands `message` to whoever takes progress, if it is progress and someone does: whether
    /// it was taken.
    pub(crate) fn progress(&self, message: &[u8]) -> bool {
        self.progress.get().is_some_and(|take| take(message))
    }

    /// Hands a question taken off the wire to whoever takes them.
    pub(crate) fn ask(&self, id: RequestId, request: ServerRequest) {
        if let Some(take) = self.questions.get() {
            take(id, request);
        }
    }

    /// Whether `line`, one message from the server, answers one of our requests (or is
    /// progress for one, where progress is taken).
    pub(crate) fn claim(&self, line: &[u8]) -> Claim {
        if crate::mcp::needle::finder!(PREFIX.as_bytes())
            .find(line)
            .is_none()
        {
            return Claim::Not;
        }
        /// All that is read of such a line; the rest is skipped, not built.
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            id: Option<RequestId>,
            #[serde(borrow)]
            method: Option<std::borrow::Cow<'a, str>>,
            result: Option<Box<RawValue>>,
            error: Option<Box<RawValue>>,
        }
        // A line that does not read (a key twice, say) is rmcp's, which drops it as it would
        // drop an unreadable answer to its own request: the request then times out.
        let (id, result, error) = match serde_json::from_slice::<Head>(line) {
            Ok(Head {
                id: Some(NumberOrString::String(id)),
                method: None,
                result,
                error,
            }) => (id, result, error),
            Ok(Head {
                id: None,
                method: Some(method),
                ..
            }) if method == "notifications/progress" && self.progress.get().is_some() => {
                return Claim::Progress;
            }
            _ => return Claim::Not,
        };
        match id.strip_prefix(PREFIX).map(str::parse::<u64>) {
            Some(Ok(number)) => Claim::Ours(
                lock(&self.waiting)
                    .as_mut()
                    .and_then(|waiting| waiting.remove(&number)),
                Answer { result, error },
            ),
            _ => Claim::Not,
        }
    }
}

/// An answer to one of our requests, as far as it was read off the wire.
#[derive(Debug)]
pub(crate) struct Answer {
    result: Option<Box<RawValue>>,
    error: Option<Box<RawValue>>,
}

/// The one writer of a child's stdin: rmcp's messages (through [`ChannelWrite`]) and ours go
/// to it as whole lines, so they never interleave, and each is taken once it is written.
#[derive(Clone)]
pub(crate) struct StdinWriter {
    tx: mpsc::UnboundedSender<Write>,
}

enum Write {
    Line(Vec<u8>, oneshot::Sender<io::Result<()>>),
    Close(oneshot::Sender<io::Result<()>>),
}

impl StdinWriter {
    /// Starts the writing task; also returns rmcp's way in.
    pub(crate) fn spawn(
        stdin: impl AsyncWrite + Unpin + Send + 'static,
    ) -> (StdinWriter, ChannelWrite) {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(write_lines(stdin, rx));
        let writer = StdinWriter { tx };
        let channel = ChannelWrite {
            writer: writer.clone(),
            buffer: Vec::new(),
            taken: None,
            closing: false,
        };
        (writer, channel)
    }

    /// Each writer waits for its line to be written before it sends another, so the queue
    /// holds at most one line per writer: the pipe's backpressure still reaches them.
    async fn write(&self, line: Vec<u8>) -> io::Result<()> {
        let (done, taken) = oneshot::channel();
        self.tx
            .send(Write::Line(line, done))
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        taken
            .await
            .unwrap_or_else(|_| Err(io::ErrorKind::BrokenPipe.into()))
    }
}

/// A line the server has not taken in this long means it reads no more of its stdin: the pipe
/// is closed. rmcp answers each request a server sends with a task that waits for its turn to
/// write, so a server that floods requests and never reads would grow those tasks without end;
/// once the pipe is closed every write fails at once, and the server reads end of file.
const STUCK_WRITE: std::time::Duration = if cfg!(test) {
    std::time::Duration::from_millis(300)
} else {
    std::time::Duration::from_secs(60)
};

async fn write_lines(mut stdin: impl AsyncWrite + Unpin, mut rx: mpsc::UnboundedReceiver<Write>) {
    while let Some(write) = rx.recv().await {
        match write {
            Write::Line(line, done) => {
                let written = tokio::time::timeout(STUCK_WRITE, async {
                    stdin.write_all(&line).await?;
                    stdin.flush().await
                })
                .await;
                let Ok(written) = written else {
                    let _ = done.send(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the server took in no input for {} s",
                            STUCK_WRITE.as_secs()
                        ),
                    )));
                    // Dropping it closes the pipe; the lines still queued fail with it.
                    return;
                };
                let _ = done.send(written);
            }
            Write::Close(done) => {
                let _ = done.send(stdin.shutdown().await);
                // Dropping it closes the pipe: the server reads end of file.
                return;
            }
        }
    }
}

/// rmcp's side of [`StdinWriter`]: what rmcp's codec writes is gathered until it flushes
/// (once per message), then written as one piece.
pub(crate) struct ChannelWrite {
    writer: StdinWriter,
    buffer: Vec<u8>,
    /// The piece sent to the writer, until it is written.
    taken: Option<oneshot::Receiver<io::Result<()>>>,
    closing: bool,
}

impl ChannelWrite {
    fn poll_taken(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(taken) = self.taken.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let result = std::task::ready!(Pin::new(taken).poll(cx))
            .unwrap_or_else(|_| Err(io::ErrorKind::BrokenPipe.into()));
        self.taken = None;
        Poll::Ready(result)
    }

    fn send(
        &mut self,
        write: impl FnOnce(oneshot::Sender<io::Result<()>>) -> Write,
    ) -> io::Result<()> {
        let (done, taken) = oneshot::channel();
        self.writer
            .tx
            .send(write(done))
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        self.taken = Some(taken);
        Ok(())
    }
}

impl AsyncWrite for ChannelWrite {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // A piece still on its way is waited for first: one at a time, as a pipe would.
        std::task::ready!(self.poll_taken(cx))?;
        self.buffer.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.taken.is_none() && !self.buffer.is_empty() {
            let piece = std::mem::take(&mut self.buffer);
            self.send(|done| Write::Line(piece, done))?;
        }
        self.poll_taken(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.closing {
            std::task::ready!(self.as_mut().poll_flush(cx))?;
            self.closing = true;
            if self.send(Write::Close).is_err() {
                // The writer is gone, and the pipe with it.
                return Poll::Ready(Ok(()));
            }
        }
        self.poll_taken(cx)
    }
}

impl Drop for ChannelWrite {
    /// rmcp's transport gone without closing: the pipe closes all the same (our requests
    /// cannot outlive rmcp's session).
    fn drop(&mut self) {
        if !self.closing {
            let _ = self.writer.tx.send(Write::Close(oneshot::channel().0));
        }
    }
}

/// What an upstream request got back. Made once per request and moved once: boxing the larger
/// variant would only add an allocation to every answer.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Upstreamed {
    /// Read as rmcp's session reads it, with the result's bytes as sent when they were kept.
    Typed(ServerResult, Option<Box<RawValue>>),
    /// A tool call's result made only of a tool result's members, not read further: where the
    /// agent is answered with these bytes (the lane), nothing needs its typed form.
    PlainCall(Box<RawValue>),
}

impl Upstreamed {
    /// The typed result, read now for a plain call's, and the bytes as sent.
    pub(crate) fn typed(self) -> Result<(ServerResult, Option<Box<RawValue>>), rmcp::ServiceError> {
        match self {
            Upstreamed::Typed(typed, raw) => Ok((typed, raw)),
            Upstreamed::PlainCall(raw) => {
                let typed = match serde_json::from_str(raw.get()) {
                    Ok(plain) => ServerResult::CallToolResult(plain),
                    // As rmcp reads what is not a tool result after all (a content block of
                    // a kind it does not know, say).
                    Err(_) => serde_json::from_str(raw.get())
                        .map_err(|_| rmcp::ServiceError::UnexpectedResponse)?,
                };
                Ok((typed, Some(raw)))
            }
        }
    }

    /// The result's bytes as sent, when kept.
    pub(crate) fn raw(&self) -> Option<&RawValue> {
        match self {
            Upstreamed::Typed(_, raw) => raw.as_deref(),
            Upstreamed::PlainCall(raw) => Some(raw),
        }
    }
}

/// An answer to one of our requests: its result (read as rmcp's session would give it, but for
/// a plain call's) and the result's bytes as sent, or its error. `call` says the request was a
/// `tools/call`.
pub(crate) fn read_answer(answer: Answer, call: bool) -> Result<Upstreamed, rmcp::ServiceError> {
    match answer {
        Answer {
            result: Some(result),
            ..
        } => {
            if call && is_plain_call_result(&result) {
                return Ok(Upstreamed::PlainCall(result));
            }
            let typed = serde_json::from_str(result.get())
                .map_err(|_| rmcp::ServiceError::UnexpectedResponse)?;
            Ok(Upstreamed::Typed(typed, Some(result)))
        }
        Answer {
            error: Some(error), ..
        } => match serde_json::from_str(error.get()) {
            Ok(error) => Err(rmcp::ServiceError::McpError(error)),
            Err(_) => Err(rmcp::ServiceError::UnexpectedResponse),
        },
        _ => Err(rmcp::ServiceError::UnexpectedResponse),
    }
}

/// Whether a call's result has nothing but a tool result's members. `ServerResult` is untagged:
/// rmcp buffers the whole result and tries each of its variants in turn, which was most of what
/// reading an answer cost. For a result with only these members no variant before
/// `CallToolResult` can match (none of them is made of these alone;
/// `fuzz_a_plain_call_result_reads_as_rmcp_reads_it` holds rmcp to that), so reading it as a
/// `CallToolResult` gives what rmcp gives. A 2026-07-28 server's `resultType` counts among them
/// when it says `"complete"` as plainly as that. Anything else, a vendor's key included, is
/// read rmcp's way.
fn is_plain_call_result(result: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, non_snake_case)]
    struct Plain<'a> {
        #[serde(borrow)]
        content: Option<&'a RawValue>,
        #[serde(borrow)]
        structuredContent: Option<&'a RawValue>,
        #[serde(borrow)]
        isError: Option<&'a RawValue>,
        #[serde(borrow, rename = "_meta")]
        meta: Option<&'a RawValue>,
        #[serde(borrow)]
        resultType: Option<&'a RawValue>,
    }
    serde_json::from_str::<Plain>(result.get())
        .is_ok_and(|plain| plain.resultType.is_none_or(|t| t.get() == r#""complete""#))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use tokio::io::AsyncBufReadExt;

    /// A server that stops reading its stdin: once a line has waited past the bound, the pipe
    /// is closed and every write fails at once, rather than each waiting behind the first.
    #[tokio::test]
    async fn a_server_that_reads_no_more_of_its_input_has_its_pipe_closed() {
        let (stdin, mut unread) = tokio::io::duplex(64);
        let (writer, _rmcp) = StdinWriter::spawn(stdin);
        let stuck = writer.write(vec![b'x'; 1024]).await.unwrap_err();
        assert_eq!(stuck.kind(), io::ErrorKind::TimedOut);
        let started = tokio::time::Instant::now();
        assert!(writer.write(b"{}\n".to_vec()).await.is_err());
        assert!(started.elapsed() < STUCK_WRITE, "failed at once");
        // The server reads what fitted in the pipe, then end of file.
        let mut read = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut unread, &mut read)
            .await
            .unwrap();
        assert_eq!(read.len(), 64);
    }

    #[test]
    fn only_an_answer_with_one_of_our_ids_is_ours() {
        let direct = Direct::default();
        let waiting = direct.open();
        let id = match &waiting.id {
            NumberOrString::String(id) => id.to_string(),
            other => panic!("{other:?}"),
        };
        let not_ours = [
            // A request of the server's, whatever id it picks.
            format!(r#"{{"jsonrpc":"2.0","id":"{id}","method":"ping"}}"#),
            // rmcp's numbers, and our prefix elsewhere in a message.
            r#"{"jsonrpc":"2.0","id":0,"result":{"text":"countersign:0"}}"#.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":"{PREFIX}x","result":{{}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":"{id}","result":"#),
        ];
        for line in not_ours {
            assert!(
                matches!(direct.claim(line.as_bytes()), Claim::Not),
                "{line}"
            );
        }
        let answer = format!(r#"{{"jsonrpc":"2.0","id":"{id}","result":{{}}}}"#);
        assert!(matches!(
            direct.claim(answer.as_bytes()),
            Claim::Ours(Some(_), _)
        ));
        // Answered once: the same again is ours to drop, not rmcp's to read.
        assert!(matches!(
            direct.claim(answer.as_bytes()),
            Claim::Ours(None, _)
        ));
    }

    #[test]
    fn a_request_given_up_is_forgotten() {
        let direct = Direct::default();
        let id = direct.open().id.clone();
        assert!(lock(&direct.waiting).as_ref().unwrap().is_empty());
        let NumberOrString::String(id) = id else {
            panic!()
        };
        let late = format!(r#"{{"jsonrpc":"2.0","id":"{id}","result":{{}}}}"#);
        assert!(matches!(
            direct.claim(late.as_bytes()),
            Claim::Ours(None, _)
        ));
    }

    #[test]
    fn an_answer_reads_as_rmcp_would_give_it() {
        let direct = Direct::default();
        let read = |line: &[u8], call| match direct.claim(line) {
            Claim::Ours(_, answer) => read_answer(answer, call),
            Claim::Not | Claim::Progress => panic!("{}", String::from_utf8_lossy(line)),
        };
        let plain = br#"{"jsonrpc":"2.0","id":"countersign:1","result":{"content":[]}}"#;
        assert!(
            matches!(read(plain, true), Ok(Upstreamed::PlainCall(raw)) if raw.get() == r#"{"content":[]}"#),
            "a call's plain result is not read further"
        );
        assert!(
            matches!(read(plain, false), Ok(Upstreamed::Typed(..))),
            "only a call's"
        );
        let (typed, raw) = read(br#"{"jsonrpc":"2.0","id":"countersign:1","result":{"content":[{"type":"text","text":"hi"}], "x": 1E2}}"#, true).unwrap().typed().unwrap();
        assert!(
            matches!(typed, rmcp::model::ServerResult::CallToolResult(_)),
            "{typed:?}"
        );
        assert_eq!(
            raw.unwrap().get(),
            r#"{"content":[{"type":"text","text":"hi"}], "x": 1E2}"#
        );
        let error = read(
            br#"{"jsonrpc":"2.0","id":"countersign:1","error":{"code":-32601,"message":"no"}}"#,
            true,
        );
        assert!(matches!(error, Err(rmcp::ServiceError::McpError(e)) if e.message == "no"));
        assert!(matches!(
            read(br#"{"id":"countersign:1"}"#, false),
            Err(rmcp::ServiceError::UnexpectedResponse)
        ));
    }

    /// What a call's answer reads as when it is plain (`None` when it is not), and rmcp's way,
    /// as JSON (`Err` when it does not read).
    fn both_ways(result: &str) -> (Option<Result<Value, ()>>, Result<Value, ()>) {
        let raw = RawValue::from_string(result.to_owned()).unwrap();
        let direct = is_plain_call_result(&raw).then(|| {
            Upstreamed::PlainCall(raw)
                .typed()
                .map(|(typed, _)| serde_json::to_value(typed).unwrap())
                .map_err(|_| ())
        });
        let rmcp = serde_json::from_str::<ServerResult>(result)
            .map(|r| serde_json::to_value(r).unwrap())
            .map_err(|_| ());
        (direct, rmcp)
    }

    #[test]
    fn a_plain_call_result_reads_as_rmcp_reads_it() {
        for result in [
            r#"{"content":[{"type":"text","text":"hi"}]}"#,
            r#"{"content":[],"structuredContent":{"a":[1,2]},"isError":false,"_meta":{"k":1}}"#,
            r#"{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}],"isError":true}"#,
            r#"{"structuredContent":{"tickets":[]}}"#,
            r#"{"content":[],"resultType":"complete"}"#,
        ] {
            let (direct, rmcp) = both_ways(result);
            assert!(rmcp.is_ok(), "{result}");
            assert_eq!(direct, Some(rmcp), "{result}");
        }
        // Not read directly: rmcp's way decides.
        for result in [
            r#"{"content":[],"x-vendor":1}"#,
            r#"{"content":[],"resultType":"input_required"}"#,
            r#"{"content":[],"resultType":"\u0063omplete"}"#,
            r#"{"content":[],"content":[]}"#,
            r#"{"task":{"taskId":"t"}}"#,
            r#"[]"#,
        ] {
            assert!(both_ways(result).0.is_none(), "{result}");
        }
    }

    proptest::proptest! {
        /// Whatever values a result made of a tool result's members holds, its typed form,
        /// read when it is needed, is what rmcp's untagged `ServerResult` gives (or neither
        /// reads). Fails if an rmcp upgrade makes another variant take such a result.
        #[test]
        fn fuzz_a_plain_call_result_reads_as_rmcp_reads_it(
            members in proptest::collection::btree_map(
                proptest::sample::select(vec!["content", "structuredContent", "isError", "_meta", "resultType"]),
                crate::fuzzing::json(),
                0..5,
            ),
            text in proptest::sample::select(vec!["text", "image", "resource_link", "audio"]),
        ) {
            let mut result = serde_json::Map::new();
            for (key, value) in members {
                // Most cases well-formed, so the direct reading is reached.
                let value = match (key, &value) {
                    ("content", Value::Array(_)) => value,
                    ("content", _) => serde_json::json!([{"type": text, "text": "t", "uri": "u", "name": "n", "data": "AA==", "mimeType": "m"}]),
                    ("isError", Value::Bool(_)) | ("isError", Value::Null) => value,
                    ("resultType", _) => Value::from("complete"),
                    _ => value,
                };
                result.insert(key.to_owned(), value);
            }
            let result = Value::Object(result).to_string();
            let (direct, rmcp) = both_ways(&result);
            proptest::prop_assert_eq!(direct, Some(rmcp), "{}", result);
        }
    }

    #[tokio::test]
    async fn once_the_server_is_gone_no_request_waits() {
        let direct = Direct::default();
        let mut before = direct.open();
        direct.end();
        assert!((&mut before.answer).await.is_err());
        assert!((&mut direct.open().answer).await.is_err());
    }

    /// rmcp's messages (through its codec, a piece at a time) and ours, written at once from
    /// many tasks, reach the pipe as whole lines.
    #[tokio::test]
    async fn lines_from_rmcp_and_from_us_never_interleave() {
        use futures::SinkExt;
        let (pipe, theirs) = tokio::io::duplex(64);
        let (writer, rmcp_side) = StdinWriter::spawn(pipe);
        let mut framed =
            tokio_util::codec::FramedWrite::new(rmcp_side, tokio_util::codec::LinesCodec::new());
        let long = "r".repeat(300);
        let rmcp = tokio::spawn({
            let long = long.clone();
            async move {
                for _ in 0..50 {
                    framed.send(long.clone()).await.unwrap();
                }
                SinkExt::<String>::close(&mut framed).await.unwrap();
            }
        });
        let ours: Vec<_> = (0..4)
            .map(|_| {
                let writer = writer.clone();
                tokio::spawn(async move {
                    for _ in 0..25 {
                        writer
                            .write(format!("{}\n", "d".repeat(200)).into_bytes())
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        let reading = tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(theirs).lines();
            let mut seen = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                seen.push(line);
            }
            seen
        });
        rmcp.await.unwrap();
        for task in ours {
            task.await.unwrap();
        }
        drop(writer);
        let seen = reading.await.unwrap();
        assert_eq!(seen.len(), 150);
        for line in &seen {
            assert!(*line == long || *line == "d".repeat(200), "{line}");
        }
    }

    /// Closing rmcp's side closes the pipe, even while we hold a way to write.
    #[tokio::test]
    async fn closing_rmcps_side_closes_the_pipe() {
        let (pipe, theirs) = tokio::io::duplex(64);
        let (writer, mut rmcp_side) = StdinWriter::spawn(pipe);
        rmcp_side.shutdown().await.unwrap();
        let mut rest = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::BufReader::new(theirs), &mut rest)
            .await
            .unwrap();
        assert!(rest.is_empty());
        assert!(writer.write(b"late\n".to_vec()).await.is_err());
    }
}
