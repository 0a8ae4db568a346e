//! The audit log's hash chain: every line starts with its number in the chain (`seq`) and the
//! SHA-256 of the line before it (`prev`), so a record changed, removed or moved shows as a
//! broken link (`verify`). Only the line's bytes are hashed, so no field order or number
//! formatting has to be reproduced to check it.

use serde::Deserialize;
use sha2::{Digest, Sha256};

pub type Hash = [u8; 32];

/// The `prev` of the first record ever written.
pub const GENESIS: Hash = [0; 32];

/// Where the chain stands: the number the next record gets, and the hash of the last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: Hash,
}

impl Head {
    pub const START: Head = Head {
        seq: 0,
        hash: GENESIS,
    };

    /// The head once `line` (without its newline) is the last line of the log. A line from
    /// before the chain existed (no `seq`) is followed by record 0.
    pub fn after(line: &[u8]) -> Head {
        let seq = serde_json::from_slice::<Link>(line)
            .ok()
            .and_then(|l| l.seq)
            .map_or(0, |s| s.saturating_add(1));
        Head {
            seq,
            hash: hash(line),
        }
    }

    /// The head once `line`, linked after this head (`link`), is the last line: what
    /// [`Head::after`] reads back from it, without parsing it.
    pub fn then(&self, line: &[u8]) -> Head {
        Head {
            seq: self.seq.saturating_add(1),
            hash: hash(line),
        }
    }
}

/// The chain fields of a line as read back; the rest of the line is the record.
#[derive(Debug, Deserialize)]
pub struct Link {
    pub seq: Option<u64>,
    pub prev: Option<String>,
}

pub fn hash(line: &[u8]) -> Hash {
    Sha256::digest(line).into()
}

pub fn parse_hex(text: &str) -> Option<Hash> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

/// The line for a record serialized as a JSON object (`{"event":...}`), linked after `head`:
/// the chain fields are spliced in front, so the record's own bytes are kept as serialized.
/// `None` if `record` is not a JSON object's text.
pub fn link(head: &Head, record: &[u8]) -> Option<Vec<u8>> {
    let rest = record.strip_prefix(b"{")?;
    let mut line = format!(
        "{{\"seq\":{},\"prev\":\"{}\"",
        head.seq,
        hex::encode(head.hash)
    )
    .into_bytes();
    if rest != b"}" {
        line.push(b',');
    }
    line.extend_from_slice(rest);
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linked_line_reads_back_as_its_link_and_its_record() {
        let head = Head {
            seq: 7,
            hash: hash(b"before"),
        };
        let line = link(&head, br#"{"event":"x","n":1}"#).unwrap();
        let text = String::from_utf8(line.clone()).unwrap();
        assert!(text.starts_with(r#"{"seq":7,"prev":""#), "{text}");
        let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(value["event"], "x");
        assert_eq!(value["n"], 1);
        assert_eq!(parse_hex(value["prev"].as_str().unwrap()), Some(head.hash));
        assert_eq!(Head::after(&line).seq, 8);
        assert_eq!(Head::after(&line).hash, hash(&line));
        assert_eq!(
            head.then(&line),
            Head::after(&line),
            "the writer's head is the reader's"
        );
        assert_eq!(Head::after(br#"{"event":"old"}"#).seq, 0);
        assert!(link(&head, b"[1]").is_none());
        assert_eq!(parse_hex("zz"), None);
    }
}
