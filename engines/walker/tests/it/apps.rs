//! The applications against answers computed here, independently of the
//! engine: exact visit moments from each walk's transition kernel for PPR
//! and RWR, a dynamic programme over vertex pairs for SimRank, closed
//! 3-walks for triangles, and the graph's own edges for corpora.
//!
//! Estimates are compared with a tolerance of several standard deviations,
//! each bounded from the sample size in a comment; seeds are fixed, so every
//! test is deterministic and a failure is a real disagreement, not bad luck.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use quiver_csr::{testing, write_graph, Graph};
use quiver_walker::apps::{
    collect_walks, write_corpus, Domination, SimRank, Triangles, VisitFrequency, NO_VERTEX,
};
use quiver_walker::{run, Config, DeadEnd, Mode, NoProgress, Report, WalkApp};

use crate::{write, Recorder};

/// Zachary's karate club ([`testing::karate`]) written into `dir`.
pub fn karate(dir: &Path, undirected: bool) -> PathBuf {
    let output = dir.join(if undirected {
        "karate.qcsr"
    } else {
        "karate-directed.qcsr"
    });
    write_graph(&testing::karate(undirected), &output).unwrap();
    output
}

/// A small directed graph with cycles and one dead end (vertex 5).
pub fn with_dead_end() -> Graph {
    let edges = [
        (0, 1),
        (0, 2),
        (1, 2),
        (1, 3),
        (2, 0),
        (2, 4),
        (3, 1),
        (3, 5),
        (4, 0),
        (4, 3),
        (4, 5),
    ];
    let edges: Vec<(u32, u32, f32)> = edges.iter().map(|&(s, t)| (s, t, 1.0)).collect();
    Graph::from_edges(6, &edges, false, false).unwrap()
}

/// Out-neighbour lists of the graph at `path`, read back from the file.
pub fn adjacency(path: &Path) -> Vec<Vec<u32>> {
    let graph = Graph::open(path).unwrap();
    (0..graph.num_vertices())
        .map(|v| graph.neighbors(v).to_vec())
        .collect()
}

/// `d P` for the uniform out-edge transition `P`, and the mass of `d` that
/// stood on dead ends (and so went nowhere).
fn spread(adj: &[Vec<u32>], d: &[f64]) -> (Vec<f64>, f64) {
    let mut next = vec![0.0; d.len()];
    let mut dead = 0.0;
    for (x, out) in adj.iter().enumerate() {
        if out.is_empty() {
            dead += d[x];
        }
        for &y in out {
            next[y as usize] += d[x] / out.len() as f64;
        }
    }
    (next, dead)
}

fn unit(n: usize, s: u32) -> Vec<f64> {
    let mut e = vec![0.0; n];
    e[s as usize] = 1.0;
    e
}

/// One hop of a walk as a dense matrix: `q[x][y]` is the chance that a walk
/// standing at `x` stands at `y` one hop later (rows of walks that may end
/// sum to less than one).
type Kernel = Vec<Vec<f64>>;

/// PPR walks from `s`: stop with probability `a`, else a uniform out-step;
/// on a dead end (once the stop chance has passed) stop, so the row is
/// zero, go back to `s`, or jump to a uniformly drawn vertex.
fn ppr_kernel(adj: &[Vec<u32>], a: f64, s: u32, dead_end: DeadEnd) -> Kernel {
    let n = adj.len();
    let mut q = vec![vec![0.0; n]; n];
    for (x, out) in adj.iter().enumerate() {
        for &y in out {
            q[x][y as usize] += (1.0 - a) / out.len() as f64;
        }
        if out.is_empty() {
            match dead_end {
                DeadEnd::Stop => {}
                DeadEnd::Restart => q[x][s as usize] = 1.0 - a,
                DeadEnd::Jump => q[x].iter_mut().for_each(|p| *p = (1.0 - a) / n as f64),
            }
        }
    }
    q
}

/// RWR walks: back to the source `s` with probability `c`, else a uniform
/// out-step, or back to the source from a dead end. Rows sum to one.
fn rwr_kernel(adj: &[Vec<u32>], s: u32, c: f64) -> Kernel {
    let mut q = vec![vec![0.0; adj.len()]; adj.len()];
    for (x, out) in adj.iter().enumerate() {
        q[x][s as usize] += if out.is_empty() { 1.0 } else { c };
        for &y in out {
            q[x][y as usize] += (1.0 - c) / out.len() as f64;
        }
    }
    q
}

fn times(a: &Kernel, b: &Kernel) -> Kernel {
    let n = a.len();
    let mut out = vec![vec![0.0; n]; n];
    for i in 0..n {
        for k in 0..n {
            if a[i][k] != 0.0 {
                for j in 0..n {
                    out[i][j] += a[i][k] * b[k][j];
                }
            }
        }
    }
    out
}

/// The first two moments of a walk's visits, exactly, for walks from `s`
/// of at most `length` hops with kernel `q`.
#[derive(Debug)]
struct Moments {
    /// `E[X_v]`: expected visits to `v` per walk, hop 0 included.
    visits: Vec<f64>,
    /// `E[T]` and `sd(T)` of the positions `T` of a walk (steps + 1).
    positions: (f64, f64),
    /// `sd(X_v - r_v T)` with `r_v = E[X_v] / E[T]`: the spread one walk
    /// adds to the frequency estimate `sum X_v / sum T`.
    spread: Vec<f64>,
}

