//! Parsers for the edge-list formats users bring: SNAP-style text (and
//! LDBC Graphalytics `.e` files, text whose ids are listed in a `.v` file),
//! binary little-endian `u32` pairs or `(u32, u32, f32)` triples, and Matrix
//! Market coordinate files. Each calls a sink once per edge and reports
//! errors with the input's name and the line or record.

use std::io::Read;
use std::path::Path;
use std::sync::mpsc;

use crate::sort::MAX_VERTEX_ID;
use crate::{Error, Progress, Result};

/// Receives each parsed edge `(source, target, weight)`; the weight is
/// `None` for an input without weights.
pub type EdgeSink<'a> = dyn FnMut(u64, u64, Option<f32>) -> Result<()> + 'a;

/// Bytes read at a time.
const CHUNK: usize = 64 << 10;
/// Longest line accepted; a longer one is an error, not a memory blow-up.
const MAX_LINE: usize = 1 << 20;
/// The most memory a reader of text holds at once: two chunks in flight
/// (one being read ahead, one being handed over), each with the edges of
/// its plain lines (16 bytes for each line of at least 4 bytes). A line
/// longer than a chunk grows its chunk for as long as it is read.
pub(crate) const READ_AHEAD_BYTES: usize = 2 * (CHUNK + (CHUNK / 4 + 1) * 16);

/// What a parser saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseSummary {
    /// Bytes of (decompressed) input.
    pub bytes: u64,
    /// Edges passed to the sink.
    pub edges: u64,
    /// Whether the input carried weights.
    pub weighted: bool,
    /// Vertex count the input declares (Matrix Market), else 0.
    pub declared_vertices: u64,
}

/// What the ids of a text edge list are.
#[derive(Clone, Copy, Debug)]
pub enum TextIds<'a> {
    /// Vertex ids already: each at most [`MAX_VERTEX_ID`].
    Dense,
    /// Any `u64`, for the sorter to relabel.
    Relabel,
    /// LDBC Graphalytics: the ids listed in the vertex file `file`, sorted
    /// ascending and distinct; an id's vertex is its index in `ids`. An id
    /// not listed is an error, and so is a line of more than three fields.
    Listed {
        /// The vertex ids, sorted ascending, distinct.
        ids: &'a [u64],
        /// The vertex file they came from, for messages.
        file: &'a Path,
    },
}

struct Ctx<'a> {
    name: &'a Path,
    ids: TextIds<'a>,
}

impl Ctx<'_> {
    fn error(&self, location: String, detail: String) -> Error {
        Error::Parse {
            path: self.name.to_owned(),
            location,
            detail,
        }
    }

    fn line_error(&self, line: u64, detail: String) -> Error {
        self.error(format!("line {line}"), detail)
    }
}

