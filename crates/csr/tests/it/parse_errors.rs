//! Bad input names the file, the line or record, and the fault.

use quiver_csr::{convert, ConvertOptions, EdgeFormat, NoProgress, SortOptions};

fn convert_text(
    name: &str,
    text: &[u8],
    options: ConvertOptions,
) -> Result<quiver_csr::ConvertReport, String> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join(name);
    std::fs::write(&input, text).unwrap();
    let out = dir.path().join("out.qcsr");
    let result = convert(&input, &out, &options, &NoProgress).map_err(|e| quiver_run::chain(&e));
    if result.is_err() {
        assert!(!out.exists(), "a failed conversion left {}", out.display());
    }
    result
}

fn expect_error(name: &str, text: &[u8], options: ConvertOptions, needles: &[&str]) {
    let err = convert_text(name, text, options).expect_err("bad input was accepted");
    for needle in needles {
        assert!(err.contains(needle), "error {err:?} lacks {needle:?}");
    }
    assert!(err.contains(name), "error {err:?} does not name the file");
}

#[test]
fn text_errors_name_the_line_and_fault() {
    let o = ConvertOptions::default;
    expect_error("a.txt", b"0 1\n1 x\n", o(), &["line 2", "\"x\""]);
    expect_error("b.txt", b"0 1\n5\n", o(), &["line 2", "source target"]);
    expect_error(
        "c.txt",
        b"# c\n0 4294967295\n",
        o(),
        &["line 2", "4294967295", "--relabel"],
    );
    expect_error(
        "d.txt",
        b"99999999999999999999999 1\n",
        o(),
        &["line 1", "overflows 64 bits"],
    );
    expect_error(
        "e.txt",
        b"0 1 0.5\n1 2\n",
        o(),
        &["line 2", "weight column"],
    );
    expect_error("f.txt", b"0 1 heavy\n", o(), &["line 1", "weight"]);
    expect_error("g.txt", b"0 1 inf\n", o(), &["line 1", "not finite"]);
    expect_error("h.txt", b"-1 2\n", o(), &["line 1", "\"-1\""]);
}

#[test]
fn errors_many_chunks_in_name_their_line() {
    // 20,000 lines (over 200 KB, several of the reader's chunks) before
    // the bad one, with comments among them.
    let lines = |weight: &str| -> Vec<u8> {
        (0..20_000u32)
            .flat_map(|i| match i % 1000 {
                0 => "# progress\n".to_owned().into_bytes(),
                _ => format!("{} {}{weight}\n", i, i + 1).into_bytes(),
            })
            .collect()
    };
    let o = ConvertOptions::default;
    let bad = |mut text: Vec<u8>, line: &[u8]| {
        text.extend_from_slice(line);
        text
    };
    expect_error(
        "x.txt",
        &bad(lines(""), b"1 x\n"),
        o(),
        &["line 20001", "\"x\""],
    );
    expect_error(
        "w.txt",
        &bad(lines(""), b"1 2 0.5\n"),
        o(),
        &["line 20001", "weight column"],
    );
    expect_error(
        "u.txt",
        &bad(lines(" 0.5"), b"1 2\n"),
        o(),
        &["line 20001", "weight column"],
    );
}

#[test]
fn a_line_too_long_is_named_after_the_lines_before_it() {
    // Plain lines fill the first chunks; then a line of over 1 MiB.
    let mut text: Vec<u8> = (0..30_000)
        .flat_map(|i: u32| format!("{} {}\n", i, i + 1).into_bytes())
        .collect();
    text.extend(std::iter::repeat_n(b'7', (1 << 20) + 1));
    text.extend_from_slice(b" 1\n");
    expect_error(
        "long.txt",
        &text,
        ConvertOptions::default(),
        &["line 30001", "longer than"],
    );
}