/// With `d_h = e_s Q^h` (where a walk stands at hop h, if it is still
/// walking) and `alive_k(v)` the row sum of `Q^k` at `v`:
/// `E[X_v] = sum_h d_h(v)`;
/// `E[X_v^2] = sum_h d_h(v) (1 + 2 sum_{k=1..L-h} Q^k(v, v))`;
/// `E[X_v T] = sum_h d_h(v) (h + 1 + sum_{k=1..L-h} alive_k(v))`;
/// `E[T] = sum_h |d_h|`, `E[T^2] = sum_h (2h + 1) |d_h|` (a pair of hops
/// counts when the walk reaches the later one).
fn moments(q: &Kernel, s: u32, length: u32) -> Moments {
    let n = q.len();
    let l = length as usize;
    let mut powers: Vec<Kernel> = vec![(0..n)
        .map(|i| (0..n).map(|j| f64::from(u8::from(i == j))).collect())
        .collect()];
    for k in 1..=l {
        powers.push(times(&powers[k - 1], q));
    }
    let d = |h: usize, v: usize| powers[h][s as usize][v];
    let alive = |k: usize, v: usize| powers[k][v].iter().sum::<f64>();
    let mass: Vec<f64> = (0..=l).map(|h| alive(h, s as usize)).collect();
    let mean_t: f64 = mass.iter().sum();
    let square_t: f64 = mass
        .iter()
        .enumerate()
        .map(|(h, m)| (2 * h + 1) as f64 * m)
        .sum();
    let mut visits = vec![0.0; n];
    let mut spread = vec![0.0; n];
    for v in 0..n {
        let (mut x, mut xx, mut xt) = (0.0, 0.0, 0.0);
        for h in 0..=l {
            let returns: f64 = (1..=l - h).map(|k| powers[k][v][v]).sum();
            let lives: f64 = (1..=l - h).map(|k| alive(k, v)).sum();
            x += d(h, v);
            xx += d(h, v) * (1.0 + 2.0 * returns);
            xt += d(h, v) * ((h + 1) as f64 + lives);
        }
        let r = x / mean_t;
        visits[v] = x;
        spread[v] = (xx - 2.0 * r * xt + r * r * square_t).max(0.0).sqrt();
    }
    Moments {
        visits,
        positions: (mean_t, (square_t - mean_t * mean_t).max(0.0).sqrt()),
        spread,
    }
}

#[test]
fn moments_of_a_two_cycle_by_hand() {
    // 0 <-> 1 with stop 1/2 and 2 hops: a walk is at 0 (1), at 1 (1/2),
    // at 0 (1/4). T is 1, 2, 3 with chances 1/2, 1/4, 1/4; X_0 is 1, 1, 2.
    let m = moments(
        &ppr_kernel(&[vec![1], vec![0]], 0.5, 0, DeadEnd::Stop),
        0,
        2,
    );
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(m.visits[0], 1.25) && close(m.visits[1], 0.5));
    assert!(close(m.positions.0, 1.75));
    assert!(close(
        m.positions.1,
        (0.5 + 1.0 + 2.25 - 1.75f64.powi(2)).sqrt()
    ));
    // Y = X_0 - (5/7) T takes 2/7, -3/7, -1/7 with chances 1/2, 1/4, 1/4.
    let y: f64 = 0.5 * (2.0f64 / 7.0).powi(2)
        + 0.25 * (3.0f64 / 7.0).powi(2)
        + 0.25 * (1.0f64 / 7.0).powi(2);
    assert!(
        close(m.spread[0], y.sqrt()),
        "{} vs {}",
        m.spread[0],
        y.sqrt()
    );
}

/// Checks the visit counts of `walks` walks against exact moments.
///
/// The estimate of `r_v = E[X_v] / E[T]` is `f_v = sum X_v / sum T`; its
/// error is `sum Y / sum T` with `Y = X_v - r_v T` of mean zero, so
/// `sd(f_v) = sd(Y) / (sqrt(N) E[T])` to first order (N is large enough
/// that `sum T / N` is within 1% of `E[T]`). Five of those are allowed per
/// vertex; the mean number of positions per walk gets five `sd(T) /
/// sqrt(N)`.
fn check_visits(counts: &HashMap<u32, u64>, total: u64, walks: u64, m: &Moments) {
    let n = walks as f64;
    let (mean_t, sd_t) = m.positions;
    let got_t = total as f64 / n;
    let tol_t = 5.0 * sd_t / n.sqrt() + 1e-9;
    assert!(
        (got_t - mean_t).abs() <= tol_t,
        "mean positions per walk {got_t:.4}, exact {mean_t:.4} +- {tol_t:.4}"
    );
    assert_eq!(counts.values().sum::<u64>(), total);
    let mut worst = (0.0f64, 0u32, 0.0f64);
    for (v, (&e, &sd)) in m.visits.iter().zip(&m.spread).enumerate() {
        let v = v as u32;
        let r = e / mean_t;
        let got = counts.get(&v).copied().unwrap_or(0) as f64 / total as f64;
        let tol = 5.0 * sd / (n.sqrt() * mean_t) + 1e-12;
        assert!(
            (got - r).abs() <= tol,
            "vertex {v}: frequency {got:.5}, exact {r:.5} +- {tol:.5}"
        );
        if (got - r).abs() / tol > worst.0 {
            worst = ((got - r).abs() / tol, v, tol);
        }
    }
    if std::env::var_os("WALKER_TEST_VERBOSE").is_some() {
        let widest = m
            .spread
            .iter()
            .map(|sd| 5.0 * sd / (n.sqrt() * mean_t))
            .fold(0.0, f64::max);
        eprintln!(
            "worst vertex {} at {:.2} of its tolerance {:.5}; widest tolerance {widest:.5}",
            worst.1, worst.0, worst.2
        );
    }
}