/// Calls `f(line_number, line)` for every line of `reader` (without its
/// `\n` or `\r\n`), reading in fixed-size chunks.
fn for_each_line(
    reader: &mut dyn Read,
    name: &Path,
    progress: &dyn Progress,
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<u64> {
    let mut line_no = 0u64;
    for_each_chunk(
        reader,
        name,
        progress,
        |_| (),
        |mut lines, ()| {
            let first = line_no;
            while !lines.is_empty() {
                let (line, used) = next_line(lines);
                line_no += 1;
                f(line_no, line)?;
                lines = &lines[used..];
            }
            Ok(line_no - first)
        },
    )
}

/// The first line of `lines` (without its `\n` or `\r\n`) and the bytes
/// it takes with its end.
#[inline]
fn next_line(lines: &[u8]) -> (&[u8], usize) {
    let (line, used) = match memchr::memchr(b'\n', lines) {
        Some(i) => (&lines[..i], i + 1),
        None => (lines, lines.len()),
    };
    (line.strip_suffix(b"\r").unwrap_or(line), used)
}

/// Calls `f(lines, prepare(lines))` with every run of whole lines of
/// `reader` (the last may lack its `\n`), read in chunks of [`CHUNK`]
/// bytes. `prepare` runs on a thread of its own, a chunk ahead: reading,
/// preparing a chunk and handing the last to `f` overlap. `f` returns how
/// many lines it was given, for the message about a line too long.
/// Returns the bytes read. Every chunk read before a fault (a line too
/// long, a read that fails) reaches `f` first, so an error in an earlier
/// line is the one reported.
fn for_each_chunk<P: Send>(
    reader: &mut dyn Read,
    name: &Path,
    progress: &dyn Progress,
    prepare: impl Fn(&[u8]) -> P + Sync,
    mut f: impl FnMut(&[u8], P) -> Result<u64>,
) -> Result<u64> {
    let prepare = &prepare;
    std::thread::scope(|scope| {
        let (to_helper, chunks) = mpsc::sync_channel::<Vec<u8>>(1);
        let (to_caller, prepared) = mpsc::sync_channel::<(Vec<u8>, P)>(1);
        scope.spawn(move || {
            for chunk in chunks {
                let ready = prepare(&chunk);
                if to_caller.send((chunk, ready)).is_err() {
                    return; // the caller stopped at an error
                }
            }
        });
        let mut input = LineReader {
            reader,
            name,
            progress,
            carry: Vec::new(),
            ended: false,
            failed: None,
            total: 0,
        };
        let mut lines_done = 0u64;
        let mut spare = Vec::new();
        let mut in_flight = 0;
        loop {
            let stop = match input.next(spare.pop()) {
                Ok(Filled::Lines(chunk)) => {
                    to_helper
                        .send(chunk)
                        .expect("the helper runs until its channel closes");
                    in_flight += 1;
                    None
                }
                stop => Some(stop),
            };
            // Keep one chunk being prepared while the last is handled; at
            // the end, or at a fault, hand over every chunk before.
            while in_flight > usize::from(stop.is_none()) {
                let (chunk, ready) = prepared
                    .recv()
                    .expect("the helper answers every chunk it is sent");
                in_flight -= 1;
                lines_done += f(&chunk, ready)?;
                // A chunk grown for a long line is not kept.
                if chunk.capacity() <= CHUNK {
                    spare.push(chunk);
                }
            }
            match stop {
                None => {}
                Some(Ok(Filled::LineTooLong)) => {
                    return Err(Error::Parse {
                        path: name.to_owned(),
                        location: format!("line {}", lines_done + 1),
                        detail: format!("line is longer than {MAX_LINE} bytes"),
                    })
                }
                Some(Ok(_)) => return Ok(input.total),
                Some(Err(error)) => return Err(error),
            }
        }
    })
}

/// What [`LineReader::next`] read.
enum Filled {
    /// Whole lines (the last line of the input may lack its `\n`).
    Lines(Vec<u8>),
    /// The end of the input, with nothing left.
    End,
    /// [`MAX_LINE`] bytes without a line end.
    LineTooLong,
}

/// Input read as runs of whole lines.
struct LineReader<'a> {
    reader: &'a mut dyn Read,
    name: &'a Path,
    progress: &'a dyn Progress,
    /// The partial line the last run left.
    carry: Vec<u8>,
    /// Whether the reader has said it has no more.
    ended: bool,
    /// A read that failed after whole lines were read: reported once
    /// they are handed over, so that a fault in them is named first.
    failed: Option<Error>,
    /// Bytes read.
    total: u64,
}

impl LineReader<'_> {
    /// The next run of whole lines: the partial line the last run left,
    /// then input up to [`CHUNK`] bytes in all (into `buf`, a spent
    /// chunk's allocation, if given), whose own partial last line is kept
    /// for the next run. A chunk without a line end doubles, up to
    /// [`MAX_LINE`].
    fn next(&mut self, buf: Option<Vec<u8>>) -> Result<Filled> {
        if let Some(error) = self.failed.take() {
            return Err(error);
        }
        if self.ended {
            return Ok(Filled::End);
        }
        let mut buf = buf.unwrap_or_default();
        buf.clear();
        buf.append(&mut self.carry);
        let mut filled = buf.len();
        let mut size = CHUNK;
        while size <= filled {
            size *= 2;
        }
        buf.resize(size, 0);
        loop {
            while filled < size {
                let n = match read_some(self.reader, &mut buf[filled..], self.name) {
                    Ok(n) => n,
                    Err(error) => match memchr::memrchr(b'\n', &buf[..filled]) {
                        Some(last) => {
                            self.failed = Some(error);
                            buf.truncate(last + 1);
                            return Ok(Filled::Lines(buf));
                        }
                        None => return Err(error),
                    },
                };
                self.total += n as u64;
                self.progress.advance(n as u64);
                self.progress.check()?;
                if n == 0 {
                    self.ended = true;
                    buf.truncate(filled);
                    return Ok(if buf.is_empty() {
                        Filled::End
                    } else {
                        Filled::Lines(buf)
                    });
                }
                filled += n;
            }
            if let Some(last) = memchr::memrchr(b'\n', &buf) {
                self.carry.extend_from_slice(&buf[last + 1..]);
                buf.truncate(last + 1);
                return Ok(Filled::Lines(buf));
            }
            if size >= MAX_LINE {
                return Ok(Filled::LineTooLong);
            }
            size *= 2;
            buf.resize(size, 0);
        }
    }
}

