//! The workload (Pragh §6.2) and the workers that run it.
//!
//! Start vertices are drawn by Zipf (θ 0.99; 0 for uniform) over a scope
//! of 2^10 vertices (the first vertices, in id order, with a neighbour, or
//! `min_degree` of them: a permuted graph's ids are random); a query reads
//! the start's first 100 neighbours and then the first 100 neighbours of
//! each (101 Gets); 5% of operations instead insert an edge from the start
//! vertex to a random vertex (a Put, appended to its list, where a query
//! reads it only while the list is shorter than a hop's reads). Inserts,
//! not updates that repoint one of its edges (`Update::SetEdge`): a hot
//! start's edges would all be repointed within seconds, turning the
//! neighbourhood its queries read over faster than any placement follows.
//! With `shift_every`, the scope moves to the next, disjoint range of
//! start vertices at that period (the dynamic workload) ([`Draw`]).
//! Each node's workers draw from the same distribution and keep the starts
//! homed on their node, as if clients sent each request to its start's
//! home. Under the `shard` policy the workers are held between operations
//! while shards move ([`Pause`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use quiver_csr::Graph;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_pcg::Pcg64;

use crate::clock::nanos;
use crate::histogram::Histogram;
use crate::job::Watch;
use crate::store::{Store, Tally};
use crate::update::Update;
use crate::{Config, Error, Result};

/// The start vertices of the workload: the first `scope` vertices (times
/// the scope shifts in the run, plus one) with at least `min_degree`
/// neighbours (at least one), in id order.
///
/// # Errors
/// [`Error::InvalidArgument`] if no vertex has that many neighbours.
pub fn starts(graph: &Graph, config: &Config) -> Result<Vec<u32>> {
    let shifts = config.shift_every.map_or(0, |every| {
        u64::try_from(config.duration.as_nanos() / every.as_nanos()).unwrap_or(u64::MAX)
    });
    let wanted = u64::from(config.scope).saturating_mul(shifts + 1);
    let starts: Vec<u32> = (0..graph.num_vertices())
        .filter(|&v| graph.degree(v) >= config.min_degree.max(1))
        .take(usize::try_from(wanted).unwrap_or(usize::MAX))
        .collect();
    if starts.is_empty() {
        return Err(Error::invalid(
            "min_degree",
            format!(
                "no vertex of the graph has {} neighbours to start a query from",
                config.min_degree.max(1)
            ),
        ));
    }
    Ok(starts)
}

/// Counters the workers add to and the control thread reads every tick.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub(crate) ops: AtomicU64,
    pub(crate) modelled_ns: AtomicU64,
    pub(crate) gets: AtomicU64,
    pub(crate) remote_gets: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
    pub(crate) cache_misses: AtomicU64,
    pub(crate) latency: Mutex<Latencies>,
}

/// A tick's latencies, wall clock: whole operations and their Gets.
#[derive(Debug, Default)]
pub(crate) struct Latencies {
    pub(crate) ops: Histogram,
    pub(crate) gets: Histogram,
}

/// Holds a node's workers between operations while shards move.
#[derive(Debug, Default)]
pub(crate) struct Pause {
    state: Mutex<PauseState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct PauseState {
    held: bool,
    /// Workers waiting, or gone for good.
    idle: usize,
}

impl Pause {
    fn state(&self) -> MutexGuard<'_, PauseState> {
        crate::store::lock(&self.state)
    }