/// Settings for one mode, with a fixed seed and spills under `dir`.
fn config(mode: Mode, dir: &Path) -> Config {
    Config {
        mode,
        seed: 2024,
        work_dir: dir.to_owned(),
        ..Config::default()
    }
}

/// Memory; GraphWalker over several blocks with no vertex passes, with
/// vertex passes whenever they are cheaper (the threshold above the walk
/// count), and on a tight budget (one cached block, tiny batches, spilled
/// pools) switching to vertex passes once `switch_at` walks remain;
/// iteration.
fn every_schedule(dir: &Path, block_size: u64, switch_at: u64) -> Vec<(&'static str, Config)> {
    let memory = config(Mode::Memory, dir);
    let blocks = |mode, vertex_threshold| Config {
        block_size: Some(block_size),
        vertex_threshold,
        ..config(mode, dir)
    };
    vec![
        ("memory", memory),
        ("graphwalker/blocks", blocks(Mode::GraphWalker, 0)),
        ("graphwalker/vertices", blocks(Mode::GraphWalker, u64::MAX)),
        (
            "graphwalker/tight",
            Config {
                // Room to cache one block (each takes at least two 4 KiB
                // pages) and to move about 140 walks at a time.
                mem_budget: 20 << 10,
                pool_capacity: 64,
                ..blocks(Mode::GraphWalker, switch_at)
            },
        ),
        ("iteration", blocks(Mode::Iteration, 0)),
    ]
}

/// The reference `app`'s walks are compared with: memory mode, exact.
fn exact_memory<A: WalkApp>(path: &Path, dir: &Path, app: &A) -> Report<A::Output> {
    let exact = Config {
        exact: true,
        ..config(Mode::Memory, dir)
    };
    run(path, &exact, app).unwrap()
}

/// Weighted walks or unbiased ones.
fn kind(weighted: bool) -> quiver_walker::Kind {
    if weighted {
        quiver_walker::Kind::Weighted
    } else {
        quiver_walker::Kind::Unbiased
    }
}

/// Checks that a run was out of core when its name says so. Which walks
/// vertex passes serve, and from where, is the scheduler's choice; the
/// vertex reads themselves are checked in `vertex_reads_walk_like_memory`.
fn check_path<O>(name: &str, report: &Report<O>) {
    if name == "memory" {
        assert_eq!(report.blocks, 1);
    } else {
        assert!(report.blocks >= 3, "{name}: {} blocks", report.blocks);
    }
    if name == "graphwalker/blocks" || name == "iteration" {
        assert_eq!(report.vertex_loads, 0, "{name}");
    }
    if name == "graphwalker/tight" {
        assert!(
            report.summary.bytes_written > 0,
            "{name}: the pools spilled"
        );
    }
}

#[test]
fn ppr_on_karate_matches_the_truncated_series_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    let adj = adjacency(&path);
    let (source, walks, length, stop) = (0, 200_000, 10, 0.15);
    let exact = moments(
        &ppr_kernel(&adj, stop, source, DeadEnd::Stop),
        source,
        length,
    );
    let app = VisitFrequency::ppr(source, walks, length, stop, 5);
    // 256-byte blocks cut karate's ~0.9 KB of CSR into about four.
    for (name, config) in every_schedule(dir.path(), 256, walks / 4) {
        let report = run(&path, &config, &app).unwrap();
        check_path(name, &report);
        let out = &report.result;
        assert_eq!(report.steps + walks, out.total_visits, "{name}");
        check_visits(&out.counts, out.total_visits, walks, &exact);
        assert_eq!(out.top[0].vertex, source, "{name}: the source ranks first");
    }
}

#[test]
fn ppr_follows_each_dead_end_policy() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &with_dead_end());
    let adj = adjacency(&path);
    let (walks, length, stop) = (60_000, 8, 0.1);
    // From 3 half the first steps reach the dead end 5.
    for (source, dead_end) in [
        (0, DeadEnd::Stop),
        (3, DeadEnd::Stop),
        (3, DeadEnd::Restart),
        (3, DeadEnd::Jump),
    ] {
        let exact = moments(&ppr_kernel(&adj, stop, source, dead_end), source, length);
        let mut app = VisitFrequency::ppr(source, walks, length, stop, 6);
        app.spec.dead_end = dead_end;
        for (name, config) in every_schedule(dir.path(), 40, walks / 5) {
            let report = run(&path, &config, &app).unwrap();
            check_path(name, &report);
            let out = &report.result;
            assert_eq!(report.steps + walks, out.total_visits, "{name}");
            check_visits(&out.counts, out.total_visits, walks, &exact);
        }
    }
}

/// Vertices between neighbouring vertices of the padded graph.
const SPACING: u32 = 16_384;

