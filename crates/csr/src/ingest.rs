//! Conversion of edge lists into `.qcsr`, and export back to edge lists.

use quiver_io::{Output, Shape};
use quiver_run::Stopwatch;
use serde::Serialize;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::graphalytics::Dataset;
use crate::parse::{self, ParseSummary, TextIds};
use crate::sort::{EdgeSorter, SortOptions, SortStats};
use crate::{Error, Graph, Progress, Result, Unit};

/// An edge-list format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeFormat {
    /// Text, one `source target [weight]` per line (SNAP style).
    Snap,
    /// Binary little-endian `u32` pairs, or `(u32, u32, f32)` triples for a
    /// weighted graph.
    Bin,
    /// Matrix Market coordinate (input only).
    Mtx,
    /// LDBC Graphalytics (input only): the edge file `NAME.e`, lines
    /// `source target [weight]` of ids listed in `NAME.v` beside it, and
    /// optionally `NAME.properties`, whose `directed = false` makes the
    /// graph undirected. The graph keeps the original ids as its id map.
    Graphalytics,
}

impl EdgeFormat {
    /// Guesses the format from a file name: `.mtx` is Matrix Market, `.bin`
    /// binary, `.e` a Graphalytics edge file, anything else text; a
    /// trailing `.gz` is looked through.
    pub fn from_path(path: &Path) -> EdgeFormat {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        if name.ends_with(".mtx") {
            EdgeFormat::Mtx
        } else if name.ends_with(".bin") {
            EdgeFormat::Bin
        } else if name.ends_with(".e") {
            EdgeFormat::Graphalytics
        } else {
            EdgeFormat::Snap
        }
    }
}

impl FromStr for EdgeFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "snap" | "text" | "txt" => Ok(EdgeFormat::Snap),
            "bin" | "binary" => Ok(EdgeFormat::Bin),
            "mtx" | "matrix-market" => Ok(EdgeFormat::Mtx),
            "graphalytics" | "ldbc" => Ok(EdgeFormat::Graphalytics),
            other => Err(format!(
                "unknown edge-list format {other:?} (expected snap, bin, mtx or graphalytics)"
            )),
        }
    }
}

impl fmt::Display for EdgeFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EdgeFormat::Snap => "snap",
            EdgeFormat::Bin => "bin",
            EdgeFormat::Mtx => "mtx",
            EdgeFormat::Graphalytics => "graphalytics",
        })
    }
}

/// How to read an input edge list.
#[derive(Clone, Debug, Default)]
pub struct ConvertOptions {
    /// The input format; `None` guesses from the file name.
    pub format: Option<EdgeFormat>,
    /// For binary input: records are `(u32, u32, f32)` triples.
    pub weighted_binary: bool,
    /// Drop weights even if the input has them.
    pub ignore_weights: bool,
    /// At least this many vertices: an edge list cannot name isolated
    /// vertices at the top of the id range (0 derives |V| from the input).
    pub min_vertices: u64,
    /// Symmetrising, deduplication, relabelling and the memory budget.
    pub sort: SortOptions,
}

/// What a conversion read and wrote: `quiver convert --json`.
#[derive(Clone, Debug, Serialize)]
pub struct ConvertReport {
    /// The `.qcsr` file written.
    pub output: PathBuf,
    /// Vertices of the graph written.
    pub vertices: u32,
    /// Edges of the graph written (stored directed edges).
    pub edges: u64,
    /// The input (`-` for standard input).
    pub input: PathBuf,
    /// The format it was read as.
    pub format: EdgeFormat,
    /// Bytes of input after decompression.
    pub input_bytes: u64,
    /// Edges parsed from the input.
    pub edges_parsed: u64,
    /// Whether the output carries weights.
    pub weighted: bool,
    /// What the sort did (vertices and edges written included).
    pub sort: SortStats,
    /// Wall time in nanoseconds.
    pub wall_ns: u64,
    /// Megabytes (10^6 bytes) of input read per second of wall time.
    pub input_mb_per_s: f64,
    /// The process's peak resident memory in bytes, when Linux says.
    pub peak_mem_bytes: Option<u64>,
}

/// Opens `path` for reading: `-` is standard input and a `.gz` name is
/// decompressed on the fly. Returns the reader and the size on disk, if known.
pub fn open_input(path: &Path) -> Result<(Box<dyn Read>, Option<u64>)> {
    if path == Path::new("-") {
        return Ok((Box::new(io::stdin().lock()), None));
    }
    let file = File::open(path).map_err(|source| Error::Open {
        path: path.to_owned(),
        source,
    })?;
    let size = file.metadata().ok().map(|m| m.len());
    let gz = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    let reader: Box<dyn Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(
            io::BufReader::with_capacity(256 << 10, file),
        ))
    } else {
        Box::new(file)
    };
    Ok((reader, size))
}

