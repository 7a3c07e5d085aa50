//! Commands on a device image kept in a file between commands (see
//! [`Ssd::save`] and [`Ssd::open`]): lay a graph out on a new image, apply
//! one update, merge the delta graph; each reports what it cost. An image
//! is saved only after its command succeeded and the caller did not ask to
//! stop, so a failed or cancelled command leaves the image as it was.

use std::path::{Path, PathBuf};

use quiver_csr::Graph;
use quiver_run::{InvalidArgument, Progress};
use serde::Serialize;

use crate::device::{Config, Ssd};
use crate::error::{Error, Result};
use crate::flash::Nanos;
use crate::update::{Update, UpdatePath};

/// What laying a graph out on a new image did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InitReport {
    /// The image written.
    pub device: PathBuf,
    /// |V|.
    pub vertices: u32,
    /// |E| (stored directed edges).
    pub edges: u64,
    /// Graph pages (neighbours and weights).
    pub graph_pages: u64,
    /// Bytes of the GTTs.
    pub gtt_bytes: u64,
    /// Pages of the baseline's CSR file.
    pub csr_pages: u64,
    /// The image file's length.
    pub image_bytes: u64,
    /// Modelled time of both layouts' writes.
    pub modelled_ns: Nanos,
}

/// GraphInitialize and the CSR file's writes of `graph` on a new device of
/// `config`, saved as the image `path` (replacing one there).
pub fn init(
    graph: &Graph,
    config: &Config,
    path: &Path,
    progress: &dyn Progress,
) -> Result<InitReport> {
    config.validate()?;
    let mut ssd = Ssd::new(config)?;
    let layout = ssd.graph_initialize(graph, progress)?;
    let csr_pages = ssd.write_csr(graph, progress)?;
    progress.check()?;
    ssd.save(path, progress)?;
    Ok(InitReport {
        device: path.to_owned(),
        vertices: graph.num_vertices(),
        edges: graph.num_edges(),
        graph_pages: layout.pages + layout.weight_pages,
        gtt_bytes: layout.gtt_bytes,
        csr_pages,
        image_bytes: std::fs::metadata(path)
            .map_err(|e| crate::Error::Image {
                path: path.to_owned(),
                reason: e.to_string(),
            })?
            .len(),
        modelled_ns: ssd.now(),
    })
}

/// What one update on an image did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpdateReport {
    /// The image.
    pub image: PathBuf,
    /// The update, as its command reads.
    pub update: String,
    /// How it reached the pages.
    pub path: UpdatePath,
    /// Whether it applied (an absent edge or vertex changes nothing).
    pub applied: bool,
    /// NAND pages it read.
    pub pages_read: u64,
    /// NAND pages it programmed.
    pub pages_written: u64,
    /// Its modelled time.
    pub modelled_ns: Nanos,
    /// Modelled time of mounting the image first.
    pub mount_ns: Nanos,
}

/// Mounts the image `image`, applies `update` by `path` and saves the
/// image if it applied.
///
/// # Errors
/// [`Error::InvalidArgument`] naming `vertex` when the update names a
/// vertex the image does not hold; the device's and the image's errors.
pub fn update(
    image: &Path,
    update: &Update,
    path: UpdatePath,
    progress: &dyn Progress,
) -> Result<UpdateReport> {
    let (mut ssd, mount_ns) = Ssd::open(image)?;
    let before = ssd.flash().counters().clone();
    let start = ssd.now();
    // A vertex the image lacks is the caller's mistake, named by the update.
    let applied = match ssd.update(std::slice::from_ref(update), path) {
        Err(err @ Error::VertexOutOfRange { .. }) => {
            return Err(InvalidArgument::new("vertex", err.to_string()).into())
        }
        applied => applied?[0],
    };
    let after = ssd.flash().counters();
    let report = UpdateReport {
        image: image.to_owned(),
        update: update.to_string(),
        path,
        applied,
        pages_read: after.page_reads - before.page_reads,
        pages_written: after.programs - before.programs,
        modelled_ns: ssd.now() - start,
        mount_ns,
    };
    if applied {
        progress.check()?;
        ssd.save(image, progress)?;
    }
    Ok(report)
}

/// What a merge on an image did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MergeReport {
    /// The image.
    pub image: PathBuf,
    /// Page groups rewritten.
    pub groups: u64,
    /// Groups still dirty.
    pub remaining: u64,
    /// NAND pages programmed.
    pub pages_written: u64,
    /// Its modelled time.
    pub modelled_ns: Nanos,
}

/// Mounts the image `image`, merges its delta graph (at most `groups`
/// page groups, all if `None`) and saves it.
pub fn merge(image: &Path, groups: Option<usize>, progress: &dyn Progress) -> Result<MergeReport> {
    let (mut ssd, _) = Ssd::open(image)?;
    let (programs, start) = (ssd.flash().counters().programs, ssd.now());
    let merged = ssd.merge(groups)?;
    progress.check()?;
    ssd.save(image, progress)?;
    Ok(MergeReport {
        image: image.to_owned(),
        groups: merged.groups,
        remaining: merged.remaining,
        pages_written: ssd.flash().counters().programs - programs,
        modelled_ns: ssd.now() - start,
    })
}