fn read_some(reader: &mut dyn Read, buf: &mut [u8], name: &Path) -> Result<usize> {
    loop {
        match reader.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(Error::Read {
                    path: name.to_owned(),
                    source,
                })
            }
        }
    }
}

fn is_separator(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b',')
}

/// Splits a line into at most `N` fields; returns the number of fields found
/// (which may exceed `N`: extra fields are counted, not stored).
fn split_fields<'l, const N: usize>(line: &'l [u8], fields: &mut [&'l [u8]; N]) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && is_separator(line[i]) {
            i += 1;
        }
        if i == line.len() {
            break;
        }
        let start = i;
        while i < line.len() && !is_separator(line[i]) {
            i += 1;
        }
        if count < N {
            fields[count] = &line[start..i];
        }
        count += 1;
    }
    count
}

#[inline]
fn parse_u64(field: &[u8]) -> Option<u64> {
    if field.is_empty() {
        return None;
    }
    let mut value = 0u64;
    for &b in field {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(digit))?;
    }
    Some(value)
}

fn show(field: &[u8]) -> String {
    String::from_utf8_lossy(field).into_owned()
}

/// The line at the start of `lines` when it is exactly `digits separators
/// digits` and its end (`\n`, `\r\n` or the end of `lines`): its two
/// numbers and the bytes it takes with its end, read in one pass. `None`
/// for any other line, and for a number that overflows 64 bits.
#[inline]
fn plain_line(lines: &[u8]) -> Option<(u64, u64, usize)> {
    let (first, i) = number_at(lines, 0)?;
    let mut j = i;
    while lines.get(j).copied().is_some_and(is_separator) {
        j += 1;
    }
    if j == i {
        return None;
    }
    let (second, k) = number_at(lines, j)?;
    let used = match lines.get(k..k + 2) {
        None if k == lines.len() => k,
        _ if lines[k] == b'\n' => k + 1,
        Some(b"\r\n") => k + 2,
        _ => return None,
    };
    Some((first, second, used))
}

/// The number the digits of `bytes` from `start` spell (at least one), and
/// where they end; `None` on overflow.
#[inline]
fn number_at(bytes: &[u8], start: usize) -> Option<(u64, usize)> {
    // Up to 7 digits followed by anything, eight bytes at a time: no
    // branch per digit. Longer numbers, and the last bytes of the input,
    // go digit by digit.
    if let Some(word) = bytes.get(start..start + 8) {
        let word = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let digits = leading_digits(word);
        if digits == 0 {
            return None;
        }
        if digits < 8 {
            return Some((eight_digits(word << (64 - 8 * digits)), start + digits));
        }
    }
    let mut value = 0u64;
    let mut i = start;
    while let Some(digit) = bytes
        .get(i)
        .map(|b| b.wrapping_sub(b'0'))
        .filter(|&d| d <= 9)
    {
        value = value.checked_mul(10)?.checked_add(u64::from(digit))?;
        i += 1;
    }
    (i > start).then_some((value, i))
}

/// How many of `word`'s bytes, from its lowest (the first read), are ASCII
/// digits before the first that is not (8 if all are).
#[inline]
fn leading_digits(word: u64) -> usize {
    // A byte is a digit when its high nibble is 3 and its low nibble plus
    // 6 stays below 16; `other` is non-zero in every other byte. No sum
    // carries into the next byte.
    let high = (word & 0xF0F0_F0F0_F0F0_F0F0) ^ 0x3030_3030_3030_3030;
    let low = ((word & 0x0F0F_0F0F_0F0F_0F0F) + 0x0606_0606_0606_0606) & 0x1010_1010_1010_1010;
    let other = high | low;
    // The top bit of each byte of `other` that is not zero.
    let marked =
        (((other & 0x7F7F_7F7F_7F7F_7F7F) + 0x7F7F_7F7F_7F7F_7F7F) | other) & 0x8080_8080_8080_8080;
    (marked.trailing_zeros() / 8) as usize
}

/// The number eight ASCII digits spell, the first in the lowest byte
/// (leading `'0'` bytes, or zero bytes, add nothing).
#[inline]
fn eight_digits(word: u64) -> u64 {
    // Pairs, then fours, then all eight: each step multiplies the higher
    // half of a field by the power of ten of the lower half's width.
    let word = word & 0x0F0F_0F0F_0F0F_0F0F;
    // (The products' bits above each field are dropped: they wrap.)
    let pairs = (word.wrapping_mul((10 << 8) | 1) >> 8) & 0x00FF_00FF_00FF_00FF;
    let fours = (pairs.wrapping_mul((100 << 16) | 1) >> 16) & 0x0000_FFFF_0000_FFFF;
    fours.wrapping_mul((10_000 << 32) | 1) >> 32
}

