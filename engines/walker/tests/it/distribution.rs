//! Compact mode (draws keyed by batch and position, not by walk) cannot be
//! compared walk for walk, so its walks are compared in distribution: where
//! they end, against the in-memory reference and the exact distribution.
//! Weighted walks follow their weights.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use quiver_csr::Graph;
use quiver_walker::apps::{RawWalks, VisitFrequency};
use quiver_walker::{run, Config, DeadEnd, Kind, Mode, Starts, Visit, WalkApp, WalkSpec};

use crate::apps::{adjacency, karate};
use crate::write;

/// Where walks from uniform starts stand at their last hop. One position
/// per walk, so the counts are a multinomial sample (all visits of a walk
/// would be correlated, and chi-square assumes independent draws).
#[derive(Debug)]
struct EndPoints {
    spec: WalkSpec,
    counts: Vec<AtomicU64>,
    /// Whether it says it reads positions only (so that memory mode moves
    /// compact walks as bare vertices).
    positions_only: bool,
}

impl EndPoints {
    fn new(num_vertices: usize, walks: u64, length: u32) -> EndPoints {
        EndPoints {
            positions_only: false,
            spec: WalkSpec {
                starts: Starts::Uniform { walks },
                length,
                stop_probability: 0.0,
                restart_probability: 0.0,
                kind: Kind::Unbiased,
                node2vec: None,
                dead_end: DeadEnd::Stop,
            },
            counts: (0..num_vertices).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl WalkApp for EndPoints {
    type State = ();
    type Output = Vec<u64>;

    fn spec(&self) -> WalkSpec {
        self.spec.clone()
    }
    fn new_state(&self) {}
    fn visit(&self, _state: &mut (), visit: &Visit) {
        if visit.hop == self.spec.length {
            self.counts[visit.vertex as usize].fetch_add(1, Ordering::Relaxed);
        }
    }
    fn reads_positions_only(&self) -> bool {
        self.positions_only
    }
    fn merge(&self, _into: &mut (), _other: ()) {}
    fn finish(&self, _state: ()) -> quiver_walker::Result<Vec<u64>> {
        Ok(self
            .counts
            .iter()
            .map(|c| c.swap(0, Ordering::Relaxed))
            .collect())
    }
}

/// End-point counts of `walks` compact-mode walks of `length` steps.
fn end_points(path: &Path, config: &Config, walks: u64, length: u32) -> Vec<u64> {
    end_points_of(
        path,
        config,
        EndPoints::new(adjacency(path).len(), walks, length),
    )
}

fn end_points_of(path: &Path, config: &Config, app: EndPoints) -> Vec<u64> {
    let walks = app.spec.starts.total(0);
    let counts = run(path, config, &app).unwrap().result;
    assert!(!config.exact);
    assert_eq!(
        counts.iter().sum::<u64>(),
        walks,
        "every walk ends at hop L"
    );
    counts
}

/// Merges bins until each has an expected count of at least 5: bins are
/// taken smallest first into one pooled bin until it reaches 5. Takes and
/// returns `(expected weight, observed...)` rows.
fn merge_small(mut bins: Vec<(f64, Vec<f64>)>, min_expected: f64) -> Vec<(f64, Vec<f64>)> {
    bins.retain(|(e, _)| *e > 0.0);
    bins.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, Vec<f64>)> = Vec::new();
    let mut pooled: Option<(f64, Vec<f64>)> = None;
    for (e, o) in bins {
        match pooled.take() {
            Some((pe, po)) if pe < min_expected => {
                let sum = po.iter().zip(&o).map(|(a, b)| a + b).collect();
                pooled = Some((pe + e, sum));
            }
            Some(done) => {
                out.push(done);
                pooled = Some((e, o));
            }
            None => pooled = Some((e, o)),
        }
    }
    out.extend(pooled);
    out
}

/// Pearson's two-sample chi-square homogeneity statistic over vertices and
/// its degrees of freedom (bins - 1), merging bins whose smaller expected
/// count is below 5.
fn homogeneity(a: &[u64], b: &[u64]) -> (f64, u32) {
    let na = a.iter().sum::<u64>() as f64;
    let nb = b.iter().sum::<u64>() as f64;
    let share = na.min(nb) / (na + nb);
    let bins = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| {
            let col = (x + y) as f64;
            (col * share, vec![x as f64, y as f64])
        })
        .collect();
    let bins = merge_small(bins, 5.0);
    let stat = bins
        .iter()
        .map(|(_, o)| {
            let col = o[0] + o[1];
            let ea = col * na / (na + nb);
            let eb = col * nb / (na + nb);
            (o[0] - ea).powi(2) / ea + (o[1] - eb).powi(2) / eb
        })
        .sum();
    (stat, bins.len() as u32 - 1)
}

/// Pearson's goodness-of-fit statistic of `counts` against probabilities
/// `p`, and its degrees of freedom.
fn goodness_of_fit(counts: &[u64], p: &[f64]) -> (f64, u32) {
    let n = counts.iter().sum::<u64>() as f64;
    let bins = counts
        .iter()
        .zip(p)
        .map(|(&c, &p)| (n * p, vec![c as f64]))
        .collect();
    let bins = merge_small(bins, 5.0);
    let stat = bins.iter().map(|(e, o)| (o[0] - e).powi(2) / e).sum();
    (stat, bins.len() as u32 - 1)
}

/// The 0.999 quantile of chi-square with `df` degrees of freedom, by
/// Wilson-Hilferty: `df (1 - 2/(9 df) + z sqrt(2/(9 df)))^3` with z the
/// normal 0.999 quantile. Within 1% of the exact value from 10 degrees of
/// freedom up (33 df: 63.97 against 63.87).
fn critical_0_001(df: u32) -> f64 {
    let k = f64::from(df);
    let z = 3.090_232;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

#[test]
fn wilson_hilferty_is_close_to_the_tables() {
    // Tabulated 0.001 critical values.
    for (df, exact) in [(10, 29.588), (33, 63.870), (50, 86.661), (100, 149.449)] {
        let approx = critical_0_001(df);
        assert!((approx / exact - 1.0).abs() < 0.01, "{df}: {approx}");
    }
}

/// Probability of standing at each vertex after `length` uniform steps
/// from a uniform start.
fn exact_end_points(adj: &[Vec<u32>], length: u32) -> Vec<f64> {
    let n = adj.len();
    let mut d = vec![1.0 / n as f64; n];
    for _ in 0..length {
        let mut next = vec![0.0; n];
        for (x, out) in adj.iter().enumerate() {
            for &y in out {
                next[y as usize] += d[x] / out.len() as f64;
            }
        }
        d = next;
    }
    d
}

const WALKS: u64 = 100_000;

fn compact(mode: Mode, seed: u64, dir: &Path) -> Config {
    Config {
        mode,
        seed,
        // 64-byte blocks cut karate into a dozen.
        block_size: Some(64),
        work_dir: dir.to_owned(),
        ..Config::default()
    }
}

#[test]
fn compact_walks_end_where_memory_walks_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    let length = 4;
    // Different seeds, so the samples are independent (the same seed would
    // give both runs the same starts and make the test blind).
    let memory = end_points(&path, &compact(Mode::Memory, 11, dir.path()), WALKS, length);
    let (stat, df) = goodness_of_fit(&memory, &exact_end_points(&adjacency(&path), length));
    // Karate's 34 vertices all expect at least 480 of 100k ends: no merging.
    assert_eq!(df, 33);
    let critical = critical_0_001(df);
    assert!(
        stat < critical,
        "memory vs exact: {stat:.1} >= {critical:.1}"
    );
    for (name, config) in [
        (
            "graphwalker/blocks",
            Config {
                vertex_threshold: 0,
                ..compact(Mode::GraphWalker, 12, dir.path())
            },
        ),
        (
            "graphwalker/switch",
            Config {
                vertex_threshold: WALKS / 3,
                ..compact(Mode::GraphWalker, 13, dir.path())
            },
        ),
        ("iteration", compact(Mode::Iteration, 14, dir.path())),
    ] {
        let other = end_points(&path, &config, WALKS, length);
        let (stat, df) = homogeneity(&memory, &other);
        assert_eq!(df, 33);
        assert!(
            stat < critical,
            "{name} vs memory: chi-square {stat:.1} >= {critical:.1} (df {df}, p = 0.001)"
        );
    }
    // The walks of an app that reads positions only, with no restarts,
    // carry no source, and out of core move as 32-bit words.
    let app = EndPoints {
        positions_only: true,
        ..EndPoints::new(adjacency(&path).len(), WALKS, length)
    };
    let config = Config {
        vertex_threshold: 0,
        ..compact(Mode::GraphWalker, 15, dir.path())
    };
    let report = run(&path, &config, &app).unwrap();
    assert_eq!(report.walk_word_bits.0, 0, "no source bits");
    assert!(report.blocks > 1, "karate is cut into blocks");
    let (stat, df) = homogeneity(&memory, &report.result);
    assert_eq!(df, 33);
    assert!(
        stat < critical,
        "32-bit walks vs memory: chi-square {stat:.1} >= {critical:.1} (df {df}, p = 0.001)"
    );
}

/// Memory mode moves the walks of an app that reads positions only as
/// bare vertices, each partition drawing from one stream: they end where
/// the exact distribution says, the same whatever the thread count, and a
/// counting app sees every position.
#[test]
fn walks_moved_as_bare_vertices_end_where_they_should() {
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    let length = 4;
    let n = adjacency(&path).len();
    let app = || EndPoints {
        positions_only: true,
        ..EndPoints::new(n, WALKS, length)
    };
    let config = |threads: usize, partition_bytes: u64| Config {
        threads,
        partition_bytes,
        ..compact(Mode::Memory, 21, dir.path())
    };
    // 64-byte partitions cut karate into many, so walks are sorted.
    let bare = end_points_of(&path, &config(2, 64), app());
    let (stat, df) = goodness_of_fit(&bare, &exact_end_points(&adjacency(&path), length));
    assert_eq!(df, 33);
    let critical = critical_0_001(df);
    assert!(
        stat < critical,
        "bare walks vs exact: {stat:.1} >= {critical:.1}"
    );
    assert_eq!(bare, end_points_of(&path, &config(1, 64), app()));
    assert_eq!(bare, end_points_of(&path, &config(3, 64), app()));
    // Raw walks count a partition's positions at once.
    let raw = run(&path, &config(2, 64), &RawWalks::new(WALKS, length)).unwrap();
    assert_eq!(
        raw.steps,
        WALKS * u64::from(length),
        "karate has no dead end"
    );
    assert_eq!(raw.result.visits, WALKS + raw.steps);
    assert!(raw.partition_rounds > 0, "{WALKS} walks move by partition");
    // Karate's offsets and lists take 14 cache lines: fewer than 4 walks a
    // line move in lanes instead, and count every position too.
    let sparse = run(&path, &config(2, 64), &RawWalks::new(40, length)).unwrap();
    assert_eq!(sparse.partition_rounds, 0, "40 walks move in lanes");
    assert_eq!(sparse.steps, 40 * u64::from(length));
    assert_eq!(sparse.result.visits, 40 + sparse.steps);
}

#[test]
fn homogeneity_tells_three_steps_from_four() {
    // The same statistic must see a real difference: from uniform starts on
    // karate, ends after 3 and 4 steps differ with noncentrality about 5,700
    // at 100k walks each, far above the 0.001 critical value of about 64.
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    let three = end_points(&path, &compact(Mode::Memory, 11, dir.path()), WALKS, 3);
    let four = end_points(&path, &compact(Mode::GraphWalker, 12, dir.path()), WALKS, 4);
    let (stat, df) = homogeneity(&three, &four);
    let critical = critical_0_001(df);
    assert!(stat > critical, "chi-square {stat:.1} <= {critical:.1}");
}

#[test]
fn merging_pools_bins_below_five() {
    let bins = vec![
        (1.0, vec![1.0]),
        (2.0, vec![3.0]),
        (3.0, vec![2.0]),
        (10.0, vec![9.0]),
        (0.0, vec![0.0]),
    ];
    let merged = merge_small(bins, 5.0);
    assert_eq!(merged, vec![(6.0, vec![6.0]), (10.0, vec![9.0])]);
}

/// A weighted graph with a star at vertex 4 (to 5, 6, 7, 8 with weights 1,
/// 2, 3, 4) behind four weighted vertices, so that the star's weights are
/// not at the start of their block or of the file.
fn weighted_star() -> Graph {
    let edges = [
        (0, 1, 5.0),
        (0, 2, 1.0),
        (1, 2, 2.0),
        (1, 3, 7.0),
        (2, 3, 1.0),
        (3, 0, 3.0),
        (3, 4, 1.0),
        (4, 5, 1.0),
        (4, 6, 2.0),
        (4, 7, 3.0),
        (4, 8, 4.0),
        (5, 4, 1.0),
        (6, 4, 1.0),
        (7, 4, 1.0),
        (8, 4, 1.0),
    ];
    Graph::from_edges(9, &edges, true, false).unwrap()
}

#[test]
fn weighted_first_steps_follow_the_weights() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &weighted_star());
    let walks = 200_000;
    let mut app = VisitFrequency::ppr(4, walks, 1, 0.0, 9);
    app.spec.kind = Kind::Weighted;
    let memory = Config {
        mode: Mode::Memory,
        seed: 5,
        work_dir: dir.path().to_owned(),
        ..Config::default()
    };
    // 48-byte blocks hold vertex 4's offsets and four weighted edges alone.
    // Each path gets its own seed: with one seed, compact draws (keyed by
    // batch and position) would repeat the same first steps in every path.
    let blocks = Config {
        mode: Mode::GraphWalker,
        seed: 6,
        block_size: Some(48),
        vertex_threshold: 0,
        ..memory.clone()
    };
    let vertices = Config {
        vertex_threshold: u64::MAX,
        seed: 7,
        ..blocks.clone()
    };
    for (name, config) in [
        ("memory", memory),
        ("graphwalker/blocks", blocks),
        ("graphwalker/threshold", vertices),
    ] {
        let report = run(&path, &config, &app).unwrap();
        if name == "graphwalker/blocks" {
            assert!(report.blocks >= 4, "{} blocks", report.blocks);
        }
        let counts = &report.result.counts;
        assert_eq!(counts[&4], walks, "{name}: every walk starts at the centre");
        assert_eq!(report.steps, walks, "{name}: and takes one step");
        // Each leaf's share is binomial: sd = sqrt(p (1 - p) / N), at most
        // 0.0011 for N = 200k; five sd is at most 0.0055.
        for (leaf, weight) in [(5, 1.0), (6, 2.0), (7, 3.0), (8, 4.0)] {
            let p = weight / 10.0;
            let got = counts.get(&leaf).copied().unwrap_or(0) as f64 / walks as f64;
            let tol = 5.0 * (p * (1.0 - p) / walks as f64).sqrt();
            assert!(
                (got - p).abs() <= tol,
                "{name}: leaf {leaf} took {got:.4} of first steps, weight share {p} +- {tol:.4}"
            );
        }
    }
}

