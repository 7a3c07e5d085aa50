//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use quiver_csr::EdgeFormat;

use quiver_io::size::parse_bytes;

use crate::units::parse_range;

/// Quiver: graph systems from the literature as engines you can run.
///
/// Graphs live in `.qcsr` files (checksummed CSR, 4 KiB aligned). Make one
/// with `generate` or `convert`, look at it with `info`, and hand it to an
/// engine.
#[derive(Debug, Parser)]
#[command(
    name = "quiver",
    version,
    propagate_version = true,
    max_term_width = 100
)]
#[command(after_help = "Examples:
  quiver demo
  quiver generate rmat --scale 20 --edge-factor 16 --seed 1 -o rmat20.qcsr
  quiver convert soc-LiveJournal1.txt.gz -o lj.qcsr --dedupe --mem 2GiB
  quiver info lj.qcsr --block-size 8MiB --verify")]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every subcommand takes.
#[derive(Debug, Args)]
pub struct Global {
    /// More log output on stderr (-v info, -vv debug, -vvv trace); QUIVER_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Print a machine-readable JSON report on stdout instead of the summary.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate a synthetic graph (R-MAT, Erdős–Rényi, or a small shape).
    #[command(after_help = "Examples:
  quiver generate rmat --scale 22 --edge-factor 16 --seed 7 -o rmat22.qcsr
  quiver generate rmat --scale 16 --undirected --weights 1..100 -o w.qcsr
  quiver generate er --vertices 100000 --edges 1000000 -o er.qcsr
  quiver generate grid --rows 100 --cols 100 --undirected -o grid.qcsr")]
    Generate(GenerateArgs),
    /// Convert an edge list (text, binary, Matrix Market or LDBC Graphalytics; .gz or stdin) into
    /// a .qcsr graph.
    #[command(after_help = "Examples:
  quiver convert edges.txt -o g.qcsr
  quiver convert web-Google.txt.gz -o google.qcsr --dedupe --drop-self-loops
  quiver convert twitter.bin --format bin -o twitter.qcsr --mem 4GiB
  quiver convert mesh.mtx -o mesh.qcsr
  quiver convert datagen-7_5-fb.e --format graphalytics
  zcat big.txt.gz | quiver convert - -o big.qcsr --relabel

Inputs larger than --mem are sorted externally: sorted runs are spilled to
--work-dir (default: the system temporary directory) and merged.

LDBC Graphalytics datasets (--format graphalytics, guessed for NAME.e): the
edges `src dst [weight]` come from NAME.e, the vertices from NAME.v beside it
(any u64 ids, isolated vertices included, held in memory at 8 bytes a
vertex). Vertices are numbered in increasing order of their ids, and the
graph keeps the ids as its id map: `info` shows it, `export` writes them.
If NAME.properties says `directed = false` the graph is undirected (every
edge stored both ways); --undirected on a dataset it calls directed is an
error.")]
    Convert(ConvertArgs),
    /// Write a .qcsr graph back out as an edge list (text or binary).
    #[command(after_help = "Examples:
  quiver export g.qcsr -o edges.txt
  quiver export g.qcsr -o edges.bin --format bin
  quiver export g.qcsr -o - | head")]
    Export(ExportArgs),
    /// Show a graph's size, degree distribution and block partition; verify its checksums.
    #[command(after_help = "Examples:
  quiver info g.qcsr
  quiver info g.qcsr --block-size 8MiB
  quiver info g.qcsr --chunks 4 --alpha 8
  quiver info g.qcsr --verify --json")]
    Info(InfoArgs),
    /// Run random walks out of core (GraphWalker), with its baselines.
    #[command(after_help = "Examples:
  quiver walk ppr g.qcsr --source 0 --mem 256MiB
  quiver walk rwd g.qcsr --mode iteration --block-size 16MiB
  quiver walk raw g.qcsr --walks 10000000 --length 10 --io buffered
  quiver walk simrank g.qcsr --a 1 --b 2 --json
  quiver walk corpus g.qcsr -o walks.txt --walks-per-vertex 10 --length 80")]
    Walk {
        #[command(subcommand)]
        app: crate::walk::WalkCommand,
    },
    /// Graph analytics in BSP supersteps (RGraph): the LDBC Graphalytics algorithms.
    #[command(after_help = "Examples:
  quiver bsp bfs g.qcsr --source 0
  quiver bsp pagerank g.qcsr --iterations 20 --threads 2 --json
  quiver bsp wcc g.qcsr --direction push
  quiver bsp sssp weighted.qcsr --source 1 -o distances.txt
  quiver bsp cdlp g.qcsr --iterations 10 --reference")]
    Bsp {
        #[command(subcommand)]
        algorithm: crate::bsp::BspCommand,
    },
    /// GraphSSD on a simulated SSD: the paper's applications on its graph translation layer or on
    /// the CSR baseline through an FTL, with pages read and modelled device time.
    #[command(after_help = "Examples:
  quiver gtl run bfs g.qcsr --source 0 --depth-fraction 0.66
  quiver gtl run pagerank g.qcsr --backend csr --cache 64MiB --json
  quiver gtl run random-reads g.qcsr --requests 1000000 --cache 2MiB
  quiver gtl get g.qcsr 17 --backend csr")]
    Gtl {
        #[command(subcommand)]
        command: crate::gtl::GtlCommand,
    },
    /// Pragh's distributed graph store: hot values migrate, one vertex at a time, to the node
    /// that reads them (split live migration); the paper's traversal benchmark per policy.
    Kv {
        #[command(subcommand)]
        command: crate::kv::KvCommand,
    },
    /// GraphMeta's versioned metadata graph: users, jobs, processes and files with their
    /// relations, on a cluster of RocksDB servers partitioned by DIDO; provenance queries as of
    /// any past time.
    #[command(after_help = r#"Examples:
  quiver meta cluster up --servers 4                  (in another terminal:)
  quiver meta load --cluster meta-cluster/cluster --generate darshan --vertices 100000
  quiver meta query --cluster meta-cluster/cluster 'v("uid:1000").e(run).v().e(write)'
  quiver meta bench insert --servers 4 --clients 32"#)]
    Meta {
        #[command(subcommand)]
        command: crate::meta::MetaCommand,
    },
    /// Check and measure the RDMA verbs fabrics that the distributed engines run on.
    #[command(after_help = "Examples:
  quiver verbs check --nodes 4
  quiver verbs bench --nodes 2
  srun -n 16 quiver verbs check --coordinator node01:7000")]
    Verbs {
        #[command(subcommand)]
        task: crate::verbs::VerbsCommand,
    },
    /// One node of a local job that a command spawned (internal): runs the task named in the
    /// environment the job set, from the registry in main.rs.
    #[command(name = crate::NODE_ENTRY, hide = true)]
    Node,
    /// Every engine once, in under a minute, with nothing to start by hand: generate and convert,
    /// an out-of-core walk, bsp PageRank on 2 processes, kv with migration, gtl on a simulated
    /// SSD, a meta cluster's provenance query. Each step prints the command that does it by hand.
    Demo(DemoArgs),
}