/// Converts the edge list at `input` (`-` for standard input) into the
/// `.qcsr` file `output`, using at most the memory budget of
/// `options.sort` for edges (spilling sorted runs beside the system's
/// temporary files or in `options.sort.work_dir`).
///
/// A Graphalytics dataset ([`EdgeFormat::Graphalytics`]) is read from the
/// edge file `input` (`NAME.e`) and the vertex file `NAME.v` beside it,
/// which is held in memory (8 bytes a vertex, on top of the budget) and
/// sorted: vertex `v` is the `v`-th smallest listed id, every edge is
/// relabelled through it, and the sorted ids become the graph's id map.
/// Undirected if `NAME.properties` says `directed = false`; asking for
/// `sort.undirected` on a dataset it calls directed is an error, and such a
/// dataset stays directed even if every edge has its reverse. Any other
/// input in which every edge has its reverse (of the same weight) is
/// stored undirected unless `sort.keep_directed` ([`SortStats::symmetric`](crate::SortStats::symmetric)).
pub fn convert(
    input: &Path,
    output: &Path,
    options: &ConvertOptions,
    progress: &dyn Progress,
) -> Result<ConvertReport> {
    let started = Stopwatch::start();
    let format = options
        .format
        .unwrap_or_else(|| EdgeFormat::from_path(input));
    let mut sort_options = options.sort.clone();
    let dataset = match format {
        EdgeFormat::Graphalytics => {
            let dataset = graphalytics_dataset(input, options)?;
            let declared = dataset.directed()?;
            sort_options.undirected = dataset.undirected(declared, sort_options.undirected)?;
            // A dataset its properties call directed stays so, symmetric or not.
            sort_options.keep_directed |= declared == Some(true);
            let ids = dataset.vertex_ids(progress)?;
            Some((dataset, ids))
        }
        EdgeFormat::Snap | EdgeFormat::Bin | EdgeFormat::Mtx => None,
    };
    let (mut reader, size) = open_input(input)?;
    let mut sorter = EdgeSorter::new(sort_options)?;
    progress.start("reading", Unit::Bytes, size);
    let ignore_weights = options.ignore_weights;
    let mut sink = |s, d, w: Option<f32>| sorter.push(s, d, w.filter(|_| !ignore_weights));
    let relabel = options.sort.relabel;
    let text_ids = match &dataset {
        Some((dataset, ids)) => TextIds::Listed {
            ids,
            file: dataset.vertex_file(),
        },
        None if relabel => TextIds::Relabel,
        None => TextIds::Dense,
    };
    let summary: ParseSummary = match format {
        EdgeFormat::Snap | EdgeFormat::Graphalytics => {
            parse::parse_text(&mut reader, input, text_ids, progress, &mut sink)?
        }
        EdgeFormat::Bin => {
            if relabel {
                return Err(Error::invalid("relabel", 
                    "binary edge lists hold u32 ids already; relabelling applies to text input only"
                        ,
                ));
            }
            parse::parse_binary(
                &mut reader,
                input,
                options.weighted_binary,
                progress,
                &mut sink,
            )?
        }
        EdgeFormat::Mtx => {
            if relabel {
                return Err(Error::invalid(
                    "relabel",
                    "Matrix Market ids are dense already; relabelling applies to text input only",
                ));
            }
            parse::parse_matrix_market(&mut reader, input, progress, &mut sink)?
        }
    };
    let weighted = summary.weighted && !options.ignore_weights;
    let min_vertices = summary.declared_vertices.max(options.min_vertices);
    if let Some((_, ids)) = dataset {
        sorter.set_original_ids(ids)?;
    }
    let sort = sorter.finish(output, min_vertices, progress)?;
    let wall_ns = started.elapsed_ns();
    #[allow(clippy::cast_precision_loss)] // a rate, not an exact count
    let input_mb_per_s = summary.bytes as f64 * 1e3 / wall_ns.max(1) as f64;
    Ok(ConvertReport {
        output: output.to_owned(),
        vertices: sort.vertices,
        edges: sort.edges_out,
        input: input.to_owned(),
        format,
        input_bytes: summary.bytes,
        edges_parsed: summary.edges,
        weighted,
        sort,
        wall_ns,
        input_mb_per_s,
        peak_mem_bytes: quiver_run::peak_rss_bytes(),
    })
}

/// The Graphalytics dataset of the edge file `input`, once the options
/// that make no sense for one are ruled out.
fn graphalytics_dataset(input: &Path, options: &ConvertOptions) -> Result<Dataset> {
    if options.sort.relabel {
        return Err(Error::invalid(
            "relabel",
            "a Graphalytics graph's vertices are numbered by its vertex file already",
        ));
    }
    if options.min_vertices > 0 {
        return Err(Error::invalid(
            "min_vertices",
            "a Graphalytics graph has the vertices its vertex file lists",
        ));
    }
    Dataset::of_edge_file(input)
}

