//! Other random-walk systems, built by hand outside this repository, run by
//! `cargo xtask bench walker-systems` beside the engine on the same graph
//! (`--graphwalker`, `--flashmob`, `--grasorw`, `--sowalker`,
//! `--thunderrw`). Nothing here
//! builds them: the user gives the path of a binary they built; the
//! benchmark exports the graph in the input format the system reads, runs
//! it, and reads the time the system reports for its own walking.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, ensure, Context as _, Result};
use serde_json::{json, Value};

use super::{capture, capture_json, reuse_or, reuse_or_rename, Bins};

/// One run of another system: its walking time as it reports it, and the
/// hops walked in that time.
pub(super) struct PeerRun {
    pub seconds: f64,
    pub hops: u64,
}

impl PeerRun {
    pub fn hops_per_sec(&self) -> f64 {
        self.hops as f64 / self.seconds
    }

    pub fn to_json(&self) -> Value {
        json!({ "seconds": self.seconds, "hops": self.hops, "hops_per_sec": self.hops_per_sec() })
    }
}

/// Runs `run` up to three times: another system's release may crash now
/// and then (SOWalker died of SIGFPE in one run of many here). Each
/// failure is noted; the third is the benchmark's error.
pub(super) fn retried(
    name: &str,
    notes: &mut Vec<String>,
    run: impl Fn() -> Result<PeerRun>,
) -> Result<PeerRun> {
    let mut attempt = 1;
    loop {
        match run() {
            Ok(done) => return Ok(done),
            Err(e) if attempt < 3 => {
                eprintln!("xtask: {name} failed, running it again: {e:#}");
                notes.push(format!(
                    "walker-systems: a {name} run failed and was run again: {}",
                    format!("{e:#}").lines().next().unwrap_or_default()
                ));
                attempt += 1;
            }
            Err(e) => return Err(e.context(format!("{name} failed three times"))),
        }
    }
}

/// GraphWalker's `rawrandomwalks` (ATC'20 release) on a symmetric graph
/// exported as a text edge list: `walks` walks of `length` steps from
/// uniform vertices, blocks of `block_bytes`, 2 in memory, 2 threads.
/// Its walks jump to a uniform vertex at a dead end and with probability
/// 0.15 at every step, so each takes all its steps. Its reported runtime
/// (`00_runtime`) leaves out its first run's conversion of the text into
/// its blocks, which the benchmark runs once before it measures.
pub(super) struct GraphWalker {
    binary: PathBuf,
    /// quiver-benches' bench-io, which drops files from the page cache.
    bench_io: PathBuf,
    /// Its checkout, for its configuration file.
    root: PathBuf,
    /// The text edge list, alone in a directory (it writes its blocks
    /// beside it).
    edges: PathBuf,
    vertices: u32,
}

impl GraphWalker {
    /// Exports `graph` for `binary` into `data` (reused when there) and
    /// converts it into GraphWalker's blocks of `block_bytes` with a short
    /// first run.
    pub fn prepare(
        bins: &Bins,
        binary: &Path,
        graph: &Path,
        vertices: u32,
        block_bytes: u64,
        data: &Path,
        notes: &mut Vec<String>,
    ) -> Result<GraphWalker> {
        let root = match std::env::var_os("GRAPHCHI_ROOT") {
            Some(root) => PathBuf::from(root),
            None => binary
                .ancestors()
                .nth(3)
                .with_context(|| {
                    format!(
                        "{} is not in a GraphWalker checkout's bin/apps/: set GRAPHCHI_ROOT",
                        binary.display()
                    )
                })?
                .to_owned(),
        };
        let edges = text_edges(bins, graph, data, "graphwalker", "edges.txt", notes)?;
        let peer = GraphWalker {
            binary: binary.to_owned(),
            bench_io: bins.bench_io.clone(),
            root,
            edges,
            vertices,
        };
        // Converts the text into blocks once, outside any measured run.
        peer.run(1000, 1, block_bytes)?;
        Ok(peer)
    }

    /// Runs `walks` walks of `length` steps with blocks of `block_bytes`,
    /// after dropping its files from the page cache (as the engine's runs
    /// drop the graph's).
    pub fn run(&self, walks: u64, length: u32, block_bytes: u64) -> Result<PeerRun> {
        let dir = beside(&self.edges);
        drop_cache(&self.bench_io, dir)?;
        let args = argv![
            "file",
            &self.edges,
            "N",
            self.vertices.to_string(),
            "R",
            walks.to_string(),
            "L",
            length.to_string(),
            "blocksize_kb",
            (block_bytes / 1024).to_string(),
            "nmblocks",
            "2",
            "execthreads",
            "2"
        ];
        let output = run_peer(&self.binary, &args, dir, &[("GRAPHCHI_ROOT", &self.root)])?;
        let seconds = reported(&output, "00_runtime:")?;
        Ok(PeerRun {
            seconds,
            hops: walks * u64::from(length),
        })
    }
}