#[inline]
fn parse_id(ctx: &Ctx<'_>, field: &[u8], line: u64) -> Result<u64> {
    parse_u64(field)
        .and_then(|id| vertex_of(ctx.ids, id))
        .ok_or_else(|| id_error(ctx, field, line))
}

/// The vertex that the id `id` names, if it is an acceptable id.
#[inline]
fn vertex_of(ids: TextIds<'_>, id: u64) -> Option<u64> {
    match ids {
        TextIds::Dense => (id <= MAX_VERTEX_ID).then_some(id),
        TextIds::Relabel => Some(id),
        TextIds::Listed { ids, .. } => ids.binary_search(&id).ok().map(|v| v as u64),
    }
}

/// Says why `field` is not an acceptable vertex id (kept out of the hot path).
#[cold]
#[inline(never)]
fn id_error(ctx: &Ctx<'_>, field: &[u8], line: u64) -> Error {
    let detail = match (parse_u64(field), ctx.ids) {
        (Some(id), TextIds::Listed { file, .. }) => {
            format!("vertex id {id} is not listed in {}", file.display())
        }
        (Some(id), _) => format!(
            "vertex id {id} does not fit a u32 vertex id (at most {MAX_VERTEX_ID}); \
             convert with --relabel to map sparse ids onto 0..|V|"
        ),
        (None, _) if !field.is_empty() && field.iter().all(u8::is_ascii_digit) => {
            format!("vertex id {} overflows 64 bits", show(field))
        }
        (None, _) => format!(
            "expected a non-negative integer vertex id, found {:?}",
            show(field)
        ),
    };
    ctx.line_error(line, detail)
}

fn parse_weight(ctx: &Ctx<'_>, field: &[u8], line: u64) -> Result<f32> {
    let weight = std::str::from_utf8(field)
        .ok()
        .and_then(|s| s.parse::<f32>().ok())
        .ok_or_else(|| {
            ctx.line_error(line, format!("expected a weight, found {:?}", show(field)))
        })?;
    if !weight.is_finite() {
        return Err(ctx.line_error(line, format!("weight {weight} is not finite")));
    }
    Ok(weight)
}

fn is_comment_or_blank(line: &[u8]) -> bool {
    match line.iter().find(|&&b| !is_separator(b)) {
        None => true,
        Some(&b) => b == b'#' || b == b'%',
    }
}

/// Parses a SNAP-style edge list: one `source target [weight]` per line,
/// separated by spaces, tabs or commas; `#` and `%` start comment lines; CRLF
/// line ends are accepted. The first edge line decides whether the file has a
/// weight column, and every later line must agree. `ids` says what the ids
/// are; the sink receives vertex ids (for [`TextIds::Listed`], indices into
/// the list).
pub fn parse_text(
    reader: &mut dyn Read,
    name: &Path,
    ids: TextIds<'_>,
    progress: &dyn Progress,
    sink: &mut EdgeSink<'_>,
) -> Result<ParseSummary> {
    let ctx = Ctx { name, ids };
    let max_fields = match ids {
        TextIds::Listed { .. } => 3,
        TextIds::Dense | TextIds::Relabel => usize::MAX,
    };
    let mut columns: Option<usize> = None;
    let mut edges = 0u64;
    let mut line_no = 0u64;
    // The plain lines are read a chunk ahead, on another thread; the sink
    // takes their edges in order here.
    let plain = |lines: &[u8]| PlainPrefix::of(lines, ids);
    let bytes = for_each_chunk(reader, name, progress, plain, |mut lines, prefix| {
        let first = line_no;
        // A file whose first edge line has a weight column has no plain
        // lines: the line-by-line reading below names the one that is.
        if columns.is_none_or(|c| c == 2) {
            if !prefix.edges.is_empty() {
                columns = Some(2);
            }
            for &(src, dst) in &prefix.edges {
                sink(src, dst, None)?;
            }
            edges += prefix.edges.len() as u64;
            line_no += prefix.lines;
            lines = &lines[prefix.bytes..];
        }
        while !lines.is_empty() {
            line_no += 1;
            if columns.is_none_or(|c| c == 2) {
                if let Some((src, dst, used)) = plain_edge(lines, ids) {
                    columns = Some(2);
                    edges += 1;
                    sink(src, dst, None)?;
                    lines = &lines[used..];
                    continue;
                }
            }
            let (line, used) = next_line(lines);
            if let Some((src, dst, weight)) =
                edge_of_line(&ctx, max_fields, line_no, line, &mut columns)?
            {
                edges += 1;
                sink(src, dst, weight)?;
            }
            lines = &lines[used..];
        }
        Ok(line_no - first)
    })?;
    Ok(ParseSummary {
        bytes,
        edges,
        weighted: columns.is_some_and(|c| c >= 3),
        declared_vertices: 0,
    })
}

