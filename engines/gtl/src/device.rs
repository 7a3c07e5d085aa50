//! The simulated SSD: one flash device whose blocks the FTL (block
//! interface, the baseline's CSR file) and the GTL (graph pages) share,
//! and one host issuing one call at a time (many at once through the
//! queues of [`crate::command`]).

use std::ops::Range;

use quiver_csr::Graph;
use quiver_run::{InvalidArgument, Progress};

use crate::area::Tag;
use crate::baseline::CsrFile;
use crate::delta::{Adjacency, ListId};
use crate::error::{Error, Result};
use crate::flash::{Fetched, Flash, Geometry, Nanos, Timing};
use crate::ftl::{Ftl, Lba};
use crate::gtl::{Gtl, Layout};
use crate::page::PageFormat;

/// The device's settings; the only place their defaults are written.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Config {
    /// The NAND geometry.
    pub geometry: Geometry,
    /// The timing model.
    pub timing: Timing,
    /// Blocks `0..ftl_blocks_per_die` of every die belong to the FTL, the
    /// rest to the GTL (default: half of each die).
    pub ftl_blocks_per_die: u32,
    /// The FTL's over-provisioning, a fraction of its pages (default 7%).
    pub over_provisioning: f64,
    /// The fraction of each graph page left free for growth (default 5%).
    pub slack: f64,
    /// Keep empty marks beside the GTT (ours, not the paper's; default
    /// off): a bit per vertex whose out-list GraphInitialize laid out
    /// empty, so that asking for it reads no page. An edit naming the
    /// vertex clears its bit; recovery keeps none.
    #[serde(default)]
    pub mark_empty: bool,
    /// Keep the NAND's pages in this sparse file instead of memory
    /// ([`Flash::on_file`]; default: memory). Not part of an image: an
    /// opened image is mounted in memory.
    #[serde(skip)]
    pub flash_file: Option<std::path::PathBuf>,
}

impl Default for Config {
    fn default() -> Config {
        let geometry = Geometry::default();
        Config {
            ftl_blocks_per_die: geometry.blocks_per_die / 2,
            geometry,
            timing: Timing::default(),
            over_provisioning: Ftl::DEFAULT_OVER_PROVISIONING,
            slack: 0.05,
            mark_empty: false,
            flash_file: None,
        }
    }
}

impl Config {
    /// The default settings on `geometry`: half of each die's blocks for
    /// the FTL, and at least the default over-provisioning, more if the
    /// FTL's GC needs more on a small device; an error if the geometry is
    /// too small for that.
    pub fn with_geometry(geometry: Geometry) -> Result<Config, InvalidArgument> {
        geometry.validate()?;
        let ftl_blocks_per_die = geometry.blocks_per_die / 2;
        let pages = u64::from(geometry.dies())
            * u64::from(ftl_blocks_per_die)
            * u64::from(geometry.pages_per_block);
        let reserve = crate::ftl::gc_reserve(&geometry) + 1;
        if ftl_blocks_per_die == 0 || pages <= 2 * reserve {
            return Err(InvalidArgument::new(
                "geometry",
                format!(
                    "{geometry} is too small: half of it, the CSR file's, has {pages} pages, and the FTL's GC keeps {reserve} of them spare"
                ),
            ));
        }
        // Rounding a ratio of page counts below 2^53 is exact enough here.
        #[allow(clippy::cast_precision_loss)]
        let needed = reserve as f64 / pages as f64;
        Ok(Config {
            ftl_blocks_per_die,
            over_provisioning: Ftl::DEFAULT_OVER_PROVISIONING.max(needed),
            geometry,
            ..Config::default()
        })
    }