/// Options that decide how edges become a graph.
#[derive(Debug, Args)]
pub struct ShapeArgs {
    /// Add the reverse of every edge.
    #[arg(long)]
    pub undirected: bool,
    /// Keep one copy of each (source, target) pair.
    #[arg(long)]
    pub dedupe: bool,
    /// Drop edges from a vertex to itself.
    #[arg(long)]
    pub drop_self_loops: bool,
    /// Memory budget for sorting edges (KiB, MiB, GiB); larger inputs spill to disk.
    #[arg(long, default_value = "1GiB", value_parser = crate::units::parse_mem)]
    pub mem: u64,
    /// Directory for spilled sort runs (default: the system temporary directory).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    pub model: Model,
}

/// Flags shared by every generator.
#[derive(Debug, Args)]
pub struct GenerateCommon {
    /// Output .qcsr file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Random seed; the same seed gives the same graph.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Attach uniform integer weights from an inclusive range, e.g. 1..100.
    #[arg(long, value_parser = parse_range)]
    pub weights: Option<(u32, u32)>,
    #[command(flatten)]
    pub shape: ShapeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Model {
    /// R-MAT / Kronecker graph with 2^scale vertices (Graph500 a=0.57, b=0.19, c=0.19 by default),
    /// vertex ids randomly permuted as Graph500 does (--no-permute keeps the hubs at low ids).
    Rmat {
        /// log2 of the vertex count (1..=31).
        #[arg(long)]
        scale: u32,
        /// Edges per vertex.
        #[arg(long, default_value_t = 16, value_parser = crate::units::at_least_one::<u64>())]
        edge_factor: u64,
        /// Probability of the top-left quadrant.
        #[arg(long, default_value_t = 0.57)]
        a: f64,
        /// Probability of the top-right quadrant.
        #[arg(long, default_value_t = 0.19)]
        b: f64,
        /// Probability of the bottom-left quadrant.
        #[arg(long, default_value_t = 0.19)]
        c: f64,
        /// Keep the generator's raw ids: the largest hubs at the lowest ids, a locality that
        /// flatters caches and block-based engines (by default ids are permuted per seed).
        #[arg(long)]
        no_permute: bool,
        #[command(flatten)]
        common: GenerateCommon,
    },
    /// Erdős–Rényi G(n, m): m edges with uniform random endpoints.
    Er {
        /// Number of vertices.
        #[arg(long)]
        vertices: u32,
        /// Number of edges drawn.
        #[arg(long)]
        edges: u64,
        #[command(flatten)]
        common: GenerateCommon,
    },
    /// Path 0 -> 1 -> ... -> n-1.
    Path {
        /// Number of vertices.
        #[arg(long)]
        vertices: u32,
        #[command(flatten)]
        common: GenerateCommon,
    },
    /// Cycle 0 -> 1 -> ... -> n-1 -> 0.
    Cycle {
        /// Number of vertices.
        #[arg(long)]
        vertices: u32,
        #[command(flatten)]
        common: GenerateCommon,
    },
    /// Star: 0 -> i for every other vertex i.
    Star {
        /// Number of vertices.
        #[arg(long)]
        vertices: u32,
        #[command(flatten)]
        common: GenerateCommon,
    },
    /// Grid: each cell points to its right and lower neighbours.
    Grid {
        /// Rows.
        #[arg(long)]
        rows: u32,
        /// Columns.
        #[arg(long)]
        cols: u32,
        #[command(flatten)]
        common: GenerateCommon,
    },
    /// Complete directed graph: every ordered pair of distinct vertices.
    Complete {
        /// Number of vertices.
        #[arg(long)]
        vertices: u32,
        #[command(flatten)]
        common: GenerateCommon,
    },
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Input edge list; `-` reads standard input; a `.gz` name is decompressed.
    pub input: PathBuf,
    /// Output .qcsr file (default: the input's name with .qcsr for its extension).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Input format: snap, bin, mtx or graphalytics; guessed from the name when omitted (.mtx,
    /// .bin, .e, else snap text).
    #[arg(long)]
    pub format: Option<EdgeFormat>,
    /// Binary input holds (u32, u32, f32) triples instead of u32 pairs.
    #[arg(long)]
    pub weighted: bool,
    /// Drop the input's weights.
    #[arg(long)]
    pub ignore_weights: bool,
    /// Map sparse (up to 64-bit) ids onto 0..|V| in increasing order.
    #[arg(long)]
    pub relabel: bool,
    /// Give the graph at least this many vertices (an edge list cannot name
    /// isolated vertices at the top of the id range).
    #[arg(long, default_value_t = 0)]
    pub vertices: u64,
    /// Keep the graph directed even if every edge has its reverse (by
    /// default such an edge list is stored undirected, and the report says so).
    #[arg(long, conflicts_with = "undirected")]
    pub directed: bool,
    #[command(flatten)]
    pub shape: ShapeArgs,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The .qcsr graph.
    pub graph: PathBuf,
    /// Output edge list; `-` writes standard output.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format (snap text or bin); guessed from the name when omitted.
    #[arg(long)]
    pub format: Option<EdgeFormat>,
    /// Write each edge of an undirected graph once (source <= target), for
    /// tools that add every edge's reverse themselves (FlashMob, GAPBS's
    /// -s); a directed graph is refused.
    #[arg(long)]
    pub each_edge_once: bool,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The .qcsr graph.
    pub graph: PathBuf,
    /// Partition into blocks of at most this many bytes (walker blocks).
    #[arg(long, value_parser = parse_bytes, conflicts_with = "chunks")]
    pub block_size: Option<u64>,
    /// Partition into k chunks balancing alpha*|V_i| + |E_i| (distributed engines).
    #[arg(long)]
    pub chunks: Option<u32>,
    /// Weight of a vertex against an edge when balancing chunks.
    #[arg(long, default_value_t = 8.0, requires = "chunks")]
    pub alpha: f64,
    /// Also check what opening leaves (opening verifies every checksum and target): that a
    /// graph claiming distinct targets has no repeated edge, and that weights are finite.
    #[arg(long)]
    pub verify: bool,
    /// List every block, not just a summary.
    #[arg(long)]
    pub list_blocks: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the demo's files in this directory instead of a temporary one.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// R-MAT scale of the demo graph (every step but meta's runs on it).
    #[arg(long, default_value_t = 14)]
    pub scale: u32,
    /// How long the kv step's benchmark runs.
    #[arg(long, default_value = "4s", value_parser = crate::units::parse_duration)]
    pub kv_duration: std::time::Duration,
    /// Vertices of the meta step's Darshan-like graph.
    #[arg(long, default_value_t = 20_000)]
    pub meta_vertices: usize,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Cli;

