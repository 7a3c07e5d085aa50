//! The process's own memory, as Linux reports it.

/// Peak resident memory of this process (`VmHWM` in `/proc/self/status`),
/// in bytes; `None` where the kernel does not say.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Resident bytes of this process's code: every mapping of a file that
/// it maps executable (the program and the shared libraries it links:
/// their text, read-only data and relocated data), from
/// `/proc/self/smaps`; `None` where the kernel does not say. A cost of
/// the process, the same whatever data it works on; these pages are
/// shared with every process that maps the same files.
pub fn code_rss_bytes() -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    Some(code_kib(&smaps)? * 1024)
}

/// The resident KiB of the mappings in `smaps` of files mapped executable
/// anywhere in it.
fn code_kib(smaps: &str) -> Option<u64> {
    // (path, executable, resident KiB) of each file mapping.
    let mut mappings: Vec<(&str, bool, u64)> = Vec::new();
    let mut current: Option<(&str, bool)> = None;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: range, perms, offset, device, inode, path.
            let perms = fields.next().unwrap_or_default();
            let path = fields.nth(3).filter(|p| p.starts_with('/'));
            current = path.map(|p| (p, perms.contains('x')));
        } else if first == "Rss:" {
            if let Some((path, executable)) = current {
                mappings.push((path, executable, fields.next()?.parse().ok()?));
            }
        }
    }
    let code: std::collections::HashSet<&str> =
        mappings.iter().filter(|m| m.1).map(|m| m.0).collect();
    Some(
        mappings
            .iter()
            .filter(|m| code.contains(m.0))
            .map(|m| m.2)
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_holding_memory_reports_at_least_that_much() {
        let held = vec![1u8; 64 << 20];
        let peak = super::peak_rss_bytes().expect("Linux reports VmHWM");
        assert!(peak >= 64 << 20, "{peak} bytes with 64 MiB touched");
        drop(held);
    }

    #[test]
    fn code_is_every_mapping_of_the_files_mapped_executable_and_nothing_else() {
        let smaps = "\
55d0c0000000-55d0c0100000 r--p 00000000 fd:01 100 /usr/bin/quiver
Size:               1024 kB
Rss:                 300 kB
55d0c0100000-55d0c0900000 r-xp 00100000 fd:01 100 /usr/bin/quiver
Rss:                5000 kB
55d0c0900000-55d0c0a00000 rw-p 00900000 fd:01 100 /usr/bin/quiver
Rss:                  40 kB
55d0c1000000-55d0c2000000 rw-p 00000000 00:00 0                          [heap]
Rss:                9000 kB
7f0000000000-7f0004000000 r--s 00000000 fd:01 200 /data/graph.qcsr
Rss:               60000 kB
7f0004000000-7f0008000000 rw-p 00000000 00:00 0 
Rss:               30000 kB
7f0010000000-7f0010100000 r-xp 00000000 fd:01 300 /usr/lib/x86_64-linux-gnu/librocksdb.so.7.8.3
Rss:                6000 kB
7f0010100000-7f0010110000 r--p 00100000 fd:01 300 /usr/lib/x86_64-linux-gnu/librocksdb.so.7.8.3
Rss:                  64 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  20 kB
";
        assert_eq!(super::code_kib(smaps), Some(300 + 5000 + 40 + 6000 + 64));
    }

    #[test]
    fn this_process_has_resident_code_within_its_peak() {
        let code = super::code_rss_bytes().expect("Linux has smaps");
        let peak = super::peak_rss_bytes().expect("Linux reports VmHWM");
        assert!(
            code > 0 && code < peak,
            "{code} bytes of code, {peak} resident"
        );
    }
}
