//! Reading the agent's stdin a line at a time, with a bound on the line.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};

/// Longest line read from the agent. A line past it is answered with a parse error and skipped
/// to its end, so an agent (or whatever writes to the bridge's stdin) cannot grow the bridge
/// without bound by never ending a line.
pub(super) const MAX_LINE: usize = 32 * 1024 * 1024;

/// What [`read_line`] found.
#[derive(Debug, PartialEq)]
pub(super) enum Line {
    Eof,
    /// A line (with its line break, if any) is in the buffer.
    Read,
    /// A line longer than the limit went by; the buffer is empty.
    TooLong,
}

/// Reads one line into `buf` (cleared first), at most `max` bytes of it.
pub(super) async fn read_line(
    input: &mut (impl AsyncBufRead + Unpin),
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let n = (&mut *input)
        .take(max as u64 + 1)
        .read_until(b'\n', buf)
        .await?;
    if n == 0 {
        return Ok(Line::Eof);
    }
    if buf.len() <= max || buf.ends_with(b"\n") {
        return Ok(Line::Read);
    }
    buf.clear();
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            break;
        }
        match chunk.iter().position(|b| *b == b'\n') {
            Some(end) => {
                input.consume(end + 1);
                break;
            }
            None => {
                let all = chunk.len();
                input.consume(all);
            }
        }
    }
    Ok(Line::TooLong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_line_past_the_limit_is_skipped_to_its_end_and_the_next_one_read() {
        let input = [vec![b'x'; 100], b"\n{\"id\":1}\n".to_vec(), vec![b'y'; 50]].concat();
        let mut input = tokio::io::BufReader::with_capacity(7, &input[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut input, &mut buf, 10).await.unwrap(),
            Line::TooLong
        );
        assert!(buf.is_empty());
        assert_eq!(
            read_line(&mut input, &mut buf, 10).await.unwrap(),
            Line::Read
        );
        assert_eq!(buf, b"{\"id\":1}\n");
        // The last line has no end and is too long: skipped to the end of input.
        assert_eq!(
            read_line(&mut input, &mut buf, 10).await.unwrap(),
            Line::TooLong
        );
        assert_eq!(
            read_line(&mut input, &mut buf, 10).await.unwrap(),
            Line::Eof
        );
        // Exactly at the limit, with or without its line break, is a line.
        let mut input = &b"0123456789\n0123456789"[..];
        assert_eq!(
            read_line(&mut input, &mut buf, 10).await.unwrap(),
            Line::Read
        );
        assert_eq!(
            read_line(&mut input, &mut buf, 10).await.unwrap(),
            Line::Read
        );
        assert_eq!(buf, b"0123456789");
    }
}