/// Node2Vec's second-order step: after 0 -> 1, the next vertex is 0 (return,
/// weight 1/p), 2 (a neighbour of 0, weight 1) or 3 (farther, weight 1/q).
/// With p = 0.5 and q = 2 the odds are 2 : 1 : 0.5, i.e. 4/7, 2/7, 1/7
/// (the return weight above the bound: its excess is an outlier area);
/// with p = 2 and q = 0.5 (SOWalker's), 1/7, 2/7, 4/7 (the return weight
/// below both others).
#[test]
fn node2vec_second_steps_follow_the_biased_odds() {
    use quiver_walker::Node2Vec;

    let edges = [
        (0, 1, 1.0),
        (0, 2, 1.0),
        (1, 0, 1.0),
        (1, 2, 1.0),
        (1, 3, 1.0),
        (2, 0, 1.0),
        (3, 1, 1.0),
    ];
    let graph = quiver_csr::Graph::from_edges(4, &edges, false, false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = crate::write(dir.path(), &graph);
    let walks = 100_000u64;
    let biased = |p, q| {
        crate::Recorder(WalkSpec {
            starts: Starts::Sources {
                sources: vec![0],
                walks_per_source: walks,
            },
            length: 2,
            stop_probability: 0.0,
            restart_probability: 0.0,
            kind: Kind::Unbiased,
            node2vec: Some(Node2Vec { p, q }),
            dead_end: quiver_walker::DeadEnd::Stop,
        })
    };
    // Memory; out of core with one vertex per block, on block pairs
    // (GraphWalker) and with the previous vertex read on its own
    // (iteration).
    let modes = [Mode::Memory, Mode::GraphWalker, Mode::Iteration];
    let odds = [
        ((0.5, 2.0), [4.0 / 7.0, 2.0 / 7.0, 1.0 / 7.0]),
        ((2.0, 0.5), [1.0 / 7.0, 2.0 / 7.0, 4.0 / 7.0]),
    ];
    for (mode, ((p, q), odds)) in modes
        .into_iter()
        .flat_map(|mode| odds.map(|odds| (mode, odds)))
    {
        let app = biased(p, q);
        let config = Config {
            mode,
            block_size: (mode != Mode::Memory).then_some(16),
            adaptive: false,
            vertex_threshold: 0,
            mem_budget: 1 << 20,
            work_dir: dir.path().to_owned(),
            ..Config::default()
        };
        let report = run(&path, &config, &app).unwrap();
        let mut at_hop1 = vec![0u32; walks as usize];
        let mut counts = [0f64; 4];
        for &(id, hop, v) in &report.result {
            if hop == 1 {
                at_hop1[id as usize] = v;
            }
        }
        for &(id, hop, v) in &report.result {
            if hop == 2 && at_hop1[id as usize] == 1 {
                counts[v as usize] += 1.0;
            }
        }
        let n: f64 = counts.iter().sum();
        assert!(
            n > 0.45 * walks as f64,
            "about half the walks go 0 -> 1 first ({n})"
        );
        for (v, expected) in [0, 2, 3].into_iter().zip(odds) {
            let tolerance = 5.0 * (expected * (1.0 - expected) / n).sqrt();
            let got = counts[v] / n;
            assert!(
                (got - expected).abs() < tolerance,
                "{mode:?}, p {p}, q {q}: P(1 -> {v} | came from 0) = {got}, expected {expected} +- {tolerance}"
            );
        }
        match mode {
            Mode::GraphWalker => assert!(
                report.paired && report.vertex_loads == 0,
                "walks moved on block pairs, reading no list on its own"
            ),
            Mode::Iteration => assert!(
                report.vertex_loads > 0,
                "previous vertices were read on their own"
            ),
            Mode::Memory => {}
        }
    }
}

/// Node2Vec on a directed graph with parallel edges, weighted and not,
/// against its definition: after `t -> v`, each out-neighbour `x` of `v`
/// is taken with probability proportional to `w(v, x)` (the weights of
/// all its edges; unweighted, their number) times `1/p` (x = t), `1`
/// (t -> x is an edge) or `1/q`. Some vertices have no edge back to where
/// the walk came from, and `p < 1`, so the return edges' outlier area is
/// drawn, sometimes empty and sometimes for two edges. Each (t, v) seen at
/// least 2,000 times is checked, every cell within 5 standard deviations.
#[test]
fn node2vec_follows_its_definition_on_a_directed_multigraph() {
    use quiver_walker::Node2Vec;

    let edges = [
        (0, 1, 1.0),
        (0, 2, 3.0),
        (1, 0, 2.0),
        (1, 0, 0.5),
        (1, 2, 1.0),
        (1, 3, 4.0),
        (2, 1, 1.0),
        (2, 3, 1.0),
        (2, 4, 2.0),
        (3, 0, 1.0),
        (3, 4, 1.0),
        (4, 0, 1.0),
        (4, 2, 5.0),
        (4, 2, 1.0),
        (4, 3, 1.0),
    ];
    let bias = Node2Vec { p: 0.4, q: 3.0 };
    let graph = Graph::from_edges(5, &edges, true, false).unwrap();
    assert!(!graph.has_distinct_targets());
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &graph);
    for (kind, mode) in [
        (Kind::Weighted, Mode::Memory),
        (Kind::Weighted, Mode::GraphWalker),
        (Kind::Unbiased, Mode::Memory),
        (Kind::Unbiased, Mode::GraphWalker),
    ] {
        let weight = |a: u32, b: u32| -> f64 {
            edges
                .iter()
                .filter(|e| (e.0, e.1) == (a, b))
                .map(|e| {
                    if kind == Kind::Weighted {
                        f64::from(e.2)
                    } else {
                        1.0
                    }
                })
                .sum()
        };
        let app = crate::Recorder(WalkSpec {
            starts: Starts::Uniform { walks: 200_000 },
            length: 2,
            stop_probability: 0.0,
            restart_probability: 0.0,
            kind,
            node2vec: Some(bias),
            dead_end: DeadEnd::Stop,
        });
        let config = Config {
            mode,
            block_size: (mode == Mode::GraphWalker).then_some(16),
            adaptive: false,
            work_dir: dir.path().to_owned(),
            ..Config::default()
        };
        let report = run(&path, &config, &app).unwrap();
        // counts[t][v][x]: walks that went t -> v -> x.
        let mut counts = [[[0u64; 5]; 5]; 5];
        let mut path_of = std::collections::HashMap::<u64, [u32; 3]>::new();
        for &(id, hop, v) in &report.result {
            path_of.entry(id).or_default()[hop as usize] = v;
        }
        for (_, [t, v, x]) in path_of {
            counts[t as usize][v as usize][x as usize] += 1;
        }
        let mut checked = 0;
        for t in 0..5u32 {
            for v in 0..5u32 {
                let seen = &counts[t as usize][v as usize];
                let n: u64 = seen.iter().sum();
                if n < 2_000 {
                    continue;
                }
                let bias_of = |x: u32| {
                    if x == t {
                        1.0 / bias.p
                    } else if weight(t, x) > 0.0 {
                        1.0
                    } else {
                        1.0 / bias.q
                    }
                };
                let total: f64 = (0..5).map(|x| weight(v, x) * bias_of(x)).sum();
                for x in 0..5u32 {
                    let expected = weight(v, x) * bias_of(x) / total;
                    let got = seen[x as usize] as f64 / n as f64;
                    let tolerance = 5.0 * (expected * (1.0 - expected) / n as f64).sqrt() + 1e-9;
                    assert!(
                        (got - expected).abs() <= tolerance,
                        "{kind:?} {mode:?}: P({t} -> {v} -> {x}) = {got:.4}, expected {expected:.4} +- {tolerance:.4}"
                    );
                }
                checked += 1;
            }
        }
        assert!(
            checked >= 8,
            "{mode:?}: only {checked} (t, v) pairs were seen often enough"
        );
    }
}
