//! The lifecycle keys each request of ours carries to a 2026-07-28 server, written once per
//! upstream session (see [`Lifecycle`]).

use super::*;

/// The lifecycle keys rmcp's session puts in each of its own requests' `_meta` to a server
/// without a handshake (2026-07-28), for ours to say the same: the revision, our name and our
/// capabilities. They are the same in every request, so they are written once, and each
/// request's bytes get them in place of a key of ours that nobody else can know (a random
/// one per upstream session), rather than as a copy of the map serialized again each time.
pub(super) struct Lifecycle {
    /// `"<random key>":null`, as serde_json writes the placeholder entry; its searcher built
    /// once, as each request is searched for it.
    placeholder: memchr::memmem::Finder<'static>,
    key: String,
    /// The keys and values, written as the members of an object (no braces).
    members: Vec<u8>,
}

impl Lifecycle {
    pub(super) fn of(service: &RunningService<RoleClient, Handler>) -> Option<Self> {
        let info = service.peer().peer_info()?;
        if info.protocol_version.has_initialize() {
            return None;
        }
        let config = &service.service().config;
        let mut meta = rmcp::model::RequestMetaObject::default();
        meta.set_protocol_version(info.protocol_version.clone());
        meta.set_client_info(config.client_info.clone());
        meta.set_client_capabilities(config.capabilities.clone());
        Self::new(&meta.0.0)
    }

    fn new(keys: &serde_json::Map<String, Value>) -> Option<Self> {
        let object = serde_json::to_vec(keys).ok()?;
        let members = object.get(1..object.len().checked_sub(1)?)?.to_vec();
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).ok()?;
        let key = format!("countersign/lifecycle-{}", hex::encode(random));
        Some(Lifecycle {
            placeholder: memchr::memmem::Finder::new(format!("\"{key}\":null").as_bytes())
                .into_owned(),
            key,
            members,
        })
    }

    /// Marks the place in `meta` where the keys go.
    pub(super) fn mark(&self, meta: &mut rmcp::model::RequestMetaObject) {
        meta.0.0.insert(self.key.clone(), Value::Null);
    }

    /// Puts the keys where [`Lifecycle::mark`] marked their place in `message`.
    pub(super) fn fill(&self, message: &mut Vec<u8>) -> Result<(), rmcp::ServiceError> {
        let at = self
            .placeholder
            .find(message)
            .ok_or(rmcp::ServiceError::UnexpectedResponse)?;
        message.splice(
            at..at + self.placeholder.needle().len(),
            self.members.iter().copied(),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_lifecycle_keys_go_in_the_requests_meta_and_nowhere_else() {
        let keys = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "countersign", "version": "1"}
        });
        let lifecycle = Lifecycle::new(keys.as_object().unwrap()).unwrap();
        let other = Lifecycle::new(keys.as_object().unwrap()).unwrap();
        assert_ne!(lifecycle.key, other.key, "each upstream has its own key");
        // An agent that puts a lookalike key (another upstream's, say) in its arguments and
        // its own `_meta` gets them passed on as they were.
        let mut params = rmcp::model::CallToolRequestParams::new("t");
        params.arguments = json!({ other.key.clone(): null, "x": "\"k\":null" })
            .as_object()
            .cloned();
        let mut request = ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        let meta = request.get_meta_mut();
        meta.0.0.insert("agent/key".into(), json!(1));
        lifecycle.mark(meta);
        meta.set_progress_token(ProgressToken(rmcp::model::NumberOrString::String(
            "countersign:1".into(),
        )));
        let message = rmcp::model::ClientJsonRpcMessage::request(
            request,
            rmcp::model::NumberOrString::String("countersign:1".into()),
        );
        let mut bytes = serde_json::to_vec(&message).unwrap();
        lifecycle.fill(&mut bytes).unwrap();
        let sent: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            sent["params"]["_meta"],
            json!({
                "agent/key": 1,
                "progressToken": "countersign:1",
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "countersign", "version": "1"}
            })
        );
        assert_eq!(
            sent["params"]["arguments"],
            json!({ other.key.clone(): null, "x": "\"k\":null" })
        );
        // A request whose place was not marked is not sent without the keys.
        let mut unmarked = br#"{"jsonrpc":"2.0","id":"countersign:2","method":"ping"}"#.to_vec();
        assert!(lifecycle.fill(&mut unmarked).is_err());
    }
}