/// `with_dead_end`'s edges (weighted 1 to 4) between vertices `i * SPACING`,
/// with isolated vertices in between: 128 KiB of offsets per core vertex,
/// so a block around one holds a few walks at a cost of many pages.
fn padded(weighted: bool) -> Graph {
    let core = with_dead_end();
    let mut edges = Vec::new();
    for v in 0..core.num_vertices() {
        for &t in core.neighbors(v) {
            edges.push((v * SPACING, t * SPACING, (1 + (v + t) % 4) as f32));
        }
    }
    Graph::from_edges(core.num_vertices() * SPACING, &edges, weighted, false).unwrap()
}

#[test]
fn vertex_reads_walk_like_memory() {
    // Ten walks on blocks of 128 KiB: reading the few lists they stand on
    // costs far less than any block, so vertex passes read them from the
    // file (unweighted and weighted sections). In exact mode the paths must
    // be memory's, step for step.
    for weighted in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), &padded(weighted));
        for dead_end in [DeadEnd::Stop, DeadEnd::Restart] {
            let app = Recorder(quiver_walker::WalkSpec {
                starts: quiver_walker::Starts::Sources {
                    sources: vec![0, 3 * SPACING],
                    walks_per_source: 5,
                },
                length: 8,
                stop_probability: 0.1,
                restart_probability: 0.0,
                node2vec: None,
                kind: kind(weighted),
                dead_end,
            });
            let exact = |mode| Config {
                exact: true,
                block_size: Some(u64::from(SPACING) * 8),
                vertex_threshold: u64::MAX,
                ..config(mode, dir.path())
            };
            let memory = exact_memory(&path, dir.path(), &app);
            let vertices = run(&path, &exact(Mode::GraphWalker), &app).unwrap();
            assert!(vertices.blocks >= 6, "{} blocks", vertices.blocks);
            assert!(vertices.vertex_loads > 0, "no vertex was read");
            assert!(memory.steps > 10, "the walks went somewhere");
            assert!(
                memory.result == vertices.result,
                "weighted {weighted}, {dead_end:?}: vertex reads walked differently"
            );
            // Given no block size, so few walks read only the lists they
            // visit: one block that is never read, no index read whole
            // (far fewer bytes than its offsets), and memory's walks.
            let query = Config {
                block_size: None,
                vertex_threshold: Config::default().vertex_threshold,
                ..exact(Mode::GraphWalker)
            };
            let lists = run(&path, &query, &app).unwrap();
            assert!(lists.lists_only && !vertices.lists_only);
            assert_eq!((lists.blocks, lists.blocks_loaded), (1, 0));
            let offsets = quiver_csr::read_header(&path).unwrap().layout.offsets.len;
            assert!(
                lists.summary.bytes_read < offsets / 4,
                "{} bytes read, the offsets are {offsets}",
                lists.summary.bytes_read
            );
            assert!(
                memory.result == lists.result,
                "weighted {weighted}, {dead_end:?}: reading lists alone walked differently"
            );
        }
    }
}

/// The hub of [`hub_and_leaves`]: a leaf's list of one edge comes before
/// it for every lower id, so its list starts 3,108 bytes into a page.
const HUB: u32 = 777;

/// A hub of 100,000 leaves, each linked back to it: its list spans about
/// a hundred pages.
fn hub_and_leaves() -> Graph {
    let leaves = 100_000u32;
    let edges: Vec<(u32, u32, f32)> = (0..=leaves)
        .filter(|&leaf| leaf != HUB)
        .flat_map(|leaf| [(HUB, leaf, 1.0), (leaf, HUB, 1.0)])
        .collect();
    Graph::from_edges(leaves + 1, &edges, false, false).unwrap()
}

#[test]
fn a_query_reads_only_the_pages_of_a_hub_its_walks_draw_from() {
    // Ten PPR walks from the hub, which they visit every other step: a
    // query that reads only the lists it visits reads, of the hub's
    // 400 KB list, only the pages the walks' draws land on. It keys its
    // draws by walk (as exact mode does), so it walks as memory mode does
    // in exact mode.
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &hub_and_leaves());
    let app = VisitFrequency::ppr(HUB, 10, 6, 0.0, 8);
    let memory = exact_memory(&path, dir.path(), &app);
    let query = run(&path, &config(Mode::GraphWalker, dir.path()), &app).unwrap();
    assert!(query.lists_only);
    assert_eq!((query.blocks, query.blocks_loaded), (1, 0));
    assert_eq!(query.result.counts, memory.result.counts);
    assert_eq!(query.steps, 60);
    // Reading the hub's 400 KB list whole (once: a whole list stays for
    // later passes) with the leaves' pages reads 650 KB.
    assert!(
        query.summary.bytes_read < 450_000,
        "{} bytes read",
        query.summary.bytes_read
    );
}

#[test]
fn a_small_uniform_sample_reads_only_the_lists_it_visits() {
    // Six raw walks from uniform starts on the padded graph (1.3 MB): few
    // enough that reading their lists costs less than the graph, so they
    // read no index and no block, and walk as memory mode's exact walks.
    for weighted in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), &padded(weighted));
        let app = Recorder(quiver_walker::WalkSpec {
            starts: quiver_walker::Starts::Uniform { walks: 6 },
            length: 8,
            stop_probability: 0.0,
            restart_probability: 0.0,
            node2vec: None,
            kind: kind(weighted),
            dead_end: DeadEnd::Jump,
        });
        let memory = exact_memory(&path, dir.path(), &app);
        let sample = run(&path, &config(Mode::GraphWalker, dir.path()), &app).unwrap();
        assert!(sample.lists_only && sample.exact);
        assert_eq!((sample.blocks, sample.blocks_loaded), (1, 0));
        assert!(memory.steps >= 6 * 8, "jumps keep the walks going");
        assert!(
            memory.result == sample.result,
            "weighted {weighted}: the sample walked differently"
        );
    }
}

