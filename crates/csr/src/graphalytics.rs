//! LDBC Graphalytics datasets: the edge file `NAME.e` that conversion is
//! given, and beside it the vertex file `NAME.v` (one id per line, any
//! `u64`, isolated vertices included) and, optionally, `NAME.properties`
//! (whose `graph.NAME.directed` says whether the edges are undirected).
//!
//! Vertices are numbered densely in increasing order of their original ids,
//! so the id map written with the graph is sorted and finding a vertex by
//! its original id is a binary search.

use std::path::{Path, PathBuf};

use crate::parse;
use crate::sort::MAX_VERTEX_ID;
use crate::{open_input, Error, Progress, Result, Unit};

/// The files of one dataset.
#[derive(Debug)]
pub(crate) struct Dataset {
    /// `NAME`, the stem the properties' keys start with.
    name: String,
    /// `NAME.v` (`NAME.v.gz` beside a compressed edge file).
    vertices: PathBuf,
    /// `NAME.properties`, which may be absent.
    properties: PathBuf,
}

impl Dataset {
    /// The dataset whose edge file is `edges`, named `NAME.e` or `NAME.e.gz`.
    pub(crate) fn of_edge_file(edges: &Path) -> Result<Dataset> {
        let file_name = edges
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (stem, gz) = match file_name.strip_suffix(".gz") {
            Some(stem) => (stem, ".gz"),
            None => (file_name.as_str(), ""),
        };
        let name = stem.strip_suffix(".e").filter(|n| !n.is_empty());
        let Some(name) = name else {
            return Err(Error::invalid(
                "input",
                format!(
                    "a Graphalytics edge file is named NAME.e (its vertices are in NAME.v \
                     beside it), not {:?}",
                    edges.display().to_string()
                ),
            ));
        };
        Ok(Dataset {
            name: name.to_owned(),
            vertices: edges.with_file_name(format!("{name}.v{gz}")),
            properties: edges.with_file_name(format!("{name}.properties")),
        })
    }

    /// Whether to add the reverse of every edge: when the properties file
    /// says `directed = false`, or when `requested` and the file does not
    /// say otherwise. Asking to symmetrise a dataset its properties call
    /// directed is an error: the result would not be the benchmark's graph.
    /// `declared` is what the properties file says ([`Dataset::directed`]).
    pub(crate) fn undirected(&self, declared: Option<bool>, requested: bool) -> Result<bool> {
        match declared {
            Some(false) => Ok(true),
            Some(true) if requested => Err(Error::invalid(
                "undirected",
                format!(
                    "{} says graph.{}.directed = true, and symmetrising a directed \
                     Graphalytics graph changes it (move the properties file away to do \
                     it anyway)",
                    self.properties.display(),
                    self.name
                ),
            )),
            Some(true) | None => Ok(requested),
        }
    }

    /// What the properties file says of `graph.NAME.directed`: `None` when
    /// there is no such file or key.
    pub(crate) fn directed(&self) -> Result<Option<bool>> {
        let text = match std::fs::read_to_string(&self.properties) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(Error::Read {
                    path: self.properties.clone(),
                    source,
                })
            }
        };
        let key = format!("graph.{}.directed", self.name);
        for (i, line) in text.lines().enumerate() {
            let Some((k, value)) = line.split_once('=') else {
                continue;
            };
            if k.trim() != key {
                continue;
            }
            return match value.trim() {
                "true" => Ok(Some(true)),
                "false" => Ok(Some(false)),
                other => Err(Error::Parse {
                    path: self.properties.clone(),
                    location: format!("line {}", i + 1),
                    detail: format!("{key} is {other:?}, expected true or false"),
                }),
            };
        }
        Ok(None)
    }

    /// The vertex file's ids in increasing order: `ids[v]` is vertex `v`'s
    /// original id. Takes 8 bytes a vertex.
    pub(crate) fn vertex_ids(&self, progress: &dyn Progress) -> Result<Vec<u64>> {
        let (mut reader, size) = open_input(&self.vertices)?;
        progress.start("reading vertices", Unit::Bytes, size);
        let mut ids = parse::parse_vertex_ids(&mut reader, &self.vertices, progress)?;
        let whole_file = |detail: String| Error::Parse {
            path: self.vertices.clone(),
            location: "vertex list".into(),
            detail,
        };
        if ids.len() as u64 > MAX_VERTEX_ID + 1 {
            return Err(whole_file(format!(
                "{} vertices exceed the u32 id space of .qcsr",
                ids.len()
            )));
        }
        ids.sort_unstable();
        if let Some(pair) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(whole_file(format!("vertex id {} is listed twice", pair[0])));
        }
        Ok(ids)
    }

    /// The vertex file, for messages and the parser.
    pub(crate) fn vertex_file(&self) -> &Path {
        &self.vertices
    }
}

/// Writes a Graphalytics output file: a line `ID VALUE` for every vertex of
/// `graph`, by its original id, `value(v)` giving the text of dense vertex
/// `v`'s value; written beside `path` and renamed over it once complete.
pub fn write_vertex_values(
    path: &Path,
    graph: &crate::Graph,
    mut value: impl FnMut(u32) -> String,
) -> Result<()> {
    use std::io::Write;
    let write_err = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    let out = quiver_io::Output::create(path, quiver_io::Shape::Stream).map_err(write_err)?;
    let mut out = std::io::BufWriter::new(out);
    for v in 0..graph.num_vertices() {
        writeln!(out, "{} {}", graph.original_id(v), value(v)).map_err(write_err)?;
    }
    let out = out.into_inner().map_err(|e| write_err(e.into_error()))?;
    out.commit().map_err(write_err)
}

/// A real as Graphalytics' reference outputs print it:
/// `1.477629166666667e-01`, `Infinity`.
pub fn format_real(x: f64) -> String {
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let text = format!("{x:.15e}");
    let (mantissa, exponent) = text.split_once('e').expect("{:e} has an exponent");
    let (sign, digits) = match exponent.strip_prefix('-') {
        Some(digits) => ('-', digits),
        None => ('+', exponent),
    };
    format!("{mantissa}e{sign}{digits:0>2}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vertex_and_properties_files_sit_beside_the_edges() {
        let d = Dataset::of_edge_file(Path::new("/data/g500-22.e")).unwrap();
        assert_eq!(d.vertices, Path::new("/data/g500-22.v"));
        assert_eq!(d.properties, Path::new("/data/g500-22.properties"));
        assert_eq!(d.name, "g500-22");
        let d = Dataset::of_edge_file(Path::new("web.e.gz")).unwrap();
        assert_eq!(d.vertices, Path::new("web.v.gz"));
        for bad in ["edges.txt", ".e", "-"] {
            let err = Dataset::of_edge_file(Path::new(bad)).unwrap_err();
            assert!(err.to_string().contains("invalid argument"), "{bad}: {err}");
        }
    }

    #[test]
    fn reals_print_as_the_reference_outputs() {
        assert_eq!(format_real(0.1477629166666667), "1.477629166666667e-01");
        assert_eq!(format_real(0.0), "0.000000000000000e+00");
        assert_eq!(format_real(0.83), "8.300000000000000e-01");
        assert_eq!(format_real(f64::INFINITY), "Infinity");
        assert_eq!(format_real(12.5), "1.250000000000000e+01");
    }
}