/// The edge of a first line of `lines` that is two ids alone (read in one
/// pass by [`plain_line`]), as vertices, and the bytes it takes.
#[inline]
fn plain_edge(lines: &[u8], ids: TextIds<'_>) -> Option<(u64, u64, usize)> {
    let (src, dst, used) = plain_line(lines)?;
    Some((vertex_of(ids, src)?, vertex_of(ids, dst)?, used))
}

/// The edges of a run of lines up to the first that is neither two ids
/// alone (read in one pass by [`plain_line`]) nor a comment or blank: for
/// a plain edge list, the whole run.
struct PlainPrefix {
    edges: Vec<(u64, u64)>,
    /// Lines read, comments and blanks included.
    lines: u64,
    /// Bytes read: the rest of the run starts at the first line not taken.
    bytes: usize,
}

impl PlainPrefix {
    fn of(lines: &[u8], ids: TextIds<'_>) -> PlainPrefix {
        let mut prefix = PlainPrefix {
            // As many as a chunk's lines can hold: the vector grows only
            // in a chunk grown for a long line.
            edges: Vec::with_capacity(lines.len().min(CHUNK) / 4 + 1),
            lines: 0,
            bytes: 0,
        };
        while prefix.bytes < lines.len() {
            let rest = &lines[prefix.bytes..];
            let used = match plain_edge(rest, ids) {
                Some((src, dst, used)) => {
                    prefix.edges.push((src, dst));
                    used
                }
                None => match next_line(rest) {
                    (line, used) if is_comment_or_blank(line) => used,
                    _ => break,
                },
            };
            prefix.lines += 1;
            prefix.bytes += used;
        }
        prefix
    }
}

/// The edge of a line [`parse_text`] does not read in one pass (comments,
/// weights, blanks, errors), if it has one; the first edge line sets
/// `columns`, and every later one must agree.
fn edge_of_line(
    ctx: &Ctx<'_>,
    max_fields: usize,
    line_no: u64,
    line: &[u8],
    columns: &mut Option<usize>,
) -> Result<Option<(u64, u64, Option<f32>)>> {
    if is_comment_or_blank(line) {
        return Ok(None);
    }
    let mut fields: [&[u8]; 3] = [&[]; 3];
    let count = split_fields(line, &mut fields);
    if count < 2 || count > max_fields {
        return Err(ctx.line_error(
            line_no,
            format!("expected 'source target [weight]', found {:?}", show(line)),
        ));
    }
    let weighted = count >= 3;
    match *columns {
        None => *columns = Some(count),
        Some(c) if (c >= 3) != weighted => {
            return Err(ctx.line_error(
                line_no,
                format!(
                    "has {count} columns but the first edge line had {c}: \
                     either every line has a weight column or none does"
                ),
            ))
        }
        Some(_) => {}
    }
    let src = parse_id(ctx, fields[0], line_no)?;
    let dst = parse_id(ctx, fields[1], line_no)?;
    let weight = if weighted {
        Some(parse_weight(ctx, fields[2], line_no)?)
    } else {
        None
    };
    Ok(Some((src, dst, weight)))
}

