//! Human units the driver parses and prints beyond byte sizes (which
//! come from `quiver_io::size`).

/// Parses an inclusive weight range `LO..HI` (or `LO..=HI`).
pub fn parse_range(text: &str) -> Result<(u32, u32), String> {
    let (lo, hi) = text
        .split_once("..")
        .ok_or_else(|| format!("{text:?} is not a range (expected LO..HI, e.g. 1..100)"))?;
    let hi = hi.strip_prefix('=').unwrap_or(hi);
    let parse = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("{s:?} in {text:?} is not a whole number"))
    };
    let (lo, hi) = (parse(lo)?, parse(hi)?);
    if lo > hi {
        return Err(format!("range {text:?} is empty"));
    }
    Ok((lo, hi))
}

/// Peak resident memory of this process (VmHWM), in bytes, where Linux says.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_inclusive() {
        assert_eq!(parse_range("1..100"), Ok((1, 100)));
        assert_eq!(parse_range("5..=5"), Ok((5, 5)));
        assert!(parse_range("9..1").is_err());
        assert!(parse_range("1-100").is_err());
    }
}