/// FlashMob's `deepwalk` (SOSP'21 release) on a symmetric graph exported as
/// binary pairs, each edge once (it adds the reverse of every edge it
/// reads, and drops vertices without edges): `walks` walkers of `length`
/// steps on 2 threads. It counts a walk's start as one of its `-l` steps,
/// so it is given `length + 1`; its reported time (`time: X s`) is its
/// walking alone, after its graph preparation. Before its first walk with
/// a number of walkers per edge it has not seen in a directory, it
/// measures its samplers at that density (2 minutes here) and keeps the
/// result in `.fmob` there; [`FlashMob::prepare`] runs the measured
/// workload once for it.
pub(super) struct FlashMob {
    binary: PathBuf,
    /// The binary edge list.
    edges: PathBuf,
}

impl FlashMob {
    /// Exports `graph` for `binary` into `data` (reused when there), and
    /// runs `walks` walks of `length` steps once so that its measured runs
    /// find their density's sampler measurements made.
    pub fn prepare(
        bins: &Bins,
        binary: &Path,
        graph: &Path,
        (walks, length): (u64, u32),
        data: &Path,
        notes: &mut Vec<String>,
    ) -> Result<FlashMob> {
        let edges = edge_list(
            bins,
            graph,
            data,
            ("once.bin", "bin"),
            true,
            "walker-systems",
            notes,
        )?;
        let peer = FlashMob {
            binary: binary.to_owned(),
            edges,
        };
        eprintln!(
            "xtask: FlashMob's warm-up run: at a walker density it has not run before, \
             it first measures its samplers (about 2 minutes here; kept in {}/.fmob)",
            beside(&peer.edges).display()
        );
        peer.run(walks, length)?;
        Ok(peer)
    }

    pub fn run(&self, walks: u64, length: u32) -> Result<PeerRun> {
        let args = argv![
            "-g",
            &self.edges,
            "-f",
            "binary",
            "-t",
            "2",
            "-w",
            walks.to_string(),
            "-l",
            (length + 1).to_string()
        ];
        let dir = beside(&self.edges);
        let output = run_peer(&self.binary, &args, dir, &[])?;
        let seconds = reported(&output, "time: ")?;
        Ok(PeerRun {
            seconds,
            hops: walks * u64::from(length),
        })
    }
}

/// GraSorw (its release, bi-block engine, Node2Vec by rejection) on a
/// symmetric graph exported as a text edge list: a walk of `length` steps
/// from every vertex, blocks of `block_bytes` (the current block and one
/// ancillary block in memory), 2 threads. It reports its time (`total
/// time:`, without its first run's conversion into its blocks) but not
/// its steps: they are taken as `length` for every vertex with edges, the
/// most its walks can take (a walk from a vertex without edges takes none),
/// so its rate is, if anything, flattered.
pub(super) struct GraSorw {
    binary: PathBuf,
    bench_io: PathBuf,
    /// Its checkout, where it reads `conf/GraSorw.cnf`.
    root: PathBuf,
    edges: PathBuf,
    vertices: u32,
    /// Vertices with at least one edge.
    with_edges: u64,
}

impl GraSorw {
    /// Exports `graph` for `binary` (its checkout's `build/GraSorw`) into
    /// `data` and converts it into its blocks with a short first run.
    #[allow(clippy::too_many_arguments)] // The graph's facts and the run's.
    pub fn prepare(
        bins: &Bins,
        binary: &Path,
        graph: &Path,
        vertices: u32,
        with_edges: u64,
        block_bytes: u64,
        data: &Path,
        notes: &mut Vec<String>,
    ) -> Result<GraSorw> {
        let root = binary
            .ancestors()
            .nth(2)
            .context("GraSorw's binary is not in its checkout's build/")?
            .to_owned();
        let edges = text_edges(bins, graph, data, "grasorw", "edges.txt", notes)?;
        let peer = GraSorw {
            binary: binary.to_owned(),
            bench_io: bins.bench_io.clone(),
            root,
            edges,
            vertices,
            with_edges,
        };
        peer.run(1, (1.0, 1.0), block_bytes)?;
        Ok(peer)
    }

