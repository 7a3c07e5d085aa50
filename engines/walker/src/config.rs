//! What a walk run is asked to do: scheduling, budget, blocks, I/O,
//! threads and seed, with their defaults (defined here once) and their
//! validation (separate from running).

use std::path::PathBuf;

use quiver_run::InvalidArgument;
use serde::Serialize;

use crate::spec::WalkSpec;

/// How walks are scheduled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// GraphWalker: load the block with the most walks (or, with
    /// probability p, the one holding the slowest walk), keep blocks cached,
    /// move each walk until it leaves the loaded range; read single vertices
    /// once few walks remain.
    #[default]
    GraphWalker,
    /// DrunkardMob: each pass loads every block in order, with no cache
    /// across passes, and moves each walk exactly one step.
    Iteration,
    /// The whole graph in memory; each walk runs to its end. The reference.
    Memory,
}

/// How graph blocks are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    /// Chosen by the run: through the page cache for a query that reads
    /// only the lists it visits (its pages are few, and the next query
    /// finds them cached), else direct.
    #[default]
    Auto,
    /// io_uring with O_DIRECT: the page cache cannot hide I/O.
    Direct,
    /// Through the page cache, as GraphWalker's C++ reads: a block is the
    /// mapped file's pages in place (checked when first loaded, and taken
    /// out of resident memory when evicted; see `MappedGraph` for what that
    /// checks less than direct reads), and single lists are read with
    /// `pread` on every worker thread.
    Buffered,
}

/// Engine settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Scheduling.
    pub mode: Mode,
    /// Key every random draw by (seed, walk id, hop): every mode, thread
    /// count and block size then gives the same walks.
    pub exact: bool,
    /// Seed of every random choice.
    pub seed: u64,
    /// Worker threads (0: one per core). GraphWalker mode reads the next
    /// group of blocks ahead on one more thread (first-order walks that
    /// move by partition).
    pub threads: usize,
    /// Memory for cached blocks, walk pools and walks in flight.
    pub mem_budget: u64,
    /// Block size in bytes. With `adaptive`, the fine blocks that loads
    /// group (default [`FINE_BLOCK`]); otherwise the fixed block size (default: the
    /// paper's static rule, `2^(floor(log10 walks) + 2)` MiB, at most a
    /// quarter of the budget; for Node2Vec walks in GraphWalker mode, at
    /// most the largest size two blocks of which fit the cache, up to 3/8
    /// of the budget).
    pub block_size: Option<u64>,
    /// The paper's self-adaptive block size: before each load, group
    /// `2^(floor(log2 live walks) + 1)` KiB worth of consecutive fine blocks
    /// (capped by half the cache, so that the next group can be read while
    /// one is walked), so loads shrink as walks finish.
    /// GraphWalker mode and first-order walks only: Node2Vec walks use the
    /// static rule's blocks (loaded in pairs when two fit the cache).
    pub adaptive: bool,
    /// How blocks are read.
    pub io: IoMode,
    /// Probability of loading the block with the slowest walk instead of
    /// the one with the most walks.
    pub p_slowest: f64,
    /// Walks buffered per block before spilling (shared among a block's
    /// pairs when Node2Vec walks are pooled by block pair). Given no block
    /// size, the engine buffers fewer (down to 16) when the budget cannot
    /// hold the pools and a block otherwise.
    pub pool_capacity: usize,
    /// Below this many walks, read single vertices instead of blocks.
    pub vertex_threshold: u64,
    /// Directory for walk spill files.
    pub work_dir: PathBuf,
    /// Memory mode, first-order walks dense enough to move by partition:
    /// graph data per partition that walks are sorted into each hop (a
    /// share of a core's L2 cache; default 512 KiB).
    pub partition_bytes: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::GraphWalker,
            exact: false,
            seed: 1,
            threads: 0,
            mem_budget: 512 << 20,
            block_size: None,
            adaptive: true,
            io: IoMode::Auto,
            p_slowest: 0.2,
            pool_capacity: 1024,
            vertex_threshold: 100_000,
            work_dir: std::env::temp_dir(),
            partition_bytes: PARTITION_BYTES,
        }
    }
}

/// Graph data per partition of in-memory walking by default: half of a
/// core's 1 MiB L2 cache here, leaving the other half to the walks
/// streaming through. On the permuted Kronecker 20 graph, 10M walks of 10
/// steps, 2 threads, alternating runs: compact walks 9 of 10 runs faster
/// than with 1 MiB (117-134M against 99-130M steps/s), exact walks 5 of 5
/// (51-52M against 47-49M); 384 KiB and 768 KiB measured the same as
/// 512 KiB, and 256 KiB was slower (79-97M).
pub const PARTITION_BYTES: u64 = 512 << 10;

