//! Listing a server's tools across pages, within bounds (and the requests of Countersign's own,
//! whose results nobody else takes: `our_own`). rmcp's `list_all_tools` follows
//! `nextCursor` for as long as the server gives one, keeping every page: a server that always
//! answers with another cursor (or the same one) would grow the app's memory until the request
//! timed out, and the gateway, in the same process, with it.

use std::collections::HashSet;

use rmcp::model::{
    ClientRequest, ListToolsRequest, ListToolsResult, PaginatedRequestParams, ServerResult, Tool,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};

use super::raw::RawRequests;

/// At most this many pages are read, and this many tools kept: far past any real server
/// (the largest ones list a few hundred tools).
pub(crate) const MAX_PAGES: usize = 100;
pub(crate) const MAX_TOOLS: usize = 10_000;

/// The server's tools, page after page, until it gives no cursor, repeats one, or the bounds
/// are reached (what was read so far is kept, and a warning logged). `raw`: the session's
/// tap, when it keeps results for whoever sent the request; these pages are let go there.
pub(crate) async fn all_tools(
    server: &str,
    peer: &Peer<RoleClient>,
    raw: Option<&RawRequests>,
) -> Result<Vec<Tool>, ServiceError> {
    let mut tools = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .clone()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = list_page(peer, params, raw).await?;
        tools.extend(page.tools);
        if tools.len() >= MAX_TOOLS {
            tools.truncate(MAX_TOOLS);
            tracing::warn!(
                server,
                "the server lists more than {MAX_TOOLS} tools: the rest are left out"
            );
            return Ok(tools);
        }
        match page.next_cursor {
            None => return Ok(tools),
            Some(next) if !seen.insert(next.clone()) => {
                tracing::warn!(
                    server,
                    "the server gave a cursor it had given before: listing stopped"
                );
                return Ok(tools);
            }
            Some(next) => cursor = Some(next),
        }
    }
    tracing::warn!(
        server,
        "the server's tools run past {MAX_PAGES} pages: the rest are left out"
    );
    Ok(tools)
}

/// One page, asked for afresh (rmcp's `list_tools` may answer from its cache, and the gate
/// wants the tools as the server lists them now). The page's bytes, kept by a tap that keeps
/// every result for the request it answers, are let go: nobody else takes them.
async fn list_page(
    peer: &Peer<RoleClient>,
    params: Option<PaginatedRequestParams>,
    raw: Option<&RawRequests>,
) -> Result<ListToolsResult, ServiceError> {
    let request = ClientRequest::ListToolsRequest(ListToolsRequest {
        method: Default::default(),
        params,
        extensions: Default::default(),
    });
    match our_own(peer, request, PeerRequestOptions::no_options(), raw).await? {
        ServerResult::ListToolsResult(page) => Ok(page),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// A request of Countersign's own (a listing, a preview's dry run) on a session whose tap
/// keeps every result for the agent request it answers (`raw`): nobody takes this one's
/// bytes, so they are let go here rather than left to fill the tap's budget. Within `options`'
/// timeout, which rmcp keeps, so the bytes are let go however the answer ends.
pub(crate) async fn our_own(
    peer: &Peer<RoleClient>,
    request: ClientRequest,
    options: PeerRequestOptions,
    raw: Option<&RawRequests>,
) -> Result<ServerResult, ServiceError> {
    let handle = peer.send_cancellable_request(request, options).await?;
    let id = handle.id.clone();
    let answer = handle.await_response().await;
    if let Some(raw) = raw {
        let _ = raw.take_result_bytes(&id);
    }
    answer
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
        ListToolsResult, ServerCapabilities, ServerConfig,
    };
    use rmcp::service::{RequestContext, RoleServer, RunningService};
    use rmcp::{ErrorData, ServerHandler, ServiceExt};

    use super::*;

    /// Lists one tool a page, with a cursor that is new each time, or the same each time.
    struct Endless {
        repeat: bool,
        pages: Arc<AtomicUsize>,
    }

    impl ServerHandler for Endless {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn call_tool(
            &self,
            _: CallToolRequestParams,
            _: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            Ok(CallToolResult::success(vec![ContentBlock::text("a dry run's diff")]).into())
        }

        async fn list_tools(
            &self,
            _: Option<PaginatedRequestParams>,
            _: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let n = self.pages.fetch_add(1, Ordering::SeqCst);
            let tool = Tool::new(format!("t{n}"), "a tool", Arc::new(Default::default()));
            let mut page = ListToolsResult::with_all_items(vec![tool]);
            page.next_cursor = Some(if self.repeat {
                "again".into()
            } else {
                format!("c{n}")
            });
            Ok(page)
        }
    }

    /// A client of an [`Endless`] server through a tap that keeps every result, as a gateway
    /// session's does.
    async fn tapped(
        repeat: bool,
    ) -> (
        RunningService<RoleClient, ()>,
        Arc<RawRequests>,
        Arc<AtomicUsize>,
    ) {
        let pages = Arc::new(AtomicUsize::new(0));
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let server = Endless {
            repeat,
            pages: pages.clone(),
        };
        tokio::spawn(async move {
            if let Ok(running) = server.serve(theirs).await {
                let _ = running.waiting().await;
            }
        });
        let raw = RawRequests::with_results();
        let (read, write) = tokio::io::split(ours);
        let client =
            ().serve((crate::mcp::raw::TapRead::new(read, raw.clone()), write))
                .await
                .unwrap();
        (client, raw, pages)
    }

    /// A preview's dry run is a request of Countersign's own: its result's bytes are not left
    /// in the tap, where they would count against the results kept for the agent's calls.
    #[tokio::test]
    async fn a_request_of_our_own_leaves_no_result_kept() {
        let (client, raw, _) = tapped(false).await;
        let handshake = raw.results_kept();
        let call = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("edit_file"),
        ));
        let answer = our_own(
            client.peer(),
            call,
            PeerRequestOptions::no_options(),
            Some(&raw),
        )
        .await
        .unwrap();
        assert!(
            matches!(answer, ServerResult::CallToolResult(_)),
            "{answer:?}"
        );
        assert_eq!(raw.results_kept(), handshake);
        let _ = client.cancel().await;
    }

    async fn listed(repeat: bool) -> (usize, usize) {
        let (client, raw, pages) = tapped(repeat).await;
        let handshake = raw.results_kept();
        let tools = all_tools("endless", client.peer(), Some(&raw))
            .await
            .unwrap();
        // Nobody takes the pages' bytes: none are left kept (the handshake's is not ours).
        assert_eq!(raw.results_kept(), handshake);
        let _ = client.cancel().await;
        (tools.len(), pages.load(Ordering::SeqCst))
    }

    /// A server that always has another page is read for `MAX_PAGES` pages and no more; one
    /// that gives the same cursor again is read twice. (rmcp's own `list_all_tools` reads the
    /// first for as long as the request may take.)
    #[tokio::test]
    async fn a_server_that_always_has_another_page_is_read_within_bounds() {
        assert_eq!(listed(false).await, (MAX_PAGES, MAX_PAGES));
        assert_eq!(listed(true).await, (2, 2));
    }
}
