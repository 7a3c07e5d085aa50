//! A node's control loop, every tick: harvest the monitor (the location
//! cache's counters and the home's reads), gather every node's report,
//! plan with the coordinator ([`Coordinator`], the same plan on every
//! node) and hand this node's approved migrations to its migrator, or
//! under the `shard` policy move shards; reclaim; and record the tick as a
//! point of the time series.
//!
//! The `shard` baseline (Pragh §5) moves whole shards, keys and values,
//! instead of values: every node counts its accesses per shard; at each
//! interval's end the nodes gather the counts and agree on the optimal plan
//! ([`plan_shards`]); every node then holds its workers between operations,
//! each target copies its shards ([`Session::pull_shard`](crate::Session::pull_shard)),
//! and every node points its shard map at the new homes before its workers
//! go on. Queries follow their start's shard to its new home. The pause is
//! wall time of the run (`paused_ns`), but no worker's modelled time, and
//! the counting costs nothing: the paper charges its shard baseline neither.

use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::clock::nanos;
use crate::histogram::Histogram;
use crate::job::Watch;
use crate::lease::{LeasePlan, Room};
use crate::policy::{plan_shards, Coordinator, Plan};
use crate::report::Point;
use crate::store::{Store, StoreCounts};
use crate::workload::{Latencies, Pause, Shared};
use crate::{Error, Policy, Result};

/// What one node gathers to the others every tick.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Tick {
    pairs: Vec<(u32, u32)>,
    /// Accesses per shard over the interval (the `shard` policy, at an
    /// interval's end).
    shard_accesses: Vec<u32>,
    ops: u64,
    /// Modelled time of those ops, summed over the workers.
    modelled_ns: u64,
    workers: u64,
    gets: u64,
    remote_gets: u64,
    cache_hits: u64,
    cache_misses: u64,
    /// The node's migration counts so far.
    counts: StoreCounts,
    /// Words free in the node's value region, and waiting out a lease.
    room: (u64, u64),
    latency: Histogram,
    get_latency: Histogram,
    /// Whether this node's caller asked the run to stop.
    stop: bool,
}

/// The job's migrations so far, summed over its nodes.
#[derive(Clone, Copy, Debug, Default)]
struct Moved {
    migrations: u64,
    words: u64,
    ops: u64,
}

impl Moved {
    fn add(&mut self, counts: &StoreCounts) {
        self.migrations += counts.migrations;
        self.words += counts.words_moved;
        self.ops += counts.migration_ops;
    }
}

/// One-sided operations a migration takes at most (Pragh's unilateral
/// protocol).
const MAX_MIGRATION_OPS: u32 = 5;

/// Approvals migrated together at most.
const MIGRATION_BATCH: usize = 256;