#[test]
fn rwr_matches_the_propagated_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &with_dead_end());
    let adj = adjacency(&path);
    let (source, walks, length, restart) = (3, 100_000, 10, 0.2);
    let exact = moments(&rwr_kernel(&adj, source, restart), source, length);
    assert!((exact.positions.0 - f64::from(length + 1)).abs() < 1e-9);
    let app = VisitFrequency::rwr(source, walks, length, restart, 6);
    for (name, config) in every_schedule(dir.path(), 40, walks / 2) {
        let report = run(&path, &config, &app).unwrap();
        check_path(name, &report);
        let out = &report.result;
        // Restarting walks never end early: every walk makes all L steps.
        assert_eq!(out.total_visits, walks * u64::from(length + 1), "{name}");
        assert_eq!(report.steps, walks * u64::from(length), "{name}");
        check_visits(&out.counts, out.total_visits, walks, &exact);
    }
}

/// SimRank by walk meeting times, exactly: the joint position of a walk
/// from `a` and one from `b`, as mass over vertex pairs. At hop `h` mass on
/// the diagonal has met for the first time and adds `decay^h`; the rest
/// moves by independent uniform out-steps, and a pair with a walk on a dead
/// end loses its mass (that walk has stopped and can never meet).
fn simrank_exact(adj: &[Vec<u32>], a: u32, b: u32, length: u32, decay: f64) -> f64 {
    let n = adj.len();
    let mut mass = vec![0.0; n * n];
    mass[a as usize * n + b as usize] = 1.0;
    let mut sim = 0.0;
    for h in 0..=length {
        for x in 0..n {
            sim += decay.powf(f64::from(h)) * mass[x * n + x];
            mass[x * n + x] = 0.0;
        }
        let mut next = vec![0.0; n * n];
        for x in 0..n {
            for y in 0..n {
                let m = mass[x * n + y];
                if m == 0.0 {
                    continue;
                }
                let share = m / (adj[x].len() * adj[y].len()) as f64;
                for &x2 in &adj[x] {
                    for &y2 in &adj[y] {
                        next[x2 as usize * n + y2 as usize] += share;
                    }
                }
            }
        }
        mass = next;
    }
    sim
}

/// The estimate is `(1/R^2) sum_{i,j} h(X_i, Y_j)` over `R` independent
/// walks from each side, with `h = decay^t` in `[0, 1]` of mean `s`. Its
/// Hoeffding decomposition gives `Var = Var(h_1)/R + Var(h_2)/R +
/// Var(residual)/R^2`, each variance at most `s (1 - s)` for a `[0, 1]`
/// variable of mean `s`: so `sd <= sqrt(s (1 - s) (2/R + 1/R^2))`, whatever
/// the correlation between pairs sharing a walk. We allow 4.5 of those
/// (0.03 to 0.045 for the pairs below with R = 4000; across ten seeds the
/// estimates strayed by at most 0.006, so the bound is loose but safe).
fn check_simrank(path: &Path, a: u32, b: u32, seed: u64) {
    let (walks, length, decay) = (4_000, 11, 0.8);
    let exact = simrank_exact(&adjacency(path), a, b, length, decay);
    let config = Config {
        mode: Mode::Memory,
        seed,
        ..Config::default()
    };
    let report = run(path, &config, &SimRank::new(a, b, walks, length, decay)).unwrap();
    let got = report.result.similarity;
    let r = walks as f64;
    let tol = 4.5 * (exact * (1.0 - exact) * (2.0 / r + 1.0 / (r * r))).sqrt();
    assert!(
        (got - exact).abs() <= tol,
        "simrank({a}, {b}) = {got:.5}, exact {exact:.5} +- {tol:.5}"
    );
    assert!(report.result.meeting_pairs <= walks * walks);
}

#[test]
fn simrank_matches_the_pair_recursion() {
    let dir = tempfile::tempdir().unwrap();
    let karate = karate(dir.path(), true);
    // 0 and 33 are the two leaders; 5 and 6 share most neighbours.
    for (a, b) in [(0, 33), (5, 6), (2, 8)] {
        check_simrank(&karate, a, b, 17);
    }
    let sub = tempfile::tempdir().unwrap();
    let dead = write(sub.path(), &with_dead_end());
    // Half the walks from 3 stop at the dead end 5 after one step.
    for (a, b) in [(1, 4), (3, 4)] {
        check_simrank(&dead, a, b, 17);
    }
}

#[test]
fn simrank_of_a_vertex_with_itself_is_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    let walks = 300;
    assert!((simrank_exact(&adjacency(&path), 7, 7, 11, 0.8) - 1.0).abs() < 1e-12);
    let report = run(
        &path,
        &Config::default(),
        &SimRank::new(7, 7, walks, 11, 0.8),
    )
    .unwrap();
    assert_eq!(report.result.similarity, 1.0);
    assert_eq!(report.result.meeting_pairs, walks * walks);
}