    /// A worker between operations: waits while the workers are held.
    fn between_operations(&self) {
        let mut state = self.state();
        if !state.held {
            return;
        }
        state.idle += 1;
        self.changed.notify_all();
        while state.held {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.idle -= 1;
    }

    /// Holds the workers; returns once all `workers` wait (or have left).
    pub(crate) fn hold(&self, workers: usize) {
        let mut state = self.state();
        state.held = true;
        while state.idle < workers {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    pub(crate) fn release(&self) {
        self.state().held = false;
        self.changed.notify_all();
    }
}

/// A worker's presence: when it ends, however it ends, the worker counts
/// as idle for good, so that holding the workers never waits for it.
pub(crate) struct Present<'p>(pub(crate) &'p Pause);

impl Drop for Present<'_> {
    fn drop(&mut self) {
        self.0.state().idle += 1;
        self.0.changed.notify_all();
    }
}

/// What one worker did.
#[derive(Debug, Default)]
pub(crate) struct WorkerResult {
    pub(crate) queries: u64,
    pub(crate) puts: u64,
    pub(crate) tally: Tally,
    pub(crate) latency: Histogram,
    pub(crate) modelled_latency: Histogram,
}

/// What a node's workers and its control thread share.
#[derive(Clone, Copy)]
pub(crate) struct Shared<'a> {
    pub(crate) store: &'a Store,
    pub(crate) config: &'a Config,
    pub(crate) starts: &'a [u32],
    pub(crate) begun: Instant,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) live: &'a Live,
    pub(crate) pause: &'a Pause,
    /// The caller's watch, when it runs in this process.
    pub(crate) watch: Option<&'a Watch>,
}

/// How workers draw start vertices: Zipf over the scope (uniform at
/// exponent 0), the scope moved on to the next disjoint range of the
/// starts every `shift_every` (the dynamic workload).
struct Draw<'a> {
    starts: &'a [u32],
    scope: usize,
    zipf: Zipf<f64>,
    shift_every: Option<Duration>,
}

impl<'a> Draw<'a> {
    fn new(starts: &'a [u32], config: &Config) -> Result<Draw<'a>> {
        let scope = config
            .scope
            .min(u32::try_from(starts.len()).unwrap_or(u32::MAX));
        let zipf = Zipf::new(f64::from(scope), config.zipf)
            .map_err(|e| Error::invalid("zipf", e.to_string()))?;
        Ok(Draw {
            starts,
            scope: scope as usize,
            zipf,
            shift_every: config.shift_every,
        })
    }

    /// A start vertex for an operation `elapsed` into the run.
    fn start(&self, rng: &mut Pcg64, elapsed: Duration) -> u32 {
        let shift = self.shift_every.map_or(0, |every| {
            usize::try_from(elapsed.as_nanos() / every.as_nanos()).unwrap_or(0) * self.scope
        });
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let rank = self.zipf.sample(rng) as usize - 1;
        self.starts[(shift + rank) % self.starts.len()]
    }
}

/// A worker: operations until told to stop.
pub(crate) fn work(shared: Shared<'_>, worker: usize) -> Result<WorkerResult> {
    let Shared {
        store,
        config,
        starts,
        begun,
        stop,
        live,
        pause,
        ..
    } = shared;
    let rank = store.rank();
    let mut rng = Pcg64::seed_from_u64(
        config.seed ^ (u64::from(rank) << 32) ^ (worker as u64).wrapping_mul(0x9e37_79b9),
    );
    let draw = Draw::new(starts, config)?;
    let mut session = store.session();
    let mut result = WorkerResult::default();
    // The Gets of the operation running, wall clock (a buffer kept across
    // operations: a fresh histogram each time would allocate its tree
    // again).
    let mut gets: Vec<u64> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        pause.between_operations();
        // Draws until a start homed here comes up; a node that homes none
        // of the scope's starts (a small graph, many nodes) idles.
        let elapsed = begun.elapsed();
        let drawn = (0..64 * store.node().size()).find_map(|_| {
            let v = draw.start(&mut rng, elapsed);
            (store.home_node(v) == rank).then_some(v)
        });
        let Some(start) = drawn else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let began = Instant::now();
        let before = session.tally().clone();
        if rng.random_range(0..100) < config.mix.queries {
            // Each hop's Get ends where the next begins.
            let mut last = began;
            session.two_hop(start, config.neighbours, |_| {
                let now = Instant::now();
                gets.push(nanos(now - last));
                last = now;
            })?;
            result.queries += 1;
        } else {
            let target = rng.random_range(0..store.vertices());
            session.put(start, Update::AddEdge(target))?;
            result.puts += 1;
        }
        let took = nanos(began.elapsed());
        let tally = session.tally();
        result.latency.record(took);
        result
            .modelled_latency
            .record(tally.modelled_ns - before.modelled_ns);
        live.ops.fetch_add(1, Ordering::Relaxed);
        live.modelled_ns
            .fetch_add(tally.modelled_ns - before.modelled_ns, Ordering::Relaxed);
        live.gets
            .fetch_add(tally.gets - before.gets, Ordering::Relaxed);
        live.remote_gets
            .fetch_add(tally.remote_gets - before.remote_gets, Ordering::Relaxed);
        live.cache_hits
            .fetch_add(tally.cache_hits - before.cache_hits, Ordering::Relaxed);
        live.cache_misses
            .fetch_add(tally.cache_misses - before.cache_misses, Ordering::Relaxed);
        let mut latency = live
            .latency
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        latency.ops.record(took);
        for get in gets.drain(..) {
            latency.gets.record(get);
        }
    }
    result.tally = session.tally().clone();
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drawn(config: &Config, starts: &[u32], elapsed: Duration, n: usize) -> Vec<usize> {
        let draw = Draw::new(starts, config).unwrap();
        let mut rng = Pcg64::seed_from_u64(3);
        let mut counts = vec![0; starts.len()];
        for _ in 0..n {
            let v = draw.start(&mut rng, elapsed);
            counts[starts.iter().position(|&s| s == v).unwrap()] += 1;
        }
        counts
    }