/// The fine blocks that GraphWalker's self-adaptive loads group, as in the
/// paper: the default block size of adaptive first-order walks.
pub const FINE_BLOCK: u64 = 2 << 20;

impl Config {
    /// Checks the settings on their own, before any graph is opened: every
    /// error names the parameter that makes no sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        if self.mem_budget == 0 {
            return Err(InvalidArgument::new(
                "mem_budget",
                "the memory budget must be more than zero bytes",
            ));
        }
        if !(0.0..=1.0).contains(&self.p_slowest) {
            return Err(InvalidArgument::new(
                "p_slowest",
                format!("p must be a probability, got {}", self.p_slowest),
            ));
        }
        if self.partition_bytes == 0 {
            return Err(InvalidArgument::new(
                "partition_bytes",
                "the partition size of memory mode must be more than zero bytes",
            ));
        }
        if self.block_size == Some(0) {
            return Err(InvalidArgument::new(
                "block_size",
                "blocks must be at least one byte",
            ));
        }
        if self.pool_capacity == 0 {
            return Err(InvalidArgument::new(
                "pool_capacity",
                "walk pools must hold at least one walk",
            ));
        }
        Ok(())
    }

    /// [`Config::validate`], then the walk description: the stop and
    /// restart probabilities must be probabilities, Node2Vec's `p` and `q`
    /// finite and above 0.
    pub fn validate_for(&self, spec: &WalkSpec) -> Result<(), InvalidArgument> {
        self.validate()?;
        for (parameter, value) in [
            ("stop_probability", spec.stop_probability),
            ("restart_probability", spec.restart_probability),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(InvalidArgument::new(
                    parameter,
                    format!("a probability is in [0, 1], got {value}"),
                ));
            }
        }
        if let Some(bias) = spec.node2vec {
            for (parameter, name, value) in
                [("node2vec.p", "p", bias.p), ("node2vec.q", "q", bias.q)]
            {
                if !(value.is_finite() && value > 0.0) {
                    return Err(InvalidArgument::new(
                        parameter,
                        format!("Node2Vec's {name} must be a finite number above 0, got {value}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Node2Vec;

    #[test]
    fn the_default_configuration_is_valid() {
        assert_eq!(Config::default().validate(), Ok(()));
    }

    #[test]
    fn each_nonsense_setting_names_its_parameter() {
        type Breaks = fn(&mut Config);
        let cases: [(Breaks, &str); 6] = [
            (|c| c.mem_budget = 0, "mem_budget"),
            (|c| c.p_slowest = 1.5, "p_slowest"),
            (|c| c.p_slowest = f64::NAN, "p_slowest"),
            (|c| c.partition_bytes = 0, "partition_bytes"),
            (|c| c.block_size = Some(0), "block_size"),
            (|c| c.pool_capacity = 0, "pool_capacity"),
        ];
        for (break_it, parameter) in cases {
            let mut config = Config::default();
            break_it(&mut config);
            let err = config.validate().expect_err(parameter);
            assert_eq!(err.parameter, parameter, "{err}");
        }
    }

    #[test]
    fn node2vec_biases_must_be_positive_and_finite() {
        let config = Config::default();
        let mut spec = WalkSpec {
            starts: crate::spec::Starts::Uniform { walks: 1 },
            length: 10,
            stop_probability: 0.0,
            restart_probability: 0.0,
            kind: crate::spec::Kind::Unbiased,
            node2vec: None,
            dead_end: crate::spec::DeadEnd::Stop,
        };
        for (p, q, bad) in [
            (0.0, 1.0, Some("node2vec.p")),
            (1.0, f64::INFINITY, Some("node2vec.q")),
            (0.5, 2.0, None),
        ] {
            spec.node2vec = Some(Node2Vec { p, q });
            assert_eq!(config.validate_for(&spec).err().map(|e| e.parameter), bad);
        }
    }

    #[test]
    fn stop_and_restart_must_be_probabilities() {
        let config = Config::default();
        let spec = crate::apps::RawWalks::new(1, 10).spec;
        type Breaks = fn(&mut WalkSpec);
        let cases: [(Breaks, Option<&str>); 5] = [
            (|s| s.stop_probability = 1.0, None),
            (|s| s.restart_probability = 0.15, None),
            (|s| s.stop_probability = -0.1, Some("stop_probability")),
            (|s| s.stop_probability = f64::NAN, Some("stop_probability")),
            (|s| s.restart_probability = 2.0, Some("restart_probability")),
        ];
        for (break_it, bad) in cases {
            let mut spec = spec.clone();
            break_it(&mut spec);
            assert_eq!(config.validate_for(&spec).err().map(|e| e.parameter), bad);
        }
    }
}