/// The share of 3-step walks from uniform starts that return: `(1/n)
/// sum_s (P^3)(s, s)`. A binomial proportion, so `sd = sqrt(p (1 - p) /
/// N)`; we allow five.
fn check_triangles(path: &Path, expected: f64, walks: u64) {
    let dir = path.parent().unwrap();
    for mode in [Mode::Memory, Mode::GraphWalker] {
        // 64-byte blocks: two for K4, a dozen for karate.
        let config = Config {
            block_size: Some(64),
            ..config(mode, dir)
        };
        let out = run(path, &config, &Triangles::new(walks)).unwrap().result;
        assert_eq!(out.walks, walks);
        let tol = 5.0 * (expected * (1.0 - expected) / walks as f64).sqrt();
        assert!(
            (out.concentration - expected).abs() <= tol,
            "{mode:?}: {} closed of {walks}, {:.5} vs {expected:.5} +- {tol:.5}",
            out.closed,
            out.concentration
        );
    }
}

#[test]
fn triangles_on_k4_close_two_ninths_of_the_time() {
    // From any vertex of K4 a walk goes anywhere, then (2/3) to a third
    // vertex, then (1/3) home: 2/9.
    let dir = tempfile::tempdir().unwrap();
    let edges: Vec<(u32, u32, f32)> = (0..4)
        .flat_map(|s| (0..4).filter(move |&t| t != s).map(move |t| (s, t, 1.0)))
        .collect();
    let path = write(
        dir.path(),
        &Graph::from_edges(4, &edges, false, true).unwrap(),
    );
    check_triangles(&path, 2.0 / 9.0, 100_000);
}

#[test]
fn triangles_on_karate_match_closed_three_walks() {
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    let adj = adjacency(&path);
    let n = adj.len();
    let expected = (0..n as u32)
        .map(|s| {
            let mut d = unit(n, s);
            for _ in 0..3 {
                d = spread(&adj, &d).0;
            }
            d[s as usize]
        })
        .sum::<f64>()
        / n as f64;
    // About 0.030; 200k walks give sd 0.00038, so 5 sd is 6% of it.
    check_triangles(&path, expected, 200_000);
}

/// Per-vertex visits of a Domination result (its `top` lists every visited
/// vertex when `top_k` is |V|).
fn domination_counts(report: &Report<quiver_walker::apps::FrequencyOutput>) -> Vec<(u32, u64)> {
    let mut counts: Vec<(u32, u64)> = report
        .result
        .top
        .iter()
        .map(|r| (r.vertex, r.visits))
        .collect();
    counts.sort_unstable();
    counts
}

#[test]
fn domination_counts_every_position_and_agrees_across_modes() {
    let dir = tempfile::tempdir().unwrap();
    // Directed karate (u -> v for u < v) has dead ends, so walks end early.
    let path = karate(dir.path(), false);
    let n = adjacency(&path).len() as u32;
    let mut results = Vec::new();
    for mode in [Mode::Memory, Mode::GraphWalker, Mode::Iteration] {
        let config = Config {
            exact: true,
            block_size: Some(256),
            vertex_threshold: 8,
            ..config(mode, dir.path())
        };
        // A fresh app per run: Domination counts into itself.
        let report = run(&path, &config, &Domination::new(n, 6, n as usize)).unwrap();
        let out = &report.result;
        assert_eq!(report.walks, u64::from(n));
        assert_eq!(out.total_visits, u64::from(n) + report.steps, "{mode:?}");
        assert!(report.steps < 6 * u64::from(n), "dead ends end some walks");
        assert_eq!(
            out.top.iter().map(|r| r.visits).sum::<u64>(),
            out.total_visits
        );
        results.push((
            out.total_visits,
            out.distinct_vertices,
            domination_counts(&report),
        ));
    }
    assert_eq!(results[0], results[1], "graphwalker differs from memory");
    assert_eq!(results[0], results[2], "iteration differs from memory");
    // The same walks, recorded one visit at a time, give the same counts.
    let spec = Domination::new(n, 6, 0).spec();
    let config = Config {
        exact: true,
        ..config(Mode::Memory, dir.path())
    };
    let visits = run(&path, &config, &Recorder(spec)).unwrap().result;
    let mut counts: HashMap<u32, u64> = HashMap::new();
    for &(_, _, v) in &visits {
        *counts.entry(v).or_insert(0) += 1;
    }
    let mut counts: Vec<(u32, u64)> = counts.into_iter().collect();
    counts.sort_unstable();
    assert_eq!(results[0].2, counts);
}

#[test]
fn domination_can_run_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    let app = Domination::new(34, 6, 34);
    let config = Config {
        exact: true,
        ..config(Mode::Memory, dir.path())
    };
    let first = run(&path, &config, &app).unwrap();
    let second = run(&path, &config, &app).unwrap();
    assert_eq!(first.result.total_visits, 34 * 7);
    assert_eq!(second.result.total_visits, first.result.total_visits);
}