    /// Runs a walk of `length` steps from every vertex with Node2Vec's
    /// `(p, q)`, after dropping its files from the page cache.
    pub fn run(&self, length: u32, (p, q): (f64, f64), block_bytes: u64) -> Result<PeerRun> {
        drop_cache(&self.bench_io, beside(&self.edges))?;
        let args = argv![
            "file",
            &self.edges,
            "num-vertices",
            self.vertices.to_string(),
            "blocksize_kb",
            (block_bytes / 1024).to_string(),
            "nThreads",
            "2",
            "walk-length",
            length.to_string(),
            "walks-per-vertex",
            "1",
            "p",
            p.to_string(),
            "q",
            q.to_string()
        ];
        let output = run_peer(&self.binary, &args, &self.root, &[])?;
        let seconds = reported(&output, "total time:")?;
        Ok(PeerRun {
            seconds,
            hops: self.with_edges * u64::from(length),
        })
    }
}

/// SOWalker's `node2vec` (its release, simulated-annealing block
/// scheduler, walks updated continuously) on a symmetric graph exported
/// as a sorted text edge list: a walk of `length` steps from every vertex,
/// blocks of `block_bytes`, 2 in memory, 2 threads. Its time is its
/// `run_app`. Its steps are taken as `length` for every vertex with edges:
/// on a symmetric graph such a walk takes all its steps, and one from a
/// vertex without edges takes none. (The count it prints, `current_steps`,
/// comes before each round, so its last one misses the last round; it
/// also counts a step for each walk from a vertex without edges.)
pub(super) struct SoWalker {
    binary: PathBuf,
    bench_io: PathBuf,
    edges: PathBuf,
    /// Vertices with at least one edge.
    with_edges: u64,
}

impl SoWalker {
    /// Exports `graph` for `binary` into `data` and converts it into its
    /// blocks with a short first run.
    pub fn prepare(
        bins: &Bins,
        binary: &Path,
        graph: &Path,
        with_edges: u64,
        block_bytes: u64,
        data: &Path,
        notes: &mut Vec<String>,
    ) -> Result<SoWalker> {
        let edges = text_edges(bins, graph, data, "sowalker", "edges.txt", notes)?;
        let peer = SoWalker {
            binary: binary.to_owned(),
            bench_io: bins.bench_io.clone(),
            edges,
            with_edges,
        };
        peer.run(1, (2.0, 0.5), block_bytes)?;
        Ok(peer)
    }

    /// Runs a walk of `length` steps from every vertex with Node2Vec's
    /// `(p, q)`, after dropping its graph files from the page cache.
    pub fn run(&self, length: u32, (p, q): (f64, f64), block_bytes: u64) -> Result<PeerRun> {
        let dir = beside(&self.edges);
        drop_cache(&self.bench_io, dir)?;
        let args = argv![
            &self.edges,
            "sorted",
            "skip",
            "c_update",
            "blocksize",
            block_bytes.to_string(),
            "nmblocks",
            "2",
            "nthreads",
            "2",
            "walkpersource",
            "1",
            "length",
            length.to_string(),
            "p",
            p.to_string(),
            "q",
            q.to_string(),
            "memory",
            "1"
        ];
        let output = run_peer(&self.binary, &args, dir, &[])?;
        let seconds = reported(&output, "run_app:")?;
        Ok(PeerRun {
            seconds,
            hops: self.with_edges * u64::from(length),
        })
    }
}

/// ThunderRW's `deepwalk.out` (VLDB'21 release) on its own DeepWalk
/// workload: a walk of `length` steps from every vertex with edges, on 2
/// threads, on its CSR made from the symmetric text edge list by its
/// `toolset/EdgeList2CSR.out`. The graph has no weights, so it samples
/// uniformly (`-em 0 -sm 0`, its uniform execution and sampling; its
/// DeepWalk's default is alias sampling by weight). It counts a walk's
/// start as one of its `-l` steps, so it is given `length + 1`; it reports
/// its walking time and its steps.
pub(super) struct ThunderRw {
    binary: PathBuf,
    /// Its CSR's directory.
    csr: PathBuf,
}