    /// Checks every setting, naming the first that makes no sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        self.geometry.validate()?;
        self.timing.validate()?;
        if self.ftl_blocks_per_die == 0 || self.ftl_blocks_per_die >= self.geometry.blocks_per_die {
            return Err(InvalidArgument::new(
                "ftl_blocks_per_die",
                format!(
                    "must leave both the FTL and the GTL blocks: 1 to {}",
                    self.geometry.blocks_per_die - 1
                ),
            ));
        }
        PageFormat::new(self.geometry.page_bytes as usize, self.slack)?;
        if (self.geometry.spare_bytes as usize) < Tag::BYTES {
            return Err(InvalidArgument::new(
                "spare_bytes",
                format!(
                    "the GTL tags each page in {} spare bytes, the geometry has {}",
                    Tag::BYTES,
                    self.geometry.spare_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// Borrowed parts of an [`Ssd`].
pub(crate) struct Parts<'a> {
    pub flash: &'a mut Flash,
    pub ftl: &'a mut Ftl,
    pub gtl: Option<&'a mut Gtl>,
    pub csr: Option<&'a CsrFile>,
    pub now: &'a mut Nanos,
}

/// The simulated GraphSSD: flash, FTL, GTL and the baseline's CSR file.
///
/// Calls run one after another: each is submitted when the previous one
/// completed ([`Ssd::now`]); a [`crate::Queue`] starts many at once.
#[derive(Debug)]
pub struct Ssd {
    config: Config,
    pub(crate) flash: Flash,
    ftl: Ftl,
    pub(crate) gtl: Option<Gtl>,
    csr: Option<CsrFile>,
    pub(crate) now: Nanos,
}

impl Ssd {
    /// An erased device.
    pub fn new(config: &Config) -> Result<Ssd> {
        config.validate()?;
        let (geometry, timing) = (config.geometry.clone(), config.timing.clone());
        let flash = match &config.flash_file {
            None => Flash::new(geometry, timing)?,
            Some(path) => Flash::on_file(geometry, timing, path)?,
        };
        Ssd::with_flash(config, flash, None)
    }

    /// A device of `config` on `flash` (with the baseline's file `csr`),
    /// its controller fresh: [`Ssd::power_cycle`] mounts what flash holds.
    pub(crate) fn with_flash(config: &Config, flash: Flash, csr: Option<CsrFile>) -> Result<Ssd> {
        let ftl = Ftl::new(
            &config.geometry,
            0..config.ftl_blocks_per_die,
            config.over_provisioning,
        )?;
        Ok(Ssd {
            config: config.clone(),
            flash,
            ftl,
            gtl: None,
            csr,
            now: 0,
        })
    }

    /// The device's settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The flash device (counters, pages).
    pub fn flash(&self) -> &Flash {
        &self.flash
    }

    /// The FTL.
    pub fn ftl(&self) -> &Ftl {
        &self.ftl
    }

    /// The GTL, once GraphInitialize ran.
    pub fn gtl(&self) -> Option<&Gtl> {
        self.gtl.as_ref()
    }

    /// The baseline's CSR file, once written.
    pub fn csr(&self) -> Option<&CsrFile> {
        self.csr.as_ref()
    }

    /// When the last call completed.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Blocks of each die the GTL owns.
    fn graph_blocks(&self) -> Range<u32> {
        self.config.ftl_blocks_per_die..self.config.geometry.blocks_per_die
    }

    /// GraphInitialize: lays `graph` out in graph pages on the GTL's
    /// blocks, telling `progress` of the pages written; stops between pages
    /// with [`Error::Cancelled`] when it asks (the device then holds an
    /// incomplete graph, as after a power cut).
    pub fn graph_initialize(&mut self, graph: &Graph, progress: &dyn Progress) -> Result<Layout> {
        let blocks = self.graph_blocks();
        let gtl = Gtl::initialize(
            &mut self.flash,
            blocks,
            graph,
            (self.config.slack, self.config.mark_empty),
            self.now,
            progress,
        )?;
        let layout = gtl.layout().clone();
        self.now = layout.done;
        self.gtl = Some(gtl);
        Ok(layout)
    }

    /// Cuts power once `programs` NAND programs have completed (counted
    /// from the device's start): later programs fail with
    /// [`Error::PowerCut`] until [`Ssd::power_cycle`].
    pub fn cut_power_after(&mut self, programs: u64) {
        self.flash.cut_power_after(programs);
    }

    /// Fails if the baseline's CSR file no longer holds the graph the GTL
    /// does (the graph was updated since GraphInitialize; updates reach
    /// the graph pages only).
    pub fn check_csr_current(&self) -> Result<()> {
        if self.gtl.as_ref().is_some_and(Gtl::updated) {
            return Err(InvalidArgument::new(
                "backend",
                "the CSR file holds the graph as GraphInitialize wrote it, and this device has been updated since; use the gtl backend",
            )
            .into());
        }
        Ok(())
    }

    /// Power comes back after a cut ([`Flash::cut_power_after`]) or an
    /// orderly stop: the controller's DRAM is gone, and the FTL and the GTL
    /// are rebuilt from what flash holds ([`Ftl::recover`] from the spare
    /// areas; [`Gtl::recover`] by reading every graph page, which is
    /// modelled time). The baseline's CSR file keeps its layout, which the
    /// host knows. Returns the modelled recovery time.
    pub fn power_cycle(&mut self) -> Result<Nanos> {
        let start = self.now;
        self.flash.power_on();
        let geometry = &self.config.geometry;
        self.ftl = Ftl::recover(
            geometry,
            0..self.config.ftl_blocks_per_die,
            self.config.over_provisioning,
            &self.flash,
        )?;
        let blocks = self.graph_blocks();
        let (gtl, done) = Gtl::recover(&mut self.flash, blocks, self.config.slack, start)?;
        self.gtl = gtl;
        self.now = done;
        Ok(done - start)
    }

    /// Writes `graph`'s CSR file through the FTL (the baseline's storage)
    /// at logical pages 0 on, which no block write may have used
    /// ([`Error::BlocksInUse`]); returns its logical pages. `progress` as
    /// for [`Ssd::graph_initialize`].
    pub fn write_csr(&mut self, graph: &Graph, progress: &dyn Progress) -> Result<u64> {
        let (file, done) =
            CsrFile::write(&mut self.ftl, &mut self.flash, graph, self.now, progress)?;
        self.now = done;
        let pages = file.pages();
        self.csr = Some(file);
        Ok(pages)
    }

    /// The device's parts, for the host library: it reads pages itself so
    /// that its cache decides which reach the device.
    pub(crate) fn parts(&mut self) -> Parts<'_> {
        Parts {
            flash: &mut self.flash,
            ftl: &mut self.ftl,
            gtl: self.gtl.as_mut(),
            csr: self.csr.as_ref(),
            now: &mut self.now,
        }
    }

    fn advance<T>(&mut self, fetched: Result<Fetched<T>>) -> Result<Fetched<T>> {
        let fetched = fetched?;
        self.now = fetched.done;
        Ok(fetched)
    }

    /// GetAdjacencyList through the GTL.
    pub fn get_adjacency_list(&mut self, vertex: u32) -> Result<Fetched<Vec<u32>>> {
        let gtl = self.gtl.as_mut().ok_or(Error::NoGraph)?;
        let fetched = gtl.get_adjacency_list(&mut self.flash, vertex, self.now);
        self.advance(fetched)
    }

    /// GetAdjacencyList through the GTL with the list's weights (none on
    /// an unweighted graph).
    pub fn read_list(&mut self, vertex: u32) -> Result<Fetched<Adjacency>> {
        let gtl = self.gtl.as_mut().ok_or(Error::NoGraph)?;
        let fetched = gtl.read_list(&mut self.flash, ListId::out(vertex), true, self.now);
        self.advance(fetched)
    }

    /// `vertex`'s in-list with its weights: the in-neighbours a directed
    /// graph keeps in pages of their own (an undirected graph's in-list is
    /// its out-list).
    pub fn read_in_list(&mut self, vertex: u32) -> Result<Fetched<Adjacency>> {
        let gtl = self.gtl.as_mut().ok_or(Error::NoGraph)?;
        let fetched = gtl.read_list(&mut self.flash, ListId::incoming(vertex), true, self.now);
        self.advance(fetched)
    }

    /// The graph the GTL holds now (its out-lists and weights) in memory,
    /// read group by group, each page once (modelled time, counted).
    pub fn read_graph(&mut self) -> Result<Graph> {
        let gtl = self.gtl.as_mut().ok_or(Error::NoGraph)?;
        let (lists, done) = gtl.read_all(&mut self.flash, self.now)?;
        self.now = done;
        let (n, weighted, undirected) = (gtl.vertices(), gtl.weighted(), gtl.undirected());
        let mut edges = Vec::new();
        for (v, list) in (0u32..).zip(lists) {
            let weights = list.weights.into_iter().chain(std::iter::repeat(1.0));
            edges.extend(
                list.targets
                    .into_iter()
                    .zip(weights)
                    .map(|(t, w)| (v, t, w)),
            );
        }
        Ok(Graph::from_edges(n, &edges, weighted, undirected)
            .expect("the device's targets are below its |V|"))
    }

    /// GetEdgeWeight through the GTL.
    pub fn get_edge_weight(&mut self, source: u32, target: u32) -> Result<Fetched<Option<f32>>> {
        let gtl = self.gtl.as_mut().ok_or(Error::NoGraph)?;
        let fetched = gtl.get_edge_weight(&mut self.flash, source, target, self.now);
        self.advance(fetched)
    }

    /// Reads logical page `lba` through the FTL (a page never written
    /// reads as zeros).
    pub fn read_block(&mut self, lba: Lba) -> Result<Fetched<Vec<u8>>> {
        let (start, reads) = (self.now, self.flash.counters().page_reads);
        let (value, done) = self.ftl.read(&mut self.flash, lba, start)?;
        self.now = done;
        Ok(Fetched {
            value,
            pages_read: self.flash.counters().page_reads - reads,
            submitted: start,
            done,
        })
    }

    /// Writes logical page `lba` through the FTL: a whole page of `data`.
    /// The pages of the baseline's CSR file are refused (its graph would
    /// silently change under the baseline); returns the completion time.
    pub fn write_block(&mut self, lba: Lba, data: &[u8]) -> Result<Nanos> {
        if let Some(csr) = self.csr.as_ref().filter(|csr| lba.0 < csr.pages()) {
            return Err(Error::CsrFilePage {
                lba: lba.0,
                pages: csr.pages(),
            });
        }
        self.now = self.ftl.write(&mut self.flash, lba, data, self.now)?;
        Ok(self.now)
    }

    /// GetAdjacencyList on the baseline's CSR file (the graph as written,
    /// whatever updates came since).
    pub fn csr_get_adjacency_list(&mut self, vertex: u32) -> Result<Fetched<Vec<u32>>> {
        let csr = self.csr.as_ref().ok_or(Error::NoGraph)?;
        let fetched = csr.get_adjacency_list(&mut self.ftl, &mut self.flash, vertex, self.now);
        self.advance(fetched)
    }

    /// GetEdgeWeight on the baseline's CSR file.
    pub fn csr_get_edge_weight(
        &mut self,
        source: u32,
        target: u32,
    ) -> Result<Fetched<Option<f32>>> {
        let csr = self.csr.as_ref().ok_or(Error::NoGraph)?;
        let fetched = csr.get_edge_weight(&mut self.ftl, &mut self.flash, source, target, self.now);
        self.advance(fetched)
    }
}