    /// A shown shell command cut into words: quotes kept together, a `#`
    /// comment dropped, `|`, `&`, `&&` and `;` as words of their own.
    fn shell_words(command: &str) -> Vec<String> {
        let (mut words, mut word, mut quote) = (Vec::new(), String::new(), None);
        for c in command.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => quote = Some(c),
                (None, '#') if word.is_empty() => break,
                (None, c) if c.is_whitespace() => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                (None, c) => word.push(c),
            }
        }
        assert!(quote.is_none(), "unbalanced quotes in {command:?}");
        if !word.is_empty() {
            words.push(word);
        }
        words
    }

    /// The doc gate: every `quiver` command the README shows (after `$ `,
    /// under a launcher or in a pipe too) parses with today's flags.
    #[test]
    fn every_command_the_readme_shows_parses() {
        let readme = include_str!("../../../README.md");
        let mut lines = readme.lines();
        let mut checked = 0;
        while let Some(line) = lines.next() {
            let Some(shown) = line.strip_prefix("$ ") else {
                continue;
            };
            let mut command = shown.to_string();
            while command.ends_with('\\') {
                command.pop();
                command.push_str(lines.next().expect("a continued line goes on"));
            }
            let words = shell_words(&command);
            for segment in words.split(|w| matches!(w.as_str(), "|" | "&" | "&&" | ";")) {
                let Some(start) = segment.iter().position(|w| w == "quiver") else {
                    continue;
                };
                if let Err(err) = Cli::try_parse_from(&segment[start..]) {
                    panic!("README shows `{command}`, which no longer parses:\n{err}");
                }
                checked += 1;
            }
        }
        assert!(checked > 40, "only {checked} commands found in the README");
    }

    #[test]
    fn shell_words_keep_quotes_and_drop_comments() {
        assert_eq!(
            shell_words(r#"quiver meta query 'v("a b").e(run)' --limit 3   # three"#),
            [
                "quiver",
                "meta",
                "query",
                r#"v("a b").e(run)"#,
                "--limit",
                "3"
            ]
        );
        assert_eq!(
            shell_words("zcat x.gz | quiver convert - -o y.qcsr &"),
            ["zcat", "x.gz", "|", "quiver", "convert", "-", "-o", "y.qcsr", "&"]
        );
    }

    /// Long names of shared flags under another name, each with what the
    /// conventions name it.
    const SYNONYMS: [(&str, &str); 12] = [
        ("image", "the shared flag is --device"),
        ("num-nodes", "the shared flag is --nodes"),
        ("node-count", "the shared flag is --nodes"),
        ("num-threads", "the shared flag is --threads"),
        ("jobs", "the shared flag is --threads"),
        ("memory", "the shared flag is --mem"),
        ("mem-budget", "the shared flag is --mem"),
        ("budget", "the shared flag is --mem"),
        ("out", "the shared flag is --output"),
        ("output-file", "the shared flag is --output"),
        ("out-file", "the shared flag is --output"),
        ("graph", "the graph is a positional GRAPH"),
    ];

    /// Every way `command` and its subcommands (recursively, hidden ones
    /// and clap's own `help` aside) break the command-line conventions of
    /// ARCHITECTURE.md: an argument without help; a shared flag (image,
    /// graph, nodes, fabric, threads, mem, json, output) under another
    /// name or form; a default stated in the help beside clap's own.
    fn breaches(command: &clap::Command) -> Vec<String> {
        let mut command = command.clone();
        command.build();
        let mut found = Vec::new();
        walk(&command, command.get_name(), &mut found);
        found
    }

    fn walk(command: &clap::Command, path: &str, found: &mut Vec<String>) {
        let fabrics = ["loopback", "tcp", "mpi", "ibverbs"];
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if arg.is_hide_set() || matches!(id, "help" | "version") {
                continue;
            }
            let name = match arg.get_long() {
                Some(long) => format!("--{long}"),
                None => id.to_uppercase(),
            };
            let mut breach = |what: String| found.push(format!("{path} {name}: {what}"));
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            if help.trim().is_empty() {
                breach("no help".into());
            }
            let shows_default =
                !arg.get_default_values().is_empty() && !arg.is_hide_default_value_set();
            if shows_default && help.contains("(default") {
                breach("a default in its help beside clap's [default]".into());
            }
            let long = arg.get_long();
            if let Some((synonym, shared)) = SYNONYMS.iter().find(|(s, _)| long == Some(*s)) {
                breach(format!("{shared}, not --{synonym}"));
            }
            if arg.is_positional() && matches!(id, "image" | "device") {
                breach("an image is named by --device IMAGE".into());
            }
            let takes_value = arg.get_action().takes_values();
            match long {
                Some("device") => {
                    let names = arg.get_value_names().unwrap_or_default();
                    if names.len() != 1 || names[0].as_str() != "IMAGE" || !takes_value {
                        breach("--device takes one IMAGE".into());
                    }
                }
                Some("nodes" | "threads" | "mem") if !takes_value || arg.get_short().is_some() => {
                    breach("a long flag with a value, no short form".into());
                }
                Some("fabric") => {
                    let values: Vec<String> = arg
                        .get_possible_values()
                        .iter()
                        .map(|v| v.get_name().to_string())
                        .collect();
                    if values != fabrics {
                        breach(format!("--fabric takes {fabrics:?}, not {values:?}"));
                    }
                }
                Some("json") if !arg.is_global_set() => {
                    breach("--json is the one global flag".into());
                }
                Some("output") if arg.get_short() != Some('o') => {
                    breach("--output is also -o".into());
                }
                _ => {}
            }
            if long == Some("threads") && !help.contains("(0: one per core)") {
                breach("--threads says what 0 means: (0: one per core)".into());
            }
            if arg.get_short() == Some('o') && long != Some("output") {
                breach("-o is --output only".into());
            }
        }
        for sub in command.get_subcommands() {
            if !sub.is_hide_set() && sub.get_name() != "help" {
                walk(sub, &format!("{path} {}", sub.get_name()), found);
            }
        }
    }

    /// The conventions every subcommand keeps, over clap's whole command
    /// tree.
    #[test]
    fn every_subcommand_keeps_the_flag_conventions() {
        use clap::CommandFactory;
        let found = breaches(&Cli::command());
        assert!(found.is_empty(), "breaches of the conventions:\n{found:#?}");
    }

    /// The check finds what it looks for.
    #[test]
    fn the_convention_check_names_each_breach() {
        use clap::{Arg, ArgAction, Command};
        let bad = Command::new("quiver").subcommand(
            Command::new("x")
                .arg(Arg::new("image").help("The image."))
                .arg(Arg::new("threads").long("threads").help("Workers."))
                .arg(Arg::new("memory").long("memory").help("Budget."))
                .arg(Arg::new("out").long("out").short('o').help("Output."))
                .arg(
                    Arg::new("fabric")
                        .long("fabric")
                        .value_parser(["tcp"])
                        .help("Fabric."),
                )
                .arg(
                    Arg::new("json")
                        .long("json")
                        .action(ArgAction::SetTrue)
                        .help("JSON."),
                )
                .arg(
                    Arg::new("seed")
                        .long("seed")
                        .default_value("1")
                        .help("Seed (default: 1)."),
                )
                .arg(Arg::new("quiet").long("quiet").action(ArgAction::SetTrue)),
        );
        let found = breaches(&bad);
        for expected in [
            "quiver x IMAGE: an image is named by --device IMAGE",
            "quiver x --threads: --threads says what 0 means: (0: one per core)",
            "quiver x --memory: the shared flag is --mem, not --memory",
            "quiver x --out: the shared flag is --output, not --out",
            "quiver x --out: -o is --output only",
            "quiver x --fabric: --fabric takes [\"loopback\", \"tcp\", \"mpi\", \"ibverbs\"], not [\"tcp\"]",
            "quiver x --json: --json is the one global flag",
            "quiver x --seed: a default in its help beside clap's [default]",
            "quiver x --quiet: no help",
        ] {
            assert!(found.iter().any(|b| b == expected), "{expected:?} not in {found:#?}");
        }
        assert_eq!(found.len(), 9, "{found:#?}");
    }
}