/// Parses a binary edge list of little-endian `u32` pairs, or of
/// `(u32, u32, f32)` triples when `weighted` (the files Gemini and KnightKing
/// read).
pub fn parse_binary(
    reader: &mut dyn Read,
    name: &Path,
    weighted: bool,
    progress: &dyn Progress,
    sink: &mut EdgeSink<'_>,
) -> Result<ParseSummary> {
    let ctx = Ctx {
        name,
        ids: TextIds::Dense,
    };
    let record = if weighted { 12 } else { 8 };
    let mut buf = vec![0u8; CHUNK / record * record];
    let mut filled = 0;
    let mut summary = ParseSummary {
        weighted,
        ..ParseSummary::default()
    };
    loop {
        let n = read_some(reader, &mut buf[filled..], name)?;
        progress.advance(n as u64);
        progress.check()?;
        summary.bytes += n as u64;
        filled += n;
        let whole = filled / record * record;
        for rec in buf[..whole].chunks_exact(record) {
            let word = |i: usize| u32::from_le_bytes(rec[i..i + 4].try_into().expect("4 bytes"));
            let index = summary.edges;
            let check = |id: u32| {
                if u64::from(id) > MAX_VERTEX_ID {
                    Err(ctx.error(
                        format!("record {index}"),
                        format!("vertex id {id} is reserved (ids go up to {MAX_VERTEX_ID})"),
                    ))
                } else {
                    Ok(u64::from(id))
                }
            };
            let (src, dst) = (check(word(0))?, check(word(4))?);
            let weight = weighted.then(|| f32::from_bits(word(8)));
            if let Some(weight) = weight.filter(|w| !w.is_finite()) {
                return Err(ctx.error(
                    format!("record {index}"),
                    format!("weight {weight} is not finite"),
                ));
            }
            summary.edges += 1;
            sink(src, dst, weight)?;
        }
        buf.copy_within(whole..filled, 0);
        filled -= whole;
        if n == 0 {
            if filled != 0 {
                return Err(ctx.error(
                    format!("record {}", summary.edges),
                    format!(
                        "input ends with {filled} stray bytes: a {} file is a sequence of {record}-byte records",
                        if weighted { "weighted binary" } else { "binary" }
                    ),
                ));
            }
            return Ok(summary);
        }
    }
}

/// Parses an LDBC Graphalytics vertex file: one id (any `u64`) per line;
/// blank and comment lines are skipped as in text edge lists. Returns the
/// ids in file order.
pub fn parse_vertex_ids(
    reader: &mut dyn Read,
    name: &Path,
    progress: &dyn Progress,
) -> Result<Vec<u64>> {
    let ctx = Ctx {
        name,
        ids: TextIds::Relabel,
    };
    let mut ids = Vec::new();
    for_each_line(reader, name, progress, |line_no, line| {
        if is_comment_or_blank(line) {
            return Ok(());
        }
        let mut fields: [&[u8]; 1] = [&[]];
        if split_fields(line, &mut fields) != 1 {
            return Err(ctx.line_error(
                line_no,
                format!("expected one vertex id, found {:?}", show(line)),
            ));
        }
        ids.push(parse_id(&ctx, fields[0], line_no)?);
        Ok(())
    })?;
    Ok(ids)
}

