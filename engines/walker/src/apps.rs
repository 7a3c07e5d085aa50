//! The applications of the paper, with its default parameters, plus raw
//! walks and corpus generation for embeddings.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Serialize;

use crate::app::{Visit, WalkApp};
use crate::spec::{DeadEnd, Kind, Starts, WalkSpec};
use crate::{Error, Result};

fn spec(starts: Starts, length: u32) -> WalkSpec {
    WalkSpec {
        starts,
        length,
        stop_probability: 0.0,
        restart_probability: 0.0,
        kind: Kind::Unbiased,
        node2vec: None,
        dead_end: DeadEnd::Stop,
    }
}

/// `walks` walks of `length` steps from uniform random starts (GraphWalker's
/// `rawrandomwalks`): the result is just how many positions were visited.
#[derive(Clone, Debug)]
pub struct RawWalks {
    /// The walks.
    pub spec: WalkSpec,
}

impl RawWalks {
    /// `walks` walks of `length` steps.
    pub fn new(walks: u64, length: u32) -> RawWalks {
        RawWalks {
            spec: spec(Starts::Uniform { walks }, length),
        }
    }
}

/// What raw walks report.
#[derive(Clone, Debug, Serialize)]
pub struct RawOutput {
    /// Positions visited (hop 0 included).
    pub visits: u64,
}

impl WalkApp for RawWalks {
    type State = u64;
    type Output = RawOutput;

    fn spec(&self) -> WalkSpec {
        self.spec.clone()
    }
    fn new_state(&self) -> u64 {
        0
    }
    fn visit(&self, state: &mut u64, _visit: &Visit) {
        *state += 1;
    }
    fn reads_positions_only(&self) -> bool {
        true
    }
    fn visit_positions(&self, state: &mut u64, _hop: u32, vertices: &[u32]) {
        *state += vertices.len() as u64;
    }
    fn merge(&self, into: &mut u64, other: u64) {
        *into += other;
    }
    fn finish(&self, visits: u64) -> Result<RawOutput> {
        Ok(RawOutput { visits })
    }
}

/// A vertex and how often walks visited it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ranked {
    /// The vertex.
    pub vertex: u32,
    /// Visits.
    pub visits: u64,
    /// Visits over all visits.
    pub frequency: f64,
}

fn top_k(counts: impl Iterator<Item = (u32, u64)>, total: u64, k: usize) -> Vec<Ranked> {
    let mut all: Vec<(u32, u64)> = counts.filter(|&(_, c)| c > 0).collect();
    all.sort_unstable_by_key(|&(v, c)| (std::cmp::Reverse(c), v));
    all.truncate(k);
    #[allow(clippy::cast_precision_loss)]
    all.into_iter()
        .map(|(vertex, visits)| Ranked {
            vertex,
            visits,
            frequency: visits as f64 / total.max(1) as f64,
        })
        .collect()
}

/// Visit frequencies of walks from one source: personalized PageRank
/// (walks that stop with probability `stop` per step) and random walk with
/// restart (walks that jump back with probability `restart`).
#[derive(Clone, Debug)]
pub struct VisitFrequency {
    /// The walks.
    pub spec: WalkSpec,
    /// How many top vertices to report.
    pub top_k: usize,
}

impl VisitFrequency {
    /// Personalized PageRank from `source`, the paper's setting: 2,000 walks
    /// of at most 10 steps stopping with probability 0.15 per step.
    pub fn ppr(source: u32, walks: u64, length: u32, stop: f64, top_k: usize) -> VisitFrequency {
        VisitFrequency {
            spec: WalkSpec {
                stop_probability: stop,
                ..spec(
                    Starts::Sources {
                        sources: vec![source],
                        walks_per_source: walks,
                    },
                    length,
                )
            },
            top_k,
        }
    }

    /// Random walk with restart from `source`: walks of `length` steps that
    /// return to the source with probability `restart` per step (and at
    /// dead ends).
    pub fn rwr(source: u32, walks: u64, length: u32, restart: f64, top_k: usize) -> VisitFrequency {
        VisitFrequency {
            spec: WalkSpec {
                restart_probability: restart,
                dead_end: DeadEnd::Restart,
                ..spec(
                    Starts::Sources {
                        sources: vec![source],
                        walks_per_source: walks,
                    },
                    length,
                )
            },
            top_k,
        }
    }
}

