//! Giving back the code a tray app is not running.
//!
//! Once the window is gone, most of what the app's process holds is the text and read-only
//! data of libraries only the window ran (WebKit, JavaScriptCore: 37 of the 100 MiB left
//! after the window was opened once; BENCHMARKS.md, "Memory"). Those pages are clean copies of
//! files on disk, so the kernel is asked to reclaim them (`MADV_PAGEOUT`, Linux 5.4); what
//! the app goes on running comes back by a page fault, read from the file again. This is what
//! Android does to the apps it keeps cached. Only mappings no one can write are asked: their
//! pages can only be the file's, so nothing is lost, and a shared writable mapping is never
//! made to write back. Anonymous memory (the heap) stays: without swap it could not go
//! anywhere, and it is the app's own state.

use std::io;

/// What [`page_out_code`] gave back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagedOut {
    /// Mappings asked.
    pub mappings: usize,
    /// The process's file-backed PSS before and after, in KiB.
    pub file_kib_before: u64,
    pub file_kib_after: u64,
}

/// Asks the kernel to reclaim the pages of every read-only file-backed mapping of this process
/// (code and read-only data). Safe at any moment: a page still in use is read back when next
/// touched. A kernel without `MADV_PAGEOUT` says `EINVAL`, returned as the error.
pub fn page_out_code() -> io::Result<PagedOut> {
    let before = file_pss_kib()?;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut mappings = 0;
    for (start, end) in read_only_file_mappings(&maps) {
        // SAFETY: the range is one of this process's mappings as the kernel listed it just
        // now; MADV_PAGEOUT changes no page's contents and unmaps nothing, so even a range
        // unmapped meanwhile (ENOMEM) or reused is left as valid as it was.
        let done =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_PAGEOUT) };
        if done == 0 {
            mappings += 1;
            continue;
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            // Gone since the list was read, or locked in memory: the next one.
            Some(libc::ENOMEM | libc::EAGAIN) => continue,
            _ => return Err(error),
        }
    }
    Ok(PagedOut {
        mappings,
        file_kib_before: before,
        file_kib_after: file_pss_kib()?,
    })
}

/// The address ranges of `maps` (as `/proc/<pid>/maps` writes it) backed by a file and not
/// writable: code and read-only data. Special mappings (`[heap]`, `[vdso]`) and anonymous
/// ones are left out.
fn read_only_file_mappings(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3)?;
            if !path.starts_with('/') || perms.as_bytes().get(1) != Some(&b'-') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (start < end).then_some((start, end))
        })
        .collect()
}

/// This process's proportional set size of file-backed pages, in KiB.
fn file_pss_kib() -> io::Result<u64> {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup")?;
    rollup
        .lines()
        .find_map(|line| line.strip_prefix("Pss_File:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Pss_File in /proc/self/smaps_rollup"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn only_read_only_file_mappings_are_picked() {
        let maps = "\
55d0c0000000-55d0c0100000 r--p 00000000 fe:01 123 /usr/bin/app
55d0c0100000-55d0c0400000 r-xp 00100000 fe:01 123 /usr/bin/app
55d0c0400000-55d0c0410000 rw-p 00400000 fe:01 123 /usr/bin/app
55d0c1000000-55d0c2000000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000200000 r-xp 00000000 fe:01 456 /usr/lib/lib with space.so (deleted)
7f0000200000-7f0000300000 rw-s 00000000 00:05 789 /dev/shm/shared
7f0000300000-7f0000400000 r--s 00000000 00:05 790 /run/user/1000/dconf/user
7f0000400000-7f0000500000 ---p 00000000 00:00 0
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]
garbage line
";
        assert_eq!(
            read_only_file_mappings(maps),
            vec![
                (0x55d0c0000000, 0x55d0c0100000),
                (0x55d0c0100000, 0x55d0c0400000),
                (0x7f0000000000, 0x7f0000200000),
                (0x7f0000300000, 0x7f0000400000),
            ]
        );
    }

    /// The resident size, in KiB, of this process's mapping that starts at `start`.
    fn rss_of_mapping(start: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let head = format!("{start:x}-");
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&head)).skip(1);
        lines
            .find_map(|l| l.strip_prefix("Rss:"))
            .map(|v| v.trim().trim_end_matches("kB").trim().parse().unwrap())
            .unwrap()
    }

    /// Maps `file` whole with `prot`, privately, and touches every page (reading, or writing
    /// where it may).
    fn map_and_touch(file: &std::fs::File, len: usize, prot: libc::c_int) -> *mut u8 {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh private mapping of a file of `len` bytes, read or written only
        // within it by these tests.
        unsafe {
            let at = libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(at, libc::MAP_FAILED);
            let at = at as *mut u8;
            for page in (0..len).step_by(4096) {
                if prot & libc::PROT_WRITE != 0 {
                    at.add(page).write_volatile(7);
                } else {
                    std::ptr::read_volatile(at.add(page));
                }
            }
            at
        }
    }

    #[test]
    fn a_read_only_mappings_pages_go_and_come_back_the_same_and_a_written_one_stays() {
        const LEN: usize = 8 << 20;
        let dir = std::env::temp_dir().join(format!("countersign-idle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("code");
        let contents: Vec<u8> = (0..LEN).map(|i| (i * 31 % 251) as u8).collect();
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&contents).unwrap();
        // Clean in the page cache, as a library's pages are.
        file.sync_all().unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let code = map_and_touch(&file, LEN, libc::PROT_READ);
        let data = map_and_touch(&file, LEN, libc::PROT_READ | libc::PROT_WRITE);
        assert!(rss_of_mapping(code as usize) >= 7 * 1024);
        assert!(rss_of_mapping(data as usize) >= 7 * 1024);

        let paged = page_out_code().unwrap();
        assert!(paged.mappings >= 1, "{paged:?}");
        assert!(
            rss_of_mapping(code as usize) < 1024,
            "the read-only mapping still holds {} KiB",
            rss_of_mapping(code as usize)
        );
        // Written pages are the process's own: not asked, still there.
        assert!(rss_of_mapping(data as usize) >= 7 * 1024);
        // SAFETY: both mappings are `LEN` bytes long and still mapped.
        let (read_back, written) = unsafe {
            (
                std::slice::from_raw_parts(code, LEN).to_vec(),
                std::slice::from_raw_parts(data, LEN).to_vec(),
            )
        };
        assert!(read_back == contents, "read back as the file has it");
        assert!(written.iter().step_by(4096).all(|b| *b == 7));
        // SAFETY: unmapping what this test mapped.
        unsafe {
            libc::munmap(code.cast(), LEN);
            libc::munmap(data.cast(), LEN);
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