/// Parses a Matrix Market coordinate file (`pattern`, `real` or `integer`;
/// `general` or `symmetric`). Entry `(i, j)` becomes edge `i-1 -> j-1`; a
/// symmetric file also yields `j-1 -> i-1` for off-diagonal entries. |V| is
/// the larger dimension.
pub fn parse_matrix_market(
    reader: &mut dyn Read,
    name: &Path,
    progress: &dyn Progress,
    sink: &mut EdgeSink<'_>,
) -> Result<ParseSummary> {
    let ctx = Ctx {
        name,
        ids: TextIds::Dense,
    };
    #[derive(PartialEq)]
    enum State {
        Banner,
        Size,
        Entries,
    }
    let mut state = State::Banner;
    let (mut weighted, mut symmetric) = (false, false);
    let (mut rows, mut cols, mut nnz) = (0u64, 0u64, 0u64);
    let mut entries = 0u64;
    let mut edges = 0u64;
    let bytes = for_each_line(reader, name, progress, |line_no, line| {
        match state {
            State::Banner => {
                let text = String::from_utf8_lossy(line).to_ascii_lowercase();
                let words: Vec<&str> = text.split_whitespace().collect();
                if words.first() != Some(&"%%matrixmarket") {
                    return Err(ctx.line_error(
                        line_no,
                        "a Matrix Market file starts with a '%%MatrixMarket matrix coordinate ...' banner".into(),
                    ));
                }
                if words.len() != 5 || words[1] != "matrix" || words[2] != "coordinate" {
                    return Err(ctx.line_error(
                        line_no,
                        format!("unsupported banner {text:?}: only 'matrix coordinate' files hold graphs"),
                    ));
                }
                weighted = match words[3] {
                    "pattern" => false,
                    "real" | "integer" | "double" => true,
                    other => {
                        return Err(
                            ctx.line_error(line_no, format!("unsupported field type {other:?}"))
                        )
                    }
                };
                symmetric = match words[4] {
                    "general" => false,
                    "symmetric" => true,
                    other => {
                        return Err(ctx.line_error(
                            line_no,
                            format!("unsupported symmetry {other:?} (general and symmetric are)"),
                        ))
                    }
                };
                state = State::Size;
            }
            _ if is_comment_or_blank(line) => {}
            State::Size => {
                let mut f: [&[u8]; 3] = [&[]; 3];
                if split_fields(line, &mut f) != 3 {
                    return Err(ctx.line_error(
                        line_no,
                        "expected the size line 'rows columns entries'".into(),
                    ));
                }
                let num = |field: &[u8]| {
                    parse_u64(field).ok_or_else(|| {
                        ctx.line_error(
                            line_no,
                            format!("expected a count, found {:?}", show(field)),
                        )
                    })
                };
                (rows, cols, nnz) = (num(f[0])?, num(f[1])?, num(f[2])?);
                if rows.max(cols) > MAX_VERTEX_ID + 1 {
                    return Err(ctx.line_error(
                        line_no,
                        format!(
                            "dimension {} exceeds the u32 vertex id space",
                            rows.max(cols)
                        ),
                    ));
                }
                state = State::Entries;
            }
            State::Entries => {
                let mut f: [&[u8]; 3] = [&[]; 3];
                let count = split_fields(line, &mut f);
                if count != if weighted { 3 } else { 2 } {
                    return Err(ctx.line_error(
                        line_no,
                        format!(
                            "expected {} fields per entry, found {count}",
                            if weighted { 3 } else { 2 }
                        ),
                    ));
                }
                entries += 1;
                if entries > nnz {
                    return Err(
                        ctx.line_error(line_no, format!("more entries than the {nnz} declared"))
                    );
                }
                let index = |field: &[u8], dim: u64, what: &str| -> Result<u64> {
                    match parse_u64(field) {
                        Some(i) if (1..=dim).contains(&i) => Ok(i - 1),
                        _ => Err(ctx.line_error(
                            line_no,
                            format!("{what} index {:?} is outside 1..={dim}", show(field)),
                        )),
                    }
                };
                let i = index(f[0], rows, "row")?;
                let j = index(f[1], cols, "column")?;
                let weight = if weighted {
                    Some(parse_weight(&ctx, f[2], line_no)?)
                } else {
                    None
                };
                edges += 1;
                sink(i, j, weight)?;
                if symmetric && i != j {
                    edges += 1;
                    sink(j, i, weight)?;
                }
            }
        }
        Ok(())
    })?;
    if state != State::Entries {
        return Err(ctx.error(
            "end of input".into(),
            "missing the banner or the size line".into(),
        ));
    }
    if entries != nnz {
        return Err(ctx.error(
            "end of input".into(),
            format!("the size line declares {nnz} entries but the file has {entries}"),
        ));
    }
    Ok(ParseSummary {
        bytes,
        edges,
        weighted,
        declared_vertices: rows.max(cols),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// A number is read as `str::parse` reads its digits, however long,
        /// wherever it starts and whatever follows it.
        #[test]
        fn number_at_reads_what_str_parse_reads(
            lead in "[0-9 x]{0,3}",
            digits in "[0-9]{0,24}",
            rest in "[^0-9]{0,10}",
        ) {
            let text = format!("{lead}{digits}{rest}");
            let start = lead.len();
            let end = start + digits.len();
            let expected = digits.parse::<u64>().ok().map(|value| (value, end));
            prop_assert_eq!(number_at(text.as_bytes(), start), expected);
        }

        /// A text of many chunks reads as its lines say, one by one, with
        /// comments, blanks and lines only the general path takes (leading
        /// separators, CRLF) anywhere, chunks cut mid-line.
        #[test]
        fn text_of_many_chunks_reads_line_by_line(
            lines in prop::collection::vec(
                prop_oneof![
                    8 => (0u64..1 << 33, 0u64..1000).prop_map(|(s, d)| format!("{s} {d}")),
                    1 => (0u64..100, 0u64..100).prop_map(|(s, d)| format!(" {s}\t{d}\r")),
                    1 => Just("# a comment".to_owned()),
                    1 => Just(String::new()),
                ],
                CHUNK / 6..CHUNK / 3,
            ),
        ) {
            let text = lines.join("\n");
            let expected: Vec<(u64, u64)> = lines
                .iter()
                .filter(|line| !is_comment_or_blank(line.as_bytes()))
                .map(|line| {
                    let mut ids = line.split_ascii_whitespace().map(|f| f.parse::<u64>().unwrap());
                    (ids.next().unwrap(), ids.next().unwrap())
                })
                .collect();
            let mut read = Vec::new();
            let summary = parse_text(
                &mut text.as_bytes(),
                Path::new("many.txt"),
                TextIds::Relabel,
                &crate::NoProgress,
                &mut |s, d, w| {
                    assert_eq!(w, None);
                    read.push((s, d));
                    Ok(())
                },
            )
            .unwrap();
            prop_assert!(text.len() > 2 * CHUNK, "{} bytes is one or two chunks", text.len());
            prop_assert_eq!(summary.edges, expected.len() as u64);
            prop_assert_eq!(summary.bytes, text.len() as u64);
            prop_assert!(read == expected, "edges read differ from the lines'");
        }
    }

    proptest! {
        /// The one-pass reading of a two-id line agrees with the general
        /// path's fields and line end, on text of digits, separators, line
        /// ends and other bytes that lines may hold (it may decline a line,
        /// never misread one).
        #[test]
        fn plain_line_reads_what_the_fields_say(
            pieces in prop::collection::vec(
                prop_oneof![
                    4 => "[0-9]{1,3}",
                    2 => Just(" ".to_owned()),
                    1 => Just("\t".to_owned()),
                    1 => Just("\r\n".to_owned()),
                    1 => Just("\n".to_owned()),
                    1 => Just("\r".to_owned()),
                    1 => "[,#%.x-]",
                ],
                0..12,
            ),
        ) {
            let text = pieces.concat().into_bytes();
            let (line, used) = next_line(&text);
            let mut fields: [&[u8]; 3] = [&[]; 3];
            let count = split_fields(line, &mut fields);
            let general = (count == 2)
                .then(|| Some((parse_u64(fields[0])?, parse_u64(fields[1])?)))
                .flatten();
            match plain_line(&text) {
                Some((first, second, taken)) => {
                    prop_assert_eq!(Some((first, second)), general);
                    prop_assert_eq!(taken, used);
                }
                // Declined: leading or trailing separators, a last line
                // ending in a lone `\r`, or not two ids.
                None => prop_assert!(
                    general.is_none()
                        || is_separator(line[0])
                        || is_separator(line[line.len() - 1])
                        || text[..used].ends_with(b"\r")
                ),
            }
        }
    }

    /// Input from a reader that fails after `text`, or ends and must not
    /// be read again.
    struct Scripted {
        text: Vec<u8>,
        at: usize,
        fail: bool,
        ended: bool,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            assert!(!self.ended, "read again after it said it had no more");
            let n = buf.len().min(self.text.len() - self.at).min(1000);
            if n == 0 && self.fail {
                return Err(std::io::Error::other("the disk went away"));
            }
            buf[..n].copy_from_slice(&self.text[self.at..self.at + n]);
            self.at += n;
            self.ended = n == 0;
            Ok(n)
        }
    }

    fn parse_scripted(text: &[u8], fail: bool) -> Result<ParseSummary> {
        let mut input = Scripted {
            text: text.to_vec(),
            at: 0,
            fail,
            ended: false,
        };
        parse_text(
            &mut input,
            Path::new("s.txt"),
            TextIds::Dense,
            &crate::NoProgress,
            &mut |_, _, _| Ok(()),
        )
    }

    #[test]
    fn a_bad_line_read_before_a_failed_read_is_the_error_named() {
        let text = b"0 1\n1 2\n2 x\n3 4\n";
        let err = parse_scripted(text, true).unwrap_err().to_string();
        assert!(err.contains("line 3") && err.contains("\"x\""), "{err}");
        let err = parse_scripted(b"0 1\n1 2\n", true).unwrap_err();
        assert!(matches!(err, Error::Read { .. }), "{err}");
    }

    #[test]
    fn a_reader_that_has_ended_is_not_read_again() {
        for text in [&b"0 1\n1 2"[..], b"0 1\n", b""] {
            let summary = parse_scripted(text, false).unwrap();
            assert_eq!(summary.bytes, text.len() as u64);
        }
    }

    #[test]
    fn plain_line_takes_plain_lines_only() {
        assert_eq!(plain_line(b"12 345"), Some((12, 345, 6)));
        assert_eq!(plain_line(b"12 345\n6 7\n"), Some((12, 345, 7)));
        assert_eq!(plain_line(b"0\t\t7\r\n"), Some((0, 7, 6)));
        assert_eq!(plain_line(b"1,2"), Some((1, 2, 3)));
        assert_eq!(plain_line(b"1 2 3"), None);
        assert_eq!(plain_line(b" 1 2"), None);
        assert_eq!(plain_line(b"1 2 \n"), None);
        assert_eq!(plain_line(b"1 2\r"), None);
        assert_eq!(plain_line(b"12\n3 4"), None);
        assert_eq!(plain_line(b"# 1 2"), None);
        assert_eq!(plain_line(b"99999999999999999999 1"), None);
    }
}