/// Visit counts and the most visited vertices.
#[derive(Clone, Debug, Serialize)]
pub struct FrequencyOutput {
    /// All visits, hop 0 included.
    pub total_visits: u64,
    /// Distinct vertices visited.
    pub distinct_vertices: usize,
    /// The most visited vertices, most first (ties by id).
    pub top: Vec<Ranked>,
    /// Every visited vertex's count (for tests and further processing).
    #[serde(skip)]
    pub counts: HashMap<u32, u64>,
}

impl WalkApp for VisitFrequency {
    type State = HashMap<u32, u64>;
    type Output = FrequencyOutput;

    fn spec(&self) -> WalkSpec {
        self.spec.clone()
    }
    fn new_state(&self) -> Self::State {
        HashMap::new()
    }
    fn visit(&self, state: &mut Self::State, visit: &Visit) {
        *state.entry(visit.vertex).or_insert(0) += 1;
    }
    fn reads_positions_only(&self) -> bool {
        true
    }
    fn merge(&self, into: &mut Self::State, other: Self::State) {
        for (v, c) in other {
            *into.entry(v).or_insert(0) += c;
        }
    }
    fn finish(&self, counts: Self::State) -> Result<FrequencyOutput> {
        let total = counts.values().sum();
        Ok(FrequencyOutput {
            total_visits: total,
            distinct_vertices: counts.len(),
            top: top_k(counts.iter().map(|(&v, &c)| (v, c)), total, self.top_k),
            counts,
        })
    }
}

/// Random walk domination: one walk of `length` (6) steps from every
/// vertex; vertices that many walks reach are good dominators. Reports each
/// vertex's visit count and the top ones.
#[derive(Debug)]
pub struct Domination {
    /// The walks.
    pub spec: WalkSpec,
    top_k: usize,
    counts: Vec<AtomicU32>,
}

impl Domination {
    /// One walk of `length` steps from each of `num_vertices` vertices.
    pub fn new(num_vertices: u32, length: u32, top_k: usize) -> Domination {
        Domination {
            spec: spec(
                Starts::EveryVertex {
                    walks_per_vertex: 1,
                },
                length,
            ),
            top_k,
            counts: (0..num_vertices).map(|_| AtomicU32::new(0)).collect(),
        }
    }
}

impl WalkApp for Domination {
    type State = ();
    type Output = FrequencyOutput;

    fn spec(&self) -> WalkSpec {
        self.spec.clone()
    }
    fn new_state(&self) {}
    fn visit(&self, _state: &mut (), visit: &Visit) {
        self.counts[visit.vertex as usize].fetch_add(1, Ordering::Relaxed);
    }
    fn reads_positions_only(&self) -> bool {
        true
    }
    fn merge(&self, _into: &mut (), _other: ()) {}
    fn finish(&self, _state: ()) -> Result<FrequencyOutput> {
        // Taking the counts leaves the app ready for another run.
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| u64::from(c.swap(0, Ordering::Relaxed)))
            .collect();
        let total = counts.iter().sum();
        #[allow(clippy::cast_possible_truncation)] // Indices of a vertex-indexed table.
        let top = top_k(
            counts.iter().enumerate().map(|(v, &c)| (v as u32, c)),
            total,
            self.top_k,
        );
        Ok(FrequencyOutput {
            total_visits: total,
            distinct_vertices: counts.iter().filter(|&&c| c > 0).count(),
            top,
            counts: HashMap::new(),
        })
    }
}

/// SimRank between `a` and `b` from walk meeting times: `R` walks of
/// `length` (11) steps from each, and `sim = (1/R^2) sum c^t` over pairs
/// of walks that first stand on the same vertex at hop `t` (pairs that never
/// meet add nothing). Walks follow out-edges, as the paper's do; for
/// Jeh-Widom SimRank over in-edges, run it on the reversed graph.
#[derive(Clone, Debug)]
pub struct SimRank {
    spec: WalkSpec,
    walks: u64,
    decay: f64,
}

impl SimRank {
    /// `walks` walks from each of `a` and `b`.
    pub fn new(a: u32, b: u32, walks: u64, length: u32, decay: f64) -> SimRank {
        SimRank {
            spec: spec(
                Starts::Sources {
                    sources: vec![a, b],
                    walks_per_source: walks,
                },
                length,
            ),
            walks,
            decay,
        }
    }
}