#[test]
fn ids_that_overflow_u32_are_accepted_only_when_relabelling() {
    let text = b"5000000000 7\n7 12\n";
    assert!(convert_text("s.txt", text, ConvertOptions::default()).is_err());
    let relabel = ConvertOptions {
        sort: SortOptions {
            relabel: true,
            ..SortOptions::default()
        },
        ..ConvertOptions::default()
    };
    let report = convert_text("s.txt", text, relabel).unwrap();
    assert_eq!((report.sort.vertices, report.sort.edges_out), (3, 2));
}

#[test]
fn binary_errors_name_the_record() {
    let bin = ConvertOptions {
        format: Some(EdgeFormat::Bin),
        ..ConvertOptions::default()
    };
    let mut bytes = Vec::new();
    for (s, t) in [(0u32, 1u32), (1, 2)] {
        bytes.extend(s.to_le_bytes());
        bytes.extend(t.to_le_bytes());
    }
    bytes.extend([1, 2, 3]);
    expect_error("e.bin", &bytes, bin.clone(), &["record 2", "3 stray bytes"]);
    let mut reserved = Vec::new();
    reserved.extend(0u32.to_le_bytes());
    reserved.extend(u32::MAX.to_le_bytes());
    expect_error("r.bin", &reserved, bin, &["record 0", "4294967295"]);
    let weighted = ConvertOptions {
        format: Some(EdgeFormat::Bin),
        weighted_binary: true,
        ..ConvertOptions::default()
    };
    let mut nan = Vec::new();
    nan.extend(0u32.to_le_bytes());
    nan.extend(1u32.to_le_bytes());
    nan.extend(f32::NAN.to_le_bytes());
    expect_error("n.bin", &nan, weighted, &["record 0", "not finite"]);
}

#[test]
fn matrix_market_errors() {
    let o = ConvertOptions::default;
    expect_error("a.mtx", b"1 2\n", o(), &["line 1", "banner"]);
    expect_error(
        "b.mtx",
        b"%%MatrixMarket matrix array real general\n",
        o(),
        &["coordinate"],
    );
    expect_error(
        "c.mtx",
        b"%%MatrixMarket matrix coordinate complex general\n",
        o(),
        &["complex"],
    );
    expect_error(
        "d.mtx",
        b"%%MatrixMarket matrix coordinate pattern hermitian\n",
        o(),
        &["hermitian"],
    );
    expect_error(
        "e.mtx",
        b"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n",
        o(),
        &["declares 2", "has 1"],
    );
    expect_error(
        "f.mtx",
        b"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n4 1\n",
        o(),
        &["line 3", "row index"],
    );
    expect_error(
        "g.mtx",
        b"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 0\n",
        o(),
        &["column index"],
    );
    expect_error(
        "h.mtx",
        b"%%MatrixMarket matrix coordinate pattern general\n",
        o(),
        &["size line"],
    );
}

#[test]
fn nonsense_options_are_refused() {
    let tiny = ConvertOptions {
        sort: SortOptions {
            mem_budget: 1000,
            ..SortOptions::default()
        },
        ..ConvertOptions::default()
    };
    let err = convert_text("t.txt", b"0 1\n", tiny).unwrap_err();
    assert!(err.contains("below the minimum"), "{err}");
    let missing = convert(
        std::path::Path::new("/nonexistent/edges.txt"),
        std::path::Path::new("/tmp/never.qcsr"),
        &ConvertOptions::default(),
        &NoProgress,
    )
    .unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/edges.txt"),
        "{missing}"
    );
}

#[test]
fn comments_separators_and_crlf_are_understood() {
    let text = b"# SNAP header\r\n% another\r\n\r\n0\t1\r\n1, 2\r\n  2 0  \r\n";
    let report = convert_text("ok.txt", text, ConvertOptions::default()).unwrap();
    assert_eq!(
        (
            report.sort.vertices,
            report.sort.edges_out,
            report.edges_parsed
        ),
        (3, 3, 3)
    );
}
