//! Byte sizes as people write and read them: `8MiB` in, `8.0 MiB` out.
//! Every Quiver command line (driver, benches, xtask) parses sizes here.

/// Parses `4096`, `64KiB`, `8MiB`, `1GiB`, `1G`, `512M` (binary multiples;
/// `k`/`M`/`G`/`T` with or without `iB`/`B`).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let value: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (try 4096, 64KiB, 8MiB, 1GiB)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {text:?} (use KiB, MiB, GiB or TiB)"
            ))
        }
    };
    value
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("size {text:?} overflows 64 bits"))
}

/// Formats a byte count as `12.3 MiB`.
#[allow(clippy::cast_precision_loss)] // One decimal place is all that is shown.
pub fn format_bytes(bytes: u64) -> String {
    format_byte_amount(bytes as f64)
}

/// Formats a possibly fractional byte amount (a mean) as `12.3 MiB`.
pub fn format_byte_amount(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes:.0} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("8MiB"), Ok(8 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("64 KiB"), Ok(64 << 10));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("3 parsecs").is_err());
        assert!(parse_bytes("99999999999TiB").is_err());
    }

    #[test]
    fn bytes_format_readably() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(3 << 20), "3.0 MiB");
        assert_eq!(format_byte_amount(1536.0), "1.5 KiB");
    }
}