/// The SimRank estimate.
#[derive(Clone, Debug, Serialize)]
pub struct SimRankOutput {
    /// The estimate.
    pub similarity: f64,
    /// Pairs of walks that met.
    pub meeting_pairs: u64,
}

impl WalkApp for SimRank {
    /// (walk id, hop, vertex) of every visit.
    type State = Vec<(u64, u32, u32)>;
    type Output = SimRankOutput;

    fn spec(&self) -> WalkSpec {
        self.spec.clone()
    }
    fn needs_walk_ids(&self) -> bool {
        true
    }
    fn new_state(&self) -> Self::State {
        Vec::new()
    }
    fn visit(&self, state: &mut Self::State, visit: &Visit) {
        state.push((
            visit.walk.expect("exact mode gives walk ids"),
            visit.hop,
            visit.vertex,
        ));
    }
    fn merge(&self, into: &mut Self::State, mut other: Self::State) {
        into.append(&mut other);
    }
    fn finish(&self, mut visits: Self::State) -> Result<SimRankOutput> {
        let r = usize::try_from(self.walks).expect("walk count fits usize");
        visits.sort_unstable_by_key(|&(id, hop, _)| (hop, id));
        let mut met = vec![false; r * r];
        let mut similarity = 0.0;
        let mut meeting_pairs = 0;
        for hop_group in visits.chunk_by(|x, y| x.1 == y.1) {
            let hop = hop_group[0].1;
            let mut from_a: HashMap<u32, Vec<usize>> = HashMap::new();
            for &(id, _, v) in hop_group.iter().filter(|&&(id, _, _)| id < self.walks) {
                from_a
                    .entry(v)
                    .or_default()
                    .push(usize::try_from(id).expect("id fits usize"));
            }
            for &(id, _, v) in hop_group.iter().filter(|&&(id, _, _)| id >= self.walks) {
                let j = usize::try_from(id - self.walks).expect("id fits usize");
                for &i in from_a.get(&v).map_or(&[][..], Vec::as_slice) {
                    if !met[i * r + j] {
                        met[i * r + j] = true;
                        meeting_pairs += 1;
                        similarity += self.decay.powi(i32::try_from(hop).expect("hop fits i32"));
                    }
                }
            }
        }
        #[allow(clippy::cast_precision_loss)]
        let pairs = (self.walks * self.walks) as f64;
        Ok(SimRankOutput {
            similarity: similarity / pairs.max(1.0),
            meeting_pairs,
        })
    }
}

/// Graphlet concentration: the share of 3-step walks from uniform random
/// starts that close a triangle (end where they began). On a graph without
/// self-loops such a walk is exactly a triangle.
#[derive(Clone, Debug)]
pub struct Triangles {
    spec: WalkSpec,
}

impl Triangles {
    /// `walks` walks of 3 steps.
    pub fn new(walks: u64) -> Triangles {
        Triangles {
            spec: spec(Starts::Uniform { walks }, 3),
        }
    }
}

/// The triangle estimate.
#[derive(Clone, Debug, Serialize)]
pub struct TrianglesOutput {
    /// Walks that returned to their start at hop 3.
    pub closed: u64,
    /// Walks run.
    pub walks: u64,
    /// `closed / walks`.
    pub concentration: f64,
}

impl WalkApp for Triangles {
    type State = u64;
    type Output = TrianglesOutput;

    fn spec(&self) -> WalkSpec {
        self.spec.clone()
    }
    fn new_state(&self) -> u64 {
        0
    }
    fn visit(&self, closed: &mut u64, visit: &Visit) {
        if visit.hop == 3 && visit.vertex == visit.source_vertex {
            *closed += 1;
        }
    }
    fn merge(&self, into: &mut u64, other: u64) {
        *into += other;
    }
    fn finish(&self, closed: u64) -> Result<TrianglesOutput> {
        let walks = self.spec.starts.total(0);
        #[allow(clippy::cast_precision_loss)]
        let concentration = closed as f64 / walks.max(1) as f64;
        Ok(TrianglesOutput {
            closed,
            walks,
            concentration,
        })
    }
}

