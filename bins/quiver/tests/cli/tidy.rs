//! The driver stays thin (ARCHITECTURE.md, "Command-line conventions"): no
//! file of `bins/quiver/src` but `job.rs` starts a process, opens a socket
//! or defines a report. Those belong in the engines' libraries, where
//! Python and xtask reuse them. Comments and string literals are not
//! code, and clap's `Command` is not a process.

use std::path::{Path, PathBuf};

/// The only file of the driver that may start processes and own sockets.
const EXEMPT: &str = "job.rs";

/// What starting a process is called.
const PROCESS: &str = "starts a process (process::Command)";

/// Socket types a file of the driver may not name.
const SOCKETS: [&str; 5] = [
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "UnixStream",
    "UnixListener",
];

#[test]
fn the_driver_starts_no_process_opens_no_socket_and_defines_no_report() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for file in rust_files(&src) {
        if file.file_name().is_some_and(|name| name == EXEMPT) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap();
        for (line, what) in violations(&text) {
            broken.push(format!("{}:{line}: {what}", shown.display()));
        }
    }
    assert!(
        broken.is_empty(),
        "the driver parses flags, calls libraries and prints; move these into the engine's \
         library (reports, servers) or job.rs (processes):\n{}",
        broken.join("\n")
    );
}

/// Every `.rs` file under `dir`, in a stable order.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// What `text` (a Rust file) breaks, by 1-based line: a process started
/// (`process::Command`, or `Command` in a `use std::process::{...}`), a
/// socket type named, a struct named `...Report` or `...Summary`, or a
/// `#[derive(...)]` of `Serialize`.
fn violations(text: &str) -> Vec<(usize, String)> {
    let code = code_only(text);
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    for at in find_all(&code, "process::Command") {
        found.push((line_of(at), PROCESS.to_owned()));
    }
    for socket in SOCKETS {
        for at in words(&code, socket) {
            found.push((line_of(at), format!("opens a socket ({socket})")));
        }
    }
    for at in words(&code, "struct") {
        let name: String = code[at + "struct".len()..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.ends_with("Report") || name.ends_with("Summary") {
            found.push((line_of(at), format!("defines a report (struct {name})")));
        }
    }
    // What a bracketed list names: a `use std::process::{...}` naming
    // `Command`, a `#[derive(...)]` naming `Serialize`.
    let lists = [
        ("process::{", "}", "Command", PROCESS),
        (
            "#[derive(",
            ")]",
            "Serialize",
            "defines a report (derive Serialize)",
        ),
    ];
    for (opens, closes, word, what) in lists {
        for at in find_all(&code, opens) {
            let end = code[at..].find(closes).map_or(code.len(), |end| at + end);
            if !words(&code[at..end], word).is_empty() {
                found.push((line_of(at), what.to_owned()));
            }
        }
    }
    found.sort();
    found
}

/// Where `pattern` starts in `text`.
fn find_all(text: &str, pattern: &str) -> Vec<usize> {
    text.match_indices(pattern).map(|(at, _)| at).collect()
}

/// Where `word` stands alone in `text`, as an identifier (not a part of
/// one: `TcpStreamish` is not `TcpStream`).
fn words(text: &str, word: &str) -> Vec<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    find_all(text, word)
        .into_iter()
        .filter(|&at| {
            !text[..at].chars().next_back().is_some_and(ident)
                && !text[at + word.len()..].chars().next().is_some_and(ident)
        })
        .collect()
}

/// `text` with its comments and the insides of its string and character
/// literals blanked (newlines kept, so lines keep their numbers): what
/// the compiler reads as code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest.
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            // r"...", r#"..."#, br#"..."#: up to the quote and as many #s.
            let open = chars[i..].iter().position(|&c| c == '"').unwrap() + 1;
            out.extend(&chars[i..i + open]);
            i += open;
            while i < chars.len() {
                let closes = chars[i] == '"'
                    && chars[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&c| c == '#')
                        .count()
                        == hashes;
                if closes {
                    out.extend(&chars[i..=i + hashes]);
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let escaped = chars[i] == '\\';
                blank(&mut out, chars[i]);
                i += 1;
                if escaped && i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            if i < chars.len() {
                out.push('"');
                i += 1;
            }
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{1F600}'), not a lifetime.
            out.push('\'');
            i += 1;
            if chars[i] == '\\' {
                // The backslash and the character it escapes ('\'' too).
                out.push_str("  ");
                i += 2;
            }
            while i < chars.len() && chars[i] != '\'' {
                blank(&mut out, chars[i]);
                i += 1;
            }
            if i < chars.len() {
                out.push('\'');
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The number of `#`s of a raw string literal starting at `i` (`r"`,
/// `r#"`, `br##"`...), if one starts there (not inside an identifier).
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    let ident = |c: &char| c.is_alphanumeric() || *c == '_';
    if i > 0 && ident(&chars[i - 1]) {
        return None;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    (chars.get(j + hashes) == Some(&'"')).then_some(hashes)
}

#[test]
fn the_scanner_finds_each_forbidden_thing_and_nothing_else() {
    let sample = r##"//! A driver module. A comment may say std::process::Command, TcpStream
//! or struct FooReport freely.
use std::process::{Child, Command};
use std::process::Stdio;
use clap::Command as ClapCommand;

/* A block comment: struct BlockReport, UdpSocket, /* nested: TcpListener */ */
#[derive(Debug, Clone,
    serde::Serialize)]
struct RunSummary {
    on: String,
}

#[derive(Debug)]
struct GetReport<'a>(&'a str);

struct Reported;

fn start() {
    let _ = std::process::Command::new("kv");
    let _ = tokio::net::TcpListener::bind("127.0.0.1:0");
    let _ = "a string naming UnixStream and process::Command";
    let _ = r#"a raw string: "struct QueryReport", UnixListener"#;
    let _ = '"';
    let quote = '\'';
    let stream: std::os::unix::net::UnixStream;
    let _ = clap::Command::new("quiver").subcommand(clap::Command::new("x"));
    let _ = TcpStreamish;
}

#[cfg(test)]
mod tests {
    #[test]
    fn clap_commands_are_not_processes() {
        let _ = clap::Command::new("quiver");
        let _ = std::net::UdpSocket::bind("127.0.0.1:0");
    }
}
"##;
    let found = violations(sample);
    let found: Vec<(usize, &str)> = found
        .iter()
        .map(|(line, what)| (*line, what.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (3, "starts a process (process::Command)"),
            (8, "defines a report (derive Serialize)"),
            (10, "defines a report (struct RunSummary)"),
            (15, "defines a report (struct GetReport)"),
            (20, "starts a process (process::Command)"),
            (21, "opens a socket (TcpListener)"),
            (26, "opens a socket (UnixStream)"),
            (36, "opens a socket (UdpSocket)"),
        ]
    );
}