impl ThunderRw {
    /// Exports `graph` for `binary` (in its checkout's
    /// `build/random_walk/`) into `data` and converts it into its CSR with
    /// its own tool (each reused when there).
    pub fn prepare(
        bins: &Bins,
        binary: &Path,
        graph: &Path,
        data: &Path,
        notes: &mut Vec<String>,
    ) -> Result<ThunderRw> {
        let tool = binary
            .ancestors()
            .nth(2)
            .map(|build| build.join("toolset/EdgeList2CSR.out"))
            .filter(|tool| tool.exists())
            .with_context(|| {
                format!(
                    "--thunderrw {}: no toolset/EdgeList2CSR.out in the build directory above it \
                     (give the build/random_walk/deepwalk.out of a ThunderRW build)",
                    binary.display()
                )
            })?;
        // It reads `b_edge_list.bin` (text, despite the name) in a directory.
        let edges = text_edges(bins, graph, data, "thunderrw", "b_edge_list.bin", notes)?;
        let csr = beside(&edges).join("csr");
        reuse_or_rename(&csr, "walker-systems", notes, |partial| {
            fs::create_dir_all(partial)
                .with_context(|| format!("creating {}", partial.display()))?;
            run_peer(
                &tool,
                &argv![beside(&edges), partial, "#"],
                beside(&edges),
                &[],
            )?;
            Ok(())
        })?;
        Ok(ThunderRw {
            binary: binary.to_owned(),
            csr,
        })
    }

    pub fn run(&self, length: u32) -> Result<PeerRun> {
        let args = argv![
            "-f",
            &self.csr,
            "-n",
            "2",
            "-l",
            (length + 1).to_string(),
            "-em",
            "0",
            "-sm",
            "0"
        ];
        let output = run_peer(&self.binary, &args, &self.csr, &[])?;
        let seconds = reported(&output, "Walking time (seconds):")?;
        let steps = reported(&output, "Num of steps:")?;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // A count it printed.
        Ok(PeerRun {
            seconds,
            hops: steps as u64,
        })
    }
}

/// `graph` as a text edge list (both directions of every edge) named
/// `name` alone in the directory `data/<graph>.<peer>`, where `peer`
/// writes its own files beside it: a hard link to one export shared by
/// the peers (reused when there).
fn text_edges(
    bins: &Bins,
    graph: &Path,
    data: &Path,
    peer: &str,
    name: &str,
    notes: &mut Vec<String>,
) -> Result<PathBuf> {
    let shared = data_file(graph, data, "txt")?;
    reuse_or(&shared, "walker-systems", notes, || {
        capture_json(
            &bins.quiver,
            &argv!["--json", "export", graph, "-o", &shared, "--format", "snap"],
        )
    })?;
    let dir = data_file(graph, data, peer)?;
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let edges = dir.join(name);
    if !edges.exists() {
        fs::hard_link(&shared, &edges)
            .or_else(|_| fs::copy(&shared, &edges).map(|_| ()))
            .with_context(|| format!("linking {} to {}", edges.display(), shared.display()))?;
    }
    Ok(edges)
}

/// `graph`'s edges as `data/<graph>.<suffix>` (a peer may read the format
/// off the suffix) in quiver's export `format` (`bin` or `snap` text):
/// with `each_edge_once`, once each (source <= target), for a peer that
/// adds the reverses itself; exported unless it is there.
pub(super) fn edge_list(
    bins: &Bins,
    graph: &Path,
    data: &Path,
    (suffix, format): (&str, &str),
    each_edge_once: bool,
    bench: &str,
    notes: &mut Vec<String>,
) -> Result<PathBuf> {
    let edges = data_file(graph, data, suffix)?;
    reuse_or(&edges, bench, notes, || {
        let mut args = argv!["--json", "export", graph, "-o", &edges, "--format", format].to_vec();
        if each_edge_once {
            args.push("--each-edge-once".into());
        }
        capture_json(&bins.quiver, &args)
    })?;
    Ok(edges)
}

/// `data/<graph's name>.<suffix>`: a file (or directory) made for a peer
/// from `graph`.
pub(super) fn data_file(graph: &Path, data: &Path, suffix: &str) -> Result<PathBuf> {
    let stem = graph
        .file_stem()
        .context("the graph's file has no name")?
        .to_string_lossy();
    Ok(data.join(format!("{stem}.{suffix}")))
}

/// The directory holding `file`, a peer's input (made by [`data_file`] or
/// [`text_edges`], so it has one).
fn beside(file: &Path) -> &Path {
    file.parent().expect("a peer's input lies in a directory")
}

/// Drops every file under `dir` from the page cache with `bench_io`.
fn drop_cache(bench_io: &Path, dir: &Path) -> Result<()> {
    let mut files: Vec<OsString> = vec!["drop-cache".into()];
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.is_file() {
                files.push(path.into());
            }
        }
    }
    if files.len() > 1 {
        capture(bench_io, &files)?;
    }
    Ok(())
}