/// DeepWalk / Node2Vec-style corpus: `walks_per_vertex` walks of `length`
/// steps from every vertex, in vertex order, for embedding training.
/// [`write_corpus`] writes each walk as one line of space-separated vertex
/// ids and [`collect_walks`] keeps them as one array; both run it in rounds
/// of as many vertices as `max_bytes` of assembled paths allow, so a corpus
/// larger than memory streams to its file.
#[derive(Debug)]
pub struct Corpus<'w> {
    /// The walks of this round.
    pub spec: WalkSpec,
    /// `length + 1` positions per walk, in walk-id order; [`NO_VERTEX`]
    /// where a walk had stopped.
    paths: &'w [AtomicU32],
}

/// Marks the positions of a walk after it stopped early (at a dead end):
/// in [`Walks::paths`], every position past the last vertex of a walk.
pub const NO_VERTEX: u32 = u32::MAX;

/// Where the corpus went.
#[derive(Clone, Debug, Serialize)]
pub struct CorpusOutput {
    /// The file written.
    pub path: PathBuf,
    /// Walks (lines) written.
    pub walks: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Rounds the walks ran in.
    pub rounds: u64,
}

impl WalkApp for Corpus<'_> {
    type State = ();
    type Output = ();

    fn spec(&self) -> WalkSpec {
        self.spec.clone()
    }
    fn needs_walk_ids(&self) -> bool {
        true
    }
    fn writes_by_walk(&self) -> bool {
        true
    }
    fn new_state(&self) {}
    fn visit(&self, _state: &mut (), visit: &Visit) {
        let id = visit.walk.expect("exact mode gives walk ids");
        let width = u64::from(self.spec.length) + 1;
        let at = usize::try_from(id * width + u64::from(visit.hop)).expect("position fits usize");
        if visit.hop == 0 {
            // A walk's start writes its whole row: the positions it never
            // reaches stay NO_VERTEX, so rounds need no buffer filled first.
            let row = &self.paths[at..at + usize::try_from(width).expect("width fits usize")];
            row[0].store(visit.vertex, Ordering::Relaxed);
            for position in &row[1..] {
                position.store(NO_VERTEX, Ordering::Relaxed);
            }
        } else {
            self.paths[at].store(visit.vertex, Ordering::Relaxed);
        }
    }
    fn merge(&self, _into: &mut (), _other: ()) {}
    fn finish(&self, _state: ()) -> Result<()> {
        Ok(())
    }
}

/// Where the rounds of a corpus put their paths.
trait PathSink {
    /// The buffer the next round's `positions` positions go to, as it is:
    /// a walk's start writes its whole row ([`Corpus`]).
    fn round(&mut self, positions: usize) -> Result<&[AtomicU32]>;
    /// The round that [`PathSink::round`] handed the buffer to is done.
    fn done(&mut self) -> Result<()>;
}

/// Writes each round's walks as lines of text.
struct TextSink {
    path: PathBuf,
    writer: std::io::BufWriter<quiver_io::Output>,
    /// How the graph names its vertices: lines carry its own ids.
    names: quiver_csr::VertexIds,
    /// Positions per walk.
    width: usize,
    /// The round's paths, reused from round to round.
    paths: Vec<AtomicU32>,
    walks: u64,
    bytes: u64,
}

impl PathSink for TextSink {
    fn round(&mut self, positions: usize) -> Result<&[AtomicU32]> {
        self.paths.resize_with(positions, AtomicU32::default);
        Ok(&self.paths)
    }

    fn done(&mut self) -> Result<()> {
        let err = |source| Error::Output {
            path: self.path.clone(),
            source,
        };
        let mut line = String::new();
        for path in self.paths.chunks(self.width) {
            line.clear();
            for v in path
                .iter()
                .map(|v| v.load(Ordering::Relaxed))
                .take_while(|&v| v != NO_VERTEX)
            {
                if !line.is_empty() {
                    line.push(' ');
                }
                line.push_str(&self.names.original(v).to_string());
            }
            line.push('\n');
            self.writer.write_all(line.as_bytes()).map_err(err)?;
            self.bytes += line.len() as u64;
            self.walks += 1;
        }
        Ok(())
    }
}

/// Keeps every round's walks in one array, each round in its own slice.
struct ArraySink {
    paths: Vec<AtomicU32>,
    /// Where the next round starts.
    next: usize,
    /// Positions of the round in progress.
    positions: usize,
}