/// Parses a corpus and checks each line is a walk of the graph: it starts
/// at its source, follows edges, and is shorter than `length + 1` only if
/// it ends on a dead end (corpus walks stop there).
fn check_corpus(text: &str, adj: &[Vec<u32>], walks_per_vertex: u64, length: u32) -> u64 {
    let mut lines = 0u64;
    for (id, line) in text.lines().enumerate() {
        let path: Vec<u32> = line.split(' ').map(|v| v.parse().unwrap()).collect();
        let source = id as u64 / walks_per_vertex;
        assert_eq!(u64::from(path[0]), source, "line {id} starts at its source");
        assert!(path.len() <= length as usize + 1, "line {id}: {line}");
        for pair in path.windows(2) {
            assert!(
                adj[pair[0] as usize].contains(&pair[1]),
                "line {id} steps {} -> {}, not an edge: {line}",
                pair[0],
                pair[1]
            );
        }
        let last = *path.last().unwrap();
        assert!(
            path.len() == length as usize + 1 || adj[last as usize].is_empty(),
            "line {id} ends early at {last}, which has out-edges: {line}"
        );
        lines += 1;
    }
    lines
}

fn corpus_spec(length: u32) -> quiver_walker::WalkSpec {
    quiver_walker::apps::RawWalks::new(0, length).spec
}

#[test]
fn corpus_lines_are_walks_of_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &with_dead_end());
    let adj = adjacency(&path);
    let n = adj.len() as u32;
    let (walks_per_vertex, length) = (50, 7);
    let mut texts = Vec::new();
    for mode in [Mode::Memory, Mode::GraphWalker] {
        let output = dir.path().join(format!("{mode:?}.txt"));
        let config = Config {
            block_size: Some(40),
            ..config(mode, dir.path())
        };
        let report = write_corpus(
            &path,
            &config,
            &corpus_spec(length),
            walks_per_vertex,
            &output,
            1 << 20,
            &NoProgress,
        )
        .unwrap();
        let text = std::fs::read_to_string(&output).unwrap();
        let lines = check_corpus(&text, &adj, walks_per_vertex, length);
        assert_eq!(lines, u64::from(n) * walks_per_vertex);
        assert_eq!(report.result.walks, lines);
        assert_eq!(report.result.rounds, 1);
        assert_eq!(report.result.bytes, text.len() as u64);
        // Every position is a visit, and every visit after the first a step.
        let positions = text.split([' ', '\n']).filter(|s| !s.is_empty()).count();
        assert_eq!(positions as u64, lines + report.steps, "{mode:?}");
        assert!(
            text.lines().any(|l| l.ends_with(" 5")),
            "some walk hits the dead end"
        );
        texts.push(text);
    }
    // Corpus walks are exact-mode walks: the same in every mode.
    assert_eq!(texts[0], texts[1]);
}

#[test]
fn a_corpus_larger_than_its_budget_is_written_in_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &with_dead_end());
    let adj = adjacency(&path);
    let n = adj.len() as u64;
    let output = dir.path().join("corpus.txt");
    // 50 walks of 8 positions take 1,600 bytes a vertex: 2 vertices a round.
    let config = config(Mode::GraphWalker, dir.path());
    let report = write_corpus(
        &path,
        &config,
        &corpus_spec(7),
        50,
        &output,
        3_300,
        &NoProgress,
    )
    .unwrap();
    assert_eq!(report.result.rounds, n.div_ceil(2));
    let text = std::fs::read_to_string(&output).unwrap();
    assert_eq!(check_corpus(&text, &adj, 50, 7), n * 50);
    let err = write_corpus(
        &path,
        &config,
        &corpus_spec(7),
        50,
        &output,
        1_000,
        &NoProgress,
    )
    .unwrap_err();
    assert!(quiver_run::chain(&err).contains("1600 bytes"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&output).unwrap(),
        text,
        "a failed run leaves the old corpus"
    );
}

/// The corpus text of walks held as an array: each row's vertices up to its
/// first `NO_VERTEX`, joined as `write_corpus` writes them.
fn as_text(paths: &[u32], width: usize) -> String {
    let mut text = String::new();
    for row in paths.chunks(width) {
        let walk: Vec<String> = row
            .iter()
            .take_while(|&&v| v != NO_VERTEX)
            .map(u32::to_string)
            .collect();
        text.push_str(&walk.join(" "));
        text.push('\n');
    }
    text
}

#[test]
fn collected_walks_are_the_corpus_in_one_array() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &with_dead_end());
    let n = adjacency(&path).len() as u64;
    let output = dir.path().join("corpus.txt");
    let mut node2vec = corpus_spec(7);
    node2vec.node2vec = Some(quiver_walker::Node2Vec { p: 0.5, q: 2.0 });
    // One round, and rounds of two vertices: the same walks as the file.
    for (spec, max_bytes) in [
        (corpus_spec(7), 1 << 20),
        (corpus_spec(7), 3_300),
        (node2vec, 3_300),
    ] {
        let config = config(Mode::GraphWalker, dir.path());
        let written =
            write_corpus(&path, &config, &spec, 50, &output, max_bytes, &NoProgress).unwrap();
        let collected = collect_walks(&path, &config, &spec, 50, max_bytes, &NoProgress).unwrap();
        let walks = &collected.result;
        assert_eq!((walks.width, walks.walks), (8, n * 50));
        assert_eq!(walks.paths.len() as u64, n * 50 * 8);
        assert_eq!(walks.rounds, written.result.rounds);
        assert_eq!(collected.steps, written.steps);
        // Every row was written, from its walk's source, and padded only
        // after a stop: no vertex follows a NO_VERTEX.
        for (i, row) in walks.paths.chunks(walks.width).enumerate() {
            assert_eq!(u64::from(row[0]), i as u64 / 50, "row {i}: {row:?}");
            let end = row
                .iter()
                .position(|&v| v == NO_VERTEX)
                .unwrap_or(row.len());
            assert!(row[end..].iter().all(|&v| v == NO_VERTEX), "{row:?}");
        }
        assert!(
            walks.paths.contains(&NO_VERTEX),
            "some walk stops at the dead end"
        );
        assert_eq!(
            as_text(&walks.paths, walks.width),
            std::fs::read_to_string(&output).unwrap()
        );
    }
    let config = config(Mode::GraphWalker, dir.path());
    let err = collect_walks(
        &path,
        &config,
        &corpus_spec(7),
        u64::MAX,
        1 << 20,
        &NoProgress,
    )
    .unwrap_err();
    assert!(quiver_run::is_invalid_argument(&err), "{err}");
}

