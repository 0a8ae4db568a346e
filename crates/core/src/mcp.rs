//! The MCP client side, shared by the app's sessions and the gateway: what Countersign
//! declares to a server, how a server's requests (elicitation, multi round-trip input,
//! sampling, roots) are read off the wire and reach the person, child processes, OAuth
//! sign-in, URL-required errors and tasks.

pub(crate) mod child;
pub(crate) mod connect;
pub mod direct;
pub mod handler;
pub(crate) mod http_post;
pub(crate) mod input;
pub(crate) mod listing;
pub(crate) mod needle;
pub mod oauth;
pub(crate) mod origins;
pub mod raw;
pub(crate) mod rounds;
pub mod sampling;
pub mod standard_headers;
pub mod tap;
pub mod task;
pub mod url_required;

/// What the bridge looks for to refuse running as one of Countersign's own servers.
pub use connect::STARTED_AS_SERVER_ENV;
/// A Streamable HTTP response read within bounds: the whole of a JSON body, or SSE events each
/// within a size. The bridge reads the gateway's answers with the same code.
pub use http_post::{bounded_sse, read_bounded, read_prefix};