/// The migration thread: moves every approved key here. Returns how many
/// were refused as too large to move.
pub(crate) fn migrate_all(store: &Store, approved: mpsc::Receiver<u32>) -> Result<u64> {
    let mut session = store.session();
    let mut refused = 0;
    // Every approval waiting is migrated in one pipelined batch; a value
    // too large to move is refused on its own.
    while let Ok(first) = approved.recv() {
        let mut batch = vec![first];
        batch.extend(approved.try_iter().take(MIGRATION_BATCH - 1));
        match session.migrate_batch(&batch) {
            Ok(_) => {}
            Err(Error::TooLarge { .. }) => {
                for key in batch {
                    match session.migrate(key) {
                        Ok(_) => {}
                        Err(Error::TooLarge { .. }) => refused += 1,
                        Err(e) => return Err(e),
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(refused)
}

/// What the control thread saw.
pub(crate) struct Controlled {
    /// The time series.
    pub(crate) series: Vec<Point>,
    /// Applications refused as contended.
    pub(crate) contended: u64,
    /// Share of the last interval's Gets that went to shared pairs.
    pub(crate) shared_share: f64,
    /// Keys that the last interval's reports showed read mostly away from
    /// their home.
    pub(crate) mostly_remote: u64,
    /// Time the workers were held while shards moved.
    pub(crate) paused_ns: u64,
    /// Whether the run stopped early because a caller asked.
    pub(crate) cancelled: bool,
}

/// The control thread: every tick, harvest the monitor, gather with the
/// other nodes, plan and hand this node its migrations (or move shards),
/// derive the leases with `leases`, reclaim, and record the tick.
pub(crate) fn control(
    shared: Shared<'_>,
    moves: &mpsc::Sender<u32>,
    mut leases: LeasePlan,
) -> Result<Controlled> {
    let Shared {
        store,
        config,
        begun,
        stop,
        live,
        pause,
        watch,
        ..
    } = shared;
    let node = store.node();
    let mut paused_ns = 0;
    let mut cancelled = false;
    let approval = config.approval();
    let mut coordinator =
        Coordinator::new(store.placement(), approval, config.ticks_per_interval());
    if config.store.plan == Plan::Deferred {
        coordinator = coordinator.deferring(config.ticks_per_interval());
    }
    let ticks = config.ticks();
    let per_interval = config.ticks_per_interval();
    let tick_s = config.tick.as_secs_f64();
    let mut series = Vec::new();
    let mut moved_before = Moved::default();
    // What a migration costs: its one-sided operations so far (every
    // node's, from the last gathered reports: the same on every node), the
    // protocol's bound before the first. The derived floors are that many
    // reads over the window counted.
    let mut migration_ops = MAX_MIGRATION_OPS;
    let (mut interval_gets, mut shared_share, mut mostly_remote) = (0u64, 0.0, 0);
    for tick in 1..=ticks {
        let due = begun + config.tick * u32::try_from(tick).unwrap_or(u32::MAX);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        if tick == ticks {
            stop.store(true, Ordering::Relaxed);
        }
        let ends_interval = tick % per_interval == 0;
        // The applicant's floor over the reads counted since the interval
        // began: the report rate over the whole interval at its end, the
        // instant rate over the ticks so far before it, or derived, a
        // migration's cost.
        #[allow(clippy::cast_precision_loss)]
        let (rate, window_s) = if ends_interval {
            (config.report_rate, tick_s * per_interval as f64)
        } else {
            (config.instant_rate, tick_s * (tick % per_interval) as f64)
        };
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let floor = rate
            .map_or(migration_ops, |rate| {
                (f64::from(rate) * window_s).ceil() as u32
            })
            .max(1);
        let pairs = if config.policy.migrates() {
            store.harvest(approval.reported(floor), ends_interval)
        } else {
            Vec::new()
        };
        let Latencies {
            ops: latency,
            gets: get_latency,
        } = std::mem::take(
            &mut *live
                .latency
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let shard_accesses = if config.policy == Policy::Shard && ends_interval {
            store.harvest_shards()
        } else {
            Vec::new()
        };
        let mine = Tick {
            pairs,
            shard_accesses,
            ops: live.ops.swap(0, Ordering::Relaxed),
            modelled_ns: live.modelled_ns.swap(0, Ordering::Relaxed),
            workers: config.workers() as u64,
            gets: live.gets.swap(0, Ordering::Relaxed),
            remote_gets: live.remote_gets.swap(0, Ordering::Relaxed),
            cache_hits: live.cache_hits.swap(0, Ordering::Relaxed),
            cache_misses: live.cache_misses.swap(0, Ordering::Relaxed),
            counts: store.counts(),
            room: store.room(),
            latency,
            get_latency,
            stop: watch.is_some_and(Watch::stopping),
        };
        let bytes = serde_json::to_vec(&mine).expect("a tick serializes");
        let gathered = node.all_gather(&bytes).map_err(Error::Verbs)?;
        let reports: Vec<Tick> = gathered
            .iter()
            .map(|b| {
                serde_json::from_slice(b)
                    .map_err(|e| Error::Corrupt(format!("a node's tick report: {e}")))
            })
            .collect::<Result<_>>()?;
        // A caller's request to stop, heard by any node, ends the run at
        // this tick on every node: each sees every node's report.
        if reports.iter().any(|t| t.stop) {
            stop.store(true, Ordering::Relaxed);
            cancelled = true;
            break;
        }
        if config.policy.migrates() {
            let pairs: Vec<Vec<(u32, u32)>> = reports.iter().map(|t| t.pairs.clone()).collect();
            let planned = coordinator.plan(tick, &pairs, floor, migration_ops);
            let (asked, settled) = coordinator.tracking();
            store.track(asked, true);
            store.track(settled, false);
            interval_gets += reports.iter().map(|t| t.gets).sum::<u64>();
            if ends_interval {
                #[allow(clippy::cast_precision_loss)]
                {
                    shared_share = coordinator.shared() as f64 / interval_gets.max(1) as f64;
                }
                mostly_remote = coordinator.mostly_remote();
                interval_gets = 0;
            }
            for planned in planned {
                if planned.target == store.rank() {
                    // A migrator that stopped on an error is gone (the node's
                    // run returns that error when it joins the migrator):
                    // its approvals have nobody to go to.
                    let _ = moves.send(planned.key);
                }
            }
        }
        if config.policy == Policy::Shard && ends_interval && tick < ticks {
            let held = Instant::now();
            move_shards(store, &reports, pause, config.workers())?;
            paused_ns += nanos(held.elapsed());
        }
        let rooms: Vec<Room> = reports
            .iter()
            .map(|t| Room {
                free_words: t.room.0,
                waiting_words: t.room.1,
                retired_words: t.counts.words_retired,
            })
            .collect();
        let (cache_ns, reclaim_ns) = leases.tick(tick, &rooms);
        store.set_leases((cache_ns, reclaim_ns));
        store.reclaim();
        #[allow(clippy::cast_precision_loss)]
        let mut point = Point {
            t_s: begun.elapsed().as_secs_f64(),
            cache_lease_s: cache_ns as f64 / 1e9,
            reclaim_lease_s: reclaim_ns as f64 / 1e9,
            ..Point::default()
        };
        let (mut gets, mut remote, mut hits, mut misses) = (0u64, 0u64, 0u64, 0u64);
        let mut moved = Moved::default();
        let (mut latency, mut get_latency) = (Histogram::default(), Histogram::default());
        for t in &reports {
            #[allow(clippy::cast_precision_loss)]
            {
                point.ops_per_s += t.ops as f64 / tick_s;
                if t.modelled_ns > 0 {
                    point.modelled_ops_per_s +=
                        t.ops as f64 * t.workers as f64 * 1e9 / t.modelled_ns as f64;
                }
            }
            gets += t.gets;
            remote += t.remote_gets;
            hits += t.cache_hits;
            misses += t.cache_misses;
            moved.add(&t.counts);
            latency.merge(&t.latency);
            get_latency.merge(&t.get_latency);
        }
        #[allow(clippy::cast_precision_loss)]
        {
            point.remote_share = if gets == 0 {
                0.0
            } else {
                remote as f64 / gets as f64
            };
        }
        if moved.migrations > 0 {
            migration_ops = u32::try_from(moved.ops.div_ceil(moved.migrations)).unwrap_or(u32::MAX);
        }
        point.migrations = moved.migrations - moved_before.migrations;
        point.bytes_moved = (moved.words - moved_before.words) * 8;
        let ops = moved.ops - moved_before.ops;
        moved_before = moved;
        #[allow(clippy::cast_precision_loss)]
        {
            point.one_sided_per_migration =
                (point.migrations > 0).then(|| ops as f64 / point.migrations as f64);
            point.cache_hit_rate =
                (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64);
        }
        point.p50_ns = latency.quantile(0.5);
        point.p99_ns = latency.quantile(0.99);
        point.p999_ns = latency.quantile(0.999);
        point.get_p999_ns = get_latency.quantile(0.999);
        series.push(point);
        if let Some(watch) = watch {
            watch.ticked(tick);
        }
    }
    Ok(Controlled {
        series,
        contended: coordinator.contended(),
        shared_share,
        mostly_remote,
        paused_ns,
        cancelled,
    })
}

/// The `shard` policy's move at an interval's end, from every node's
/// accesses per shard (`ticks`, by rank): plans, and if anything moves,
/// holds this node's `workers`, copies the shards planned to come here once
/// every node's workers are held, points the shard map at the new homes
/// once every copy is made, and drops the copies that left once every
/// node's map is repointed.
fn move_shards(store: &Store, ticks: &[Tick], pause: &Pause, workers: usize) -> Result<()> {
    let node = store.node();
    let homes: Vec<u32> = (0..store.placement().shards())
        .map(|shard| store.shard_home(shard))
        .collect();
    let accesses: Vec<Vec<u32>> = ticks.iter().map(|t| t.shard_accesses.clone()).collect();
    let plan = plan_shards(&homes, &accesses);
    if plan.is_empty() {
        return Ok(());
    }
    pause.hold(workers);
    let moved = (|| {
        node.barrier().map_err(Error::Verbs)?;
        let mut session = store.session();
        for m in plan.iter().filter(|m| m.to == store.rank()) {
            session.pull_shard(m.shard)?;
        }
        node.barrier().map_err(Error::Verbs)?;
        for m in &plan {
            store.set_shard_home(m.shard, m.to);
        }
        // Every map points at the new homes before any worker goes on, so
        // no Put forwarded by a released node lands on a copy being dropped.
        node.barrier().map_err(Error::Verbs)?;
        for m in plan.iter().filter(|m| m.from == store.rank()) {
            store.drop_shard(m.shard);
        }
        Ok(())
    })();
    pause.release();
    moved
}
