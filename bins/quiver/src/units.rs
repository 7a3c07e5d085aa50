//! Human units the driver parses and prints beyond byte sizes (which
//! come from `quiver_io::size`).

use quiver_io::size::parse_bytes;

/// A byte size as a flag takes it (`512MiB`), printed exactly in the
/// largest binary unit that divides it, so that a default taken from a
/// library's `Config::default()` shows in `--help` and parses back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl std::fmt::Display for ByteSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const UNITS: [(u32, &str); 4] = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
        match UNITS
            .iter()
            .find(|(shift, _)| self.0 != 0 && self.0.is_multiple_of(1u64 << shift))
        {
            Some((shift, unit)) => write!(f, "{}{unit}", self.0 >> shift),
            None => write!(f, "{}", self.0),
        }
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<ByteSize, String> {
        parse_bytes(text).map(ByteSize)
    }
}

/// This machine's physical memory in bytes (`MemTotal`), if Linux says.
pub fn physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Parses a memory budget (`--mem`): a byte size no larger than this
/// machine's memory, which a budget above would only pretend to bound.
pub fn parse_mem(text: &str) -> Result<u64, String> {
    let bytes = parse_bytes(text)?;
    match physical_memory() {
        Some(physical) if bytes > physical => Err(format!(
            "{} is more than this machine's memory ({}); a budget is what the run may hold",
            quiver_io::size::format_bytes(bytes),
            quiver_io::size::format_bytes(physical)
        )),
        _ => Ok(bytes),
    }
}

/// [`parse_mem`] as a [`ByteSize`].
pub fn parse_mem_size(text: &str) -> Result<ByteSize, String> {
    parse_mem(text).map(ByteSize)
}

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

/// Parses a fraction: `0.05`, or a percentage such as `5%`.
pub fn parse_fraction(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let (number, scale) = match trimmed.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (trimmed, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v / scale)
        .ok_or_else(|| format!("{text:?} is not a fraction (e.g. 0.05 or 5%)"))
}

/// Parses a duration: `500ms`, `30s`, `2m`, or a number of seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let (number, scale_ms) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1e3)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60e3)
    } else {
        (text, 1e3)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 500ms, 30s, 2m)"))?;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("duration {text:?} must be positive"));
    }
    Ok(std::time::Duration::from_secs_f64(value * scale_ms / 1e3))
}

/// A duration as a flag takes it ([`parse_duration`]), printed in whole
/// seconds or milliseconds where it has them, so that a default taken from
/// a library's `Config::default()` shows in `--help` and parses back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span(pub std::time::Duration);

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (nanos, millis) = (self.0.as_nanos(), self.0.as_millis());
        if nanos % 1_000_000_000 == 0 {
            write!(f, "{}s", self.0.as_secs())
        } else if nanos % 1_000_000 == 0 {
            write!(f, "{millis}ms")
        } else {
            write!(f, "{}s", self.0.as_secs_f64())
        }
    }
}

impl std::str::FromStr for Span {
    type Err = String;

    fn from_str(text: &str) -> Result<Span, String> {
        parse_duration(text).map(Span)
    }
}

/// Nanoseconds as seconds, for reports.
#[allow(clippy::cast_precision_loss)] // A time to print, not an exact count.
pub fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The parser of a count that must be at least 1: zero walks, requests
/// or vertices would do nothing, or something else than asked, so clap
/// refuses them (exit 2) naming the flag.
pub fn at_least_one<T>() -> clap::builder::RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::fmt::Display + Send + Sync + 'static,
{
    clap::builder::RangedU64ValueParser::new().range(1..)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_print_in_the_largest_exact_unit_and_parse_back() {
        for (bytes, shown) in [
            (512 << 20, "512MiB"),
            (3072, "3KiB"),
            (1536, "1536"),
            (1000, "1000"),
            (0, "0"),
        ] {
            assert_eq!(ByteSize(bytes).to_string(), shown);
            assert_eq!(shown.parse::<ByteSize>(), Ok(ByteSize(bytes)));
        }
    }

    #[test]
    fn spans_print_in_whole_seconds_or_milliseconds_and_parse_back() {
        for (ms, shown) in [
            (30_000, "30s"),
            (1_000, "1s"),
            (250, "250ms"),
            (1_500, "1500ms"),
        ] {
            let span = Span(std::time::Duration::from_millis(ms));
            assert_eq!(span.to_string(), shown);
            assert_eq!(shown.parse::<Span>(), Ok(span));
        }
    }

    #[test]
    fn ranges_parse_inclusive() {
        assert_eq!(parse_range("1..100"), Ok((1, 100)));
        assert_eq!(parse_range("5..=5"), Ok((5, 5)));
        assert!(parse_range("9..1").is_err());
        assert!(parse_range("1-100").is_err());
    }

    #[test]
    fn fractions_parse_plain_or_as_percentages() {
        assert_eq!(parse_fraction("0.05"), Ok(0.05));
        assert_eq!(parse_fraction("5%"), Ok(0.05));
        assert_eq!(parse_fraction(" 10 % "), Ok(0.1));
        assert!(parse_fraction("five").is_err());
        assert!(parse_fraction("%").is_err());
        assert!(parse_fraction("inf").is_err());
    }

    #[test]
    fn durations_parse_with_units() {
        use std::time::Duration;
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