    #[test]
    fn zipf_0_draws_the_scope_evenly_and_0_99_favours_its_first() {
        // Starts are ids with a neighbour, so not 0..64 in general.
        let starts: Vec<u32> = (0..128).map(|i| i * 3 + 1).collect();
        let config = |zipf| Config {
            zipf,
            scope: 64,
            ..Config::default()
        };
        let uniform = drawn(&config(0.0), &starts, Duration::ZERO, 64_000);
        assert!(uniform[64..].iter().all(|&c| c == 0), "outside the scope");
        // 1,000 each on average; 5 standard deviations is about 160.
        assert!(
            uniform[..64].iter().all(|&c| (840..1_160).contains(&c)),
            "{uniform:?}"
        );
        let skewed = drawn(&config(0.99), &starts, Duration::ZERO, 64_000);
        assert!(skewed[64..].iter().all(|&c| c == 0), "outside the scope");
        // Rank 1 against rank 64: 64^0.99, about 61 times as often.
        assert!(skewed[0] > 40 * skewed[63].max(1), "{skewed:?}");
    }

    #[test]
    fn the_dynamic_scope_moves_to_the_next_disjoint_range_each_period() {
        let starts: Vec<u32> = (0..96).map(|i| i * 2).collect();
        let config = Config {
            zipf: 0.0,
            scope: 32,
            shift_every: Some(Duration::from_secs(2)),
            ..Config::default()
        };
        let in_range = |elapsed_ms, range: std::ops::Range<usize>| {
            let counts = drawn(&config, &starts, Duration::from_millis(elapsed_ms), 3_200);
            let outside: usize = counts
                .iter()
                .enumerate()
                .filter(|(i, _)| !range.contains(i))
                .map(|(_, c)| c)
                .sum();
            assert_eq!(outside, 0, "at {elapsed_ms} ms: {counts:?}");
            assert!(counts[range].iter().all(|&c| c > 0), "at {elapsed_ms} ms");
        };
        in_range(0, 0..32);
        in_range(1_999, 0..32);
        in_range(2_000, 32..64);
        in_range(5_000, 64..96);
        // Past the starts kept, the scope wraps round to the first range.
        in_range(6_500, 0..32);
    }
}