/// Runs a peer in `dir` with `env`, echoing the command; returns its
/// stdout and stderr together (peers log their timings to either).
pub(super) fn run_peer(
    program: &Path,
    args: &[OsString],
    dir: &Path,
    env: &[(&str, &Path)],
) -> Result<String> {
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    eprintln!("xtask: {} {}", program.display(), shown.join(" "));
    let mut command = Command::new(program);
    command.args(args).current_dir(dir).stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    let out = command
        .output()
        .with_context(|| format!("running {}", program.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let tail: Vec<&str> = text.lines().rev().take(10).collect();
        bail!(
            "{} {} failed ({}); its last lines:\n{}",
            program.display(),
            shown.join(" "),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(text)
}

/// The positive number a peer printed right after `marker` (spaces
/// aside) on its last line holding it.
pub(super) fn reported(output: &str, marker: &str) -> Result<f64> {
    numbers_after(output, marker)
        .pop()
        .filter(|&x| x > 0.0)
        .with_context(|| format!("the peer's output has no number after {marker:?}"))
}

/// Every number a peer printed right after `marker`, in order; an error
/// when there is none, or one is not positive (a time or a count).
pub(super) fn reported_all(output: &str, marker: &str) -> Result<Vec<f64>> {
    let numbers = numbers_after(output, marker);
    ensure!(
        !numbers.is_empty(),
        "the peer's output has no number after {marker:?}"
    );
    ensure!(
        numbers.iter().all(|&x| x > 0.0),
        "the peer reported a number that is not positive after {marker:?}: {numbers:?}"
    );
    Ok(numbers)
}

/// The numbers right after `marker` on the lines holding it (spaces
/// aside, a unit straight after the number ignored: Gemini's
/// `exec_time=0.78(s)`).
fn numbers_after(output: &str, marker: &str) -> Vec<f64> {
    output
        .lines()
        .filter_map(|line| {
            let rest = line[line.find(marker)? + marker.len()..].trim_start();
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+')))
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{reported, reported_all};

    /// The lines each peer prints its time and steps on, as they print them.
    #[test]
    fn the_peers_times_and_steps_are_read_from_their_own_lines() {
        let graphwalker = "5_exec_updates:\t\t32.4886s\t (count: 74)\n00_runtime:\t\t33.8155 s\n";
        assert_eq!(reported(graphwalker, "00_runtime:").unwrap(), 33.8155);
        let flashmob = "Percent\t4.99%\n\
             W1127 17:47:55 solver.hpp:367] time: 1.49121 s, step: 105 M, throughput: 70.3 M/s\n";
        assert_eq!(reported(flashmob, "time: ").unwrap(), 1.49121);
        let grasorw =
            "1_ProcessTime:\t\t3.99744 s\ntotal time: 3.99744  1\nround 0 run time: 3.99744\n";
        assert_eq!(reported(grasorw, "total time:").unwrap(), 3.99744);
        let sowalker =
            "\x1b[0mcurrent_steps is:6864075\nrun_app:\t\t5.49297 s\n[Other]\nscheduler:\tsa\n";
        assert_eq!(reported(sowalker, "run_app:").unwrap(), 5.49297);
        // Each thread's lines come before the run's.
        let thunderrw = "\x1b[90mcreeper.h:412:\x1b[0m Thread 0 Walking time (seconds): 0.000026\n\
             \x1b[90mcreeper.h:414:\x1b[0m Thread 0 Num of steps: 4500\n\
             \x1b[90mcreeper.h:801:\x1b[0m Walking time (seconds): 0.003495\n\
             \x1b[90mcreeper.h:802:\x1b[0m Num of steps: 9000\n";
        assert_eq!(
            reported(thunderrw, "Walking time (seconds):").unwrap(),
            0.003495
        );
        assert_eq!(reported(thunderrw, "Num of steps:").unwrap(), 9000.0);
        let gemini = "exec_time=0.787542(s)\npr_sum=706533.450001\nexec_time=0.768126(s)\n";
        assert_eq!(
            reported_all(gemini, "exec_time=").unwrap(),
            [0.787542, 0.768126]
        );
        let failed = "time: 0 s\n";
        assert!(
            reported(failed, "time: ").is_err(),
            "a zero time is no time"
        );
        assert!(reported("nothing here\n", "run_app:").is_err());
    }
}
