//! The process's own memory, as Linux reports it.

/// Peak resident memory of this process (`VmHWM` in `/proc/self/status`),
/// in bytes; `None` where the kernel does not say.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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
}
