//! Substring searches for fixed needles, each searcher built once.
//!
//! `memchr::memmem::find` builds a searcher for its needle on every call, about a thousand
//! instructions, and the gateway looks for a few fixed needles in every message it relays (7
//! times a forwarded call: 2.4 % of its instructions under callgrind, BENCHMARKS.md).

use memchr::memmem::Finder;

/// The searcher for the fixed needle `$needle` (a `&'static [u8]`), built on first use.
macro_rules! finder {
    ($needle:expr) => {{
        static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new($needle));
        &*FINDER
    }};
}
pub(crate) use finder;

/// The searchers for the fixed needles `$needles` (an array of `&'static str`), built on first
/// use.
macro_rules! finders {
    ($needles:expr) => {{
        static FINDERS: std::sync::LazyLock<Vec<memchr::memmem::Finder<'static>>> =
            std::sync::LazyLock::new(|| {
                $needles
                    .iter()
                    .map(|n| memchr::memmem::Finder::new(n.as_bytes()))
                    .collect()
            });
        FINDERS.as_slice()
    }};
}
pub(crate) use finders;

/// Whether `haystack` holds any of `needles`.
pub(crate) fn holds_any(haystack: &[u8], needles: &[Finder<'static>]) -> bool {
    needles.iter().any(|n| n.find(haystack).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_once_finder_finds_as_memmem_does() {
        for haystack in [
            &b"{\"method\":\"tools/call\"}"[..],
            b"",
            b"tools/cal",
            b"xtools/callx",
        ] {
            assert_eq!(
                finder!(b"tools/call").find(haystack),
                memchr::memmem::find(haystack, b"tools/call")
            );
        }
        const METHODS: [&str; 2] = ["a/b", "c/d"];
        assert!(holds_any(b"..c/d..", finders!(METHODS)));
        assert!(!holds_any(b"..a/c..", finders!(METHODS)));
    }
}
