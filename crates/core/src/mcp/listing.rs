//! Listing a server's tools across pages, within bounds. rmcp's `list_all_tools` follows
//! `nextCursor` for as long as the server gives one, keeping every page: a server that always
//! answers with another cursor (or the same one) would grow the app's memory until the request
//! timed out, and the gateway, in the same process, with it.

use std::collections::HashSet;

use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::service::{Peer, RoleClient, ServiceError};

/// At most this many pages are read, and this many tools kept: far past any real server
/// (the largest ones list a few hundred tools).
pub(crate) const MAX_PAGES: usize = 100;
pub(crate) const MAX_TOOLS: usize = 10_000;

/// The server's tools, page after page, until it gives no cursor, repeats one, or the bounds
/// are reached (what was read so far is kept, and a warning logged).
pub(crate) async fn all_tools(
    server: &str,
    peer: &Peer<RoleClient>,
) -> Result<Vec<Tool>, ServiceError> {
    let mut tools = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .clone()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = peer.list_tools(params).await?;
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rmcp::model::{ListToolsResult, ServerCapabilities, ServerConfig};
    use rmcp::service::{RequestContext, RoleServer};
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

    async fn listed(repeat: bool) -> (usize, usize) {
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
        let client = ().serve(ours).await.unwrap();
        let tools = all_tools("endless", client.peer()).await.unwrap();
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
