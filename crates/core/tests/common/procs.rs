//! The processes below one, read from `/proc`: for tests and benches that check that children
//! are gone when they should be (the benches include this file with `#[path]`).

use std::collections::HashMap;

/// Every process whose parent chain reaches `pid` (children, their children, ...), at the moment
/// `/proc` is read.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The parent is the second field after the command, which is in parentheses.
        if let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u32>().ok())
        {
            children.entry(ppid).or_default().push(p);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![pid];
    // Bounded: /proc read at different moments could, in theory, show a loop.
    while let Some(p) = todo.pop()
        && out.len() < 100_000
    {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or_default() {
            if c != pid && !out.contains(&c) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}