/// Counts what a run reports: walks ended, and how many reports (advances
/// and notes).
#[derive(Debug, Default)]
struct Counting {
    walks: std::sync::atomic::AtomicU64,
    reports: std::sync::atomic::AtomicU64,
}

impl quiver_walker::Progress for Counting {
    fn advance(&self, delta: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.walks.fetch_add(delta, Relaxed);
        self.reports.fetch_add(1, Relaxed);
    }
    fn note(&self, _note: &str) {
        self.reports
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn walks_are_reported_as_they_end_within_a_batch() {
    use std::sync::atomic::Ordering::Relaxed;
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    // 34 * 2,000 walks: more than a chunk, in one block and one batch.
    let walks_per_vertex = 2_000;
    let mut node2vec = corpus_spec(10);
    node2vec.node2vec = Some(quiver_walker::Node2Vec { p: 2.0, q: 0.5 });
    for mode in [Mode::Memory, Mode::GraphWalker] {
        for spec in [corpus_spec(10), node2vec.clone()] {
            let progress = Counting::default();
            let config = config(mode, dir.path());
            collect_walks(&path, &config, &spec, walks_per_vertex, 1 << 30, &progress).unwrap();
            let what = format!("{mode:?}, {:?}", spec.node2vec);
            assert_eq!(
                progress.walks.load(Relaxed),
                34 * walks_per_vertex,
                "{what}"
            );
            // Reports come per chunk or hop, not once a batch: a caller
            // hears of a run (and may stop it) before its batch ends.
            assert!(progress.reports.load(Relaxed) > 8, "{what}");
        }
    }
}

/// Asks a run to stop once it has reported `after` times.
#[derive(Debug)]
struct CancelAfter {
    after: u64,
    reports: std::sync::atomic::AtomicU64,
    /// Walks reported ended.
    ended: std::sync::atomic::AtomicU64,
}

impl quiver_walker::Progress for CancelAfter {
    fn advance(&self, delta: u64) {
        self.reports
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.ended
            .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
    }
    fn note(&self, _note: &str) {
        self.reports
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn cancelled(&self) -> bool {
        self.reports.load(std::sync::atomic::Ordering::Relaxed) >= self.after
    }
}

/// A run whose caller asks it to stop ends with `Cancelled` at its next
/// report, in every mode and for first- and second-order walks, long
/// before its walks are done; one that is not asked runs to the end.
#[test]
fn a_run_stops_when_its_caller_asks() {
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    let walks_per_vertex = 2_000;
    let mut node2vec = corpus_spec(10);
    node2vec.node2vec = Some(quiver_walker::Node2Vec { p: 2.0, q: 0.5 });
    for mode in [Mode::Memory, Mode::GraphWalker, Mode::Iteration] {
        for spec in [corpus_spec(10), node2vec.clone()] {
            let what = format!("{mode:?}, {:?}", spec.node2vec);
            let config = Config {
                block_size: Some(256),
                ..config(mode, dir.path())
            };
            let progress = CancelAfter {
                after: 2,
                reports: Default::default(),
                ended: Default::default(),
            };
            let err = collect_walks(&path, &config, &spec, walks_per_vertex, 1 << 30, &progress)
                .expect_err(&what);
            assert!(
                matches!(err, quiver_walker::Error::Cancelled(_)),
                "{what}: {err}"
            );
            let never = CancelAfter {
                after: u64::MAX,
                reports: Default::default(),
                ended: Default::default(),
            };
            collect_walks(&path, &config, &spec, walks_per_vertex, 1 << 30, &never)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            // Stopped long before the end: most walks never ended.
            let total = never.ended.into_inner();
            let ended = progress.ended.into_inner();
            assert!(
                ended < total / 2,
                "{what}: {ended} of {total} walks ended before it stopped"
            );
        }
    }
}

/// A budget far beyond the graph and its walks is set aside, not held:
/// `peak_mem_bytes` is what the run held (the graph's block and a few
/// walks), `mem_reserved_bytes` the batch's share of the budget beside it.
#[test]
fn a_large_budget_is_reported_as_reserved_not_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = karate(dir.path(), true);
    let config = Config {
        mode: Mode::GraphWalker,
        mem_budget: 1 << 30,
        ..Config::default()
    };
    let report = run(&path, &config, &VisitFrequency::ppr(0, 100, 5, 0.15, 3)).unwrap();
    let (held, reserved) = (report.summary.peak_mem_bytes, report.mem_reserved_bytes);
    assert!(held > 0 && held < 1 << 20, "held {held} bytes for karate");
    assert!(
        reserved >= 200 << 20,
        "a batch's share of 1 GiB: {reserved}"
    );
    assert!(reserved <= config.mem_budget);
}