impl PathSink for ArraySink {
    fn round(&mut self, positions: usize) -> Result<&[AtomicU32]> {
        self.positions = positions;
        Ok(&self.paths[self.next..self.next + positions])
    }

    fn done(&mut self) -> Result<()> {
        self.next += self.positions;
        Ok(())
    }
}

/// A run's progress as part of a phase already started: the rounds of a
/// corpus advance one bar, whose total is every round's walks.
struct Continued<'a>(&'a dyn crate::Progress);

impl crate::Progress for Continued<'_> {
    fn advance(&self, delta: u64) {
        self.0.advance(delta);
    }

    fn note(&self, note: &str) {
        self.0.note(note);
    }

    fn cancelled(&self) -> bool {
        self.0.cancelled()
    }
}

/// Runs a corpus of `walks_per_vertex` walks of `spec.length` steps from
/// every vertex of `graph`, in rounds of as many vertices as `max_bytes`
/// of paths allow (4 bytes a position), handing each round's paths to
/// `sink`. Returns the rounds' summed report and how many rounds ran.
#[allow(clippy::too_many_arguments)] // the public calls' arguments, passed on
fn corpus_rounds(
    graph: &std::path::Path,
    config: &crate::Config,
    spec: &WalkSpec,
    walks_per_vertex: u64,
    max_bytes: u64,
    num_vertices: u32,
    sink: &mut dyn PathSink,
    progress: &dyn crate::Progress,
) -> Result<(crate::Report<()>, u64)> {
    let per_vertex = walks_per_vertex.max(1) * (u64::from(spec.length) + 1) * 4;
    let round = u32::try_from(max_bytes / per_vertex).unwrap_or(u32::MAX);
    if round == 0 {
        return Err(Error::invalid("max_bytes", format!(
            "{max_bytes} bytes cannot hold the paths of one vertex's {walks_per_vertex} walks ({per_vertex} bytes)"
        )));
    }
    // One bar for every round: the rounds' runs advance it, and do not
    // start phases of their own.
    progress.start(
        "walking",
        quiver_run::Unit::Walks,
        Some(u64::from(num_vertices) * walks_per_vertex),
    );
    let continued = Continued(progress);
    let mut total: Option<crate::Report<()>> = None;
    let mut rounds = 0u64;
    for first in (0..num_vertices).step_by(usize::try_from(round).expect("u32 fits usize")) {
        let last = first.saturating_add(round).min(num_vertices);
        let positions = u64::from(last - first) * walks_per_vertex * (u64::from(spec.length) + 1);
        let app = Corpus {
            spec: WalkSpec {
                starts: Starts::Sources {
                    sources: (first..last).collect(),
                    walks_per_source: walks_per_vertex,
                },
                ..spec.clone()
            },
            paths: sink.round(usize::try_from(positions).expect("a round's paths fit memory"))?,
        };
        let round_config = crate::Config {
            seed: config
                .seed
                .wrapping_add(rounds.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            ..config.clone()
        };
        let report = crate::run_with_progress(graph, &round_config, &app, &continued)?;
        sink.done()?;
        rounds += 1;
        total = Some(match total {
            None => report,
            Some(t) => t.then(report),
        });
    }
    let total = total.ok_or_else(|| Error::invalid("graph", "the graph has no vertices"))?;
    Ok((total, rounds))
}

/// Splits one memory budget the way `quiver walk corpus` and the Python
/// package do: half of `config.mem_budget` assembles paths (the
/// `max_bytes` of [`write_corpus`] and [`collect_walks`]), the other half
/// walks them (the returned configuration's budget).
pub fn split_corpus_budget(config: &crate::Config) -> (crate::Config, u64) {
    let half = config.mem_budget / 2;
    (
        crate::Config {
            mem_budget: half,
            ..config.clone()
        },
        half,
    )
}

/// Writes a corpus of `walks_per_vertex` walks of `spec.length` steps from
/// every vertex of `graph` to `output` (atomically: temporary name, fsync,
/// rename), in rounds of as many vertices as `max_bytes` of paths allow
/// (4 bytes a position). `spec` gives the walk kind, Node2Vec bias and
/// dead-end policy; its starts are replaced. Rounds draw from their own
/// seeds. The report sums the rounds (peak memory is the largest round's).
/// `progress` has one "walking" phase for all rounds. Lines name vertices as
/// the graph does: by its id map's ids where it has one.
pub fn write_corpus(
    graph: &std::path::Path,
    config: &crate::Config,
    spec: &WalkSpec,
    walks_per_vertex: u64,
    output: &std::path::Path,
    max_bytes: u64,
    progress: &dyn crate::Progress,
) -> Result<crate::Report<CorpusOutput>> {
    let num_vertices = quiver_csr::read_header(graph)?.num_vertices;
    let names = quiver_csr::VertexIds::open(graph)?;
    let err = |source| Error::Output {
        path: output.to_owned(),
        source,
    };
    let out = quiver_io::Output::create(output, quiver_io::Shape::Stream).map_err(err)?;
    let mut sink = TextSink {
        path: output.to_owned(),
        writer: std::io::BufWriter::with_capacity(1 << 20, out),
        names,
        width: usize::try_from(spec.length).expect("length fits usize") + 1,
        paths: Vec::new(),
        walks: 0,
        bytes: 0,
    };
    let (total, rounds) = corpus_rounds(
        graph,
        config,
        spec,
        walks_per_vertex,
        max_bytes,
        num_vertices,
        &mut sink,
        progress,
    )?;
    let out = sink.writer.into_inner().map_err(|e| err(e.into_error()))?;
    out.commit().map_err(err)?;
    Ok(total.with_result(CorpusOutput {
        path: output.to_owned(),
        walks: sink.walks,
        bytes: sink.bytes,
        rounds,
    }))
}

/// The walks of a corpus held in memory ([`collect_walks`]).
#[derive(Clone, Debug, Serialize)]
pub struct Walks {
    /// Walk after walk, `width` positions each: walk `i` starts at
    /// `i / walks_per_vertex`, and after a walk stops early (at a dead
    /// end) its remaining positions are [`NO_VERTEX`].
    #[serde(skip)]
    pub paths: Vec<u32>,
    /// Positions per walk: `length + 1`.
    pub width: usize,
    /// Walks held (`paths.len() / width`).
    pub walks: u64,
    /// Rounds the walks ran in.
    pub rounds: u64,
}

/// The walks [`write_corpus`] writes for the same arguments, kept in one
/// array instead of a file: every position of every walk, padded with
/// [`NO_VERTEX`] after a walk that stopped early. Rounds are cut by
/// `max_bytes` exactly as there (and draw the same walks), but each
/// writes straight into its part of the result, which is allocated once,
/// whole (`|V| * walks_per_vertex * (length + 1)` `u32`s, beyond the
/// budget). `progress` has one "walking" phase for all rounds.
pub fn collect_walks(
    graph: &std::path::Path,
    config: &crate::Config,
    spec: &WalkSpec,
    walks_per_vertex: u64,
    max_bytes: u64,
    progress: &dyn crate::Progress,
) -> Result<crate::Report<Walks>> {
    let num_vertices = quiver_csr::read_header(graph)?.num_vertices;
    let width = u64::from(spec.length) + 1;
    let too_many = || {
        Error::invalid(
            "walks_per_vertex",
            format!(
                "{num_vertices} vertices times {walks_per_vertex} walks of {width} positions do not fit in memory"
            ),
        )
    };
    let positions = u64::from(num_vertices)
        .checked_mul(walks_per_vertex)
        .and_then(|walks| walks.checked_mul(width))
        .and_then(|p| usize::try_from(p).ok())
        .ok_or_else(too_many)?;
    // Zeroed pages cost nothing until the walks write them (every walk's
    // start writes its whole row); an allocation that fails is an error
    // here, not an abort.
    let paths =
        bytemuck::allocation::try_zeroed_vec::<AtomicU32>(positions).map_err(|()| too_many())?;
    quiver_io::advise_huge_pages(&paths);
    let mut sink = ArraySink {
        paths,
        next: 0,
        positions: 0,
    };
    let (total, rounds) = corpus_rounds(
        graph,
        config,
        spec,
        walks_per_vertex,
        max_bytes,
        num_vertices,
        &mut sink,
        progress,
    )?;
    // Reuses the allocation: an atomic has the layout of its integer.
    let paths: Vec<u32> = sink.paths.into_iter().map(AtomicU32::into_inner).collect();
    Ok(total.with_result(Walks {
        width: usize::try_from(width).expect("width fits usize"),
        walks: u64::from(num_vertices) * walks_per_vertex,
        paths,
        rounds,
    }))
}