/// How [`export`] writes a graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportOptions {
    /// Text or binary records.
    pub format: EdgeFormat,
    /// Write each edge of an undirected graph once, from its smaller
    /// endpoint (a self-loop once), for tools that add the reverse of every
    /// edge they read; refused for a directed graph.
    pub each_edge_once: bool,
}

impl ExportOptions {
    /// Every edge as stored, in `format`.
    pub fn new(format: EdgeFormat) -> ExportOptions {
        ExportOptions {
            format,
            each_edge_once: false,
        }
    }
}

/// What [`export`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exported {
    /// Edge records.
    pub edges: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Writes `graph` as an edge list: text lines `source<TAB>target[<TAB>weight]`
/// or binary pairs/triples (triples when the graph is weighted). Returns the
/// edges and bytes written. Text names vertices by their original ids when
/// the graph has an id map; binary records hold `u32` vertex ids, so a graph
/// with an id map is refused (`Unsupported`) rather than written under other
/// ids.
pub fn export(
    graph: &Graph,
    output: &mut dyn Write,
    options: ExportOptions,
) -> io::Result<Exported> {
    if let Some(why) = export_refusal(graph, options) {
        return Err(io::Error::new(io::ErrorKind::Unsupported, why));
    }
    let ExportOptions {
        format,
        each_edge_once,
    } = options;
    let mut out = CountingWriter {
        inner: BufWriter::with_capacity(1 << 20, output),
        bytes: 0,
    };
    let name = |v: u32| graph.original_id(v);
    let mut edges = 0;
    for v in 0..graph.num_vertices() {
        let weights = graph.edge_weights(v);
        for (i, &t) in graph.neighbors(v).iter().enumerate() {
            if each_edge_once && t < v {
                continue;
            }
            edges += 1;
            let w = weights.map(|w| w[i]);
            match format {
                EdgeFormat::Snap => match w {
                    Some(w) => writeln!(out, "{}\t{}\t{w}", name(v), name(t))?,
                    None => writeln!(out, "{}\t{}", name(v), name(t))?,
                },
                EdgeFormat::Bin => {
                    out.write_all(&v.to_le_bytes())?;
                    out.write_all(&t.to_le_bytes())?;
                    if let Some(w) = w {
                        out.write_all(&w.to_le_bytes())?;
                    }
                }
                EdgeFormat::Mtx | EdgeFormat::Graphalytics => {
                    unreachable!("export_refusal refuses {format}")
                }
            }
        }
    }
    out.flush()?;
    Ok(Exported {
        edges,
        bytes: out.bytes,
    })
}

/// Why [`export`] cannot write `graph` with `options`, if it cannot: for
/// callers that check before they create an output.
pub fn export_refusal(graph: &Graph, options: ExportOptions) -> Option<String> {
    if options.each_edge_once && !graph.is_undirected() {
        return Some(
            "each edge once needs an undirected graph: a directed graph's edges \
             are each stored once already"
                .into(),
        );
    }
    let format = options.format;
    match format {
        EdgeFormat::Snap => None,
        EdgeFormat::Bin if graph.original_ids().is_none() => None,
        EdgeFormat::Bin => Some(
            "binary edge lists hold u32 vertex ids, not this graph's original ids: \
             export it as snap text"
                .into(),
        ),
        EdgeFormat::Mtx | EdgeFormat::Graphalytics => Some(format!(
            "export writes snap or bin edge lists, not {format}"
        )),
    }
}

struct CountingWriter<W> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// What [`export_file`] wrote: `quiver export --json`.
#[derive(Clone, Debug, Serialize)]
pub struct ExportReport {
    /// The graph's file (`None` for a graph made in memory).
    pub graph: Option<PathBuf>,
    /// Where it went (`-` for standard output).
    pub output: PathBuf,
    /// The records' format.
    pub format: EdgeFormat,
    /// Edge records.
    pub edges: u64,
    /// Bytes.
    pub bytes: u64,
    /// Wall time in nanoseconds.
    pub wall_ns: u64,
}

/// Exports `graph` to `path` as [`quiver_io::Output`] writes it: a file
/// atomically (temporary name, fsync, rename), a FIFO or device in place.
pub fn export_file(graph: &Graph, path: &Path, options: ExportOptions) -> Result<ExportReport> {
    let started = Stopwatch::start();
    let write_err = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    let mut out = Output::create(path, Shape::Stream).map_err(write_err)?;
    let Exported { edges, bytes } = export(graph, &mut out, options).map_err(write_err)?;
    out.commit().map_err(write_err)?;
    Ok(ExportReport {
        graph: graph.path().map(Path::to_owned),
        output: path.to_owned(),
        format: options.format,
        edges,
        bytes,
        wall_ns: started.elapsed_ns(),
    })
}
