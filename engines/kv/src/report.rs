//! What a run reports: each node's [`NodeReport`], and the job's
//! [`Report`] joined from them (and [`BenchReport`], it with its graph): the shared run summary, the engine's own
//! counts (remote Gets, keys moved, one-sided operations per migration,
//! shards moved), latencies, the time series of [`Point`]s and the last
//! interval's [`Steady`] state.

use std::path::PathBuf;

use quiver_run::RunSummary;
use serde::{Deserialize, Serialize};

use crate::histogram::Histogram;
use crate::policy::Plan;
use crate::store::{StoreCounts, Tally};
use crate::{Config, Policy};

/// One point of the time series (the whole job, one tick).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds since the workers started, at the tick's end.
    pub t_s: f64,
    /// Queries and Puts per second during the tick (ideal: times the
    /// nodes asked for, as in the report).
    pub ops_per_s: f64,
    /// The same per second of modelled time (each node's ops over its
    /// workers' mean modelled time).
    pub modelled_ops_per_s: f64,
    /// Share of the tick's Gets that needed a remote operation.
    pub remote_share: f64,
    /// Values migrated during the tick.
    pub migrations: u64,
    /// Bytes of values migrated during the tick.
    pub bytes_moved: u64,
    /// One-sided operations per migration during the tick (`None`: none
    /// migrated).
    pub one_sided_per_migration: Option<f64>,
    /// Share of the tick's key lookups through the location cache that hit
    /// (`None`: no lookup used it).
    pub cache_hit_rate: Option<f64>,
    /// Operations' median latency during the tick, wall clock.
    pub p50_ns: u64,
    /// Their 99th percentile.
    pub p99_ns: u64,
    /// Their 99.9th percentile.
    pub p999_ns: u64,
    /// The 99.9th percentile of the tick's Gets (each hop of a query),
    /// wall clock: what a migration wave must not inflate.
    pub get_p999_ns: u64,
    /// The cache lease in force from the tick's end, in seconds (derived
    /// from the value room and the rate blocks are replaced: see
    /// [`StoreConfig`](crate::StoreConfig)).
    pub cache_lease_s: f64,
    /// The reclaim lease in force from the tick's end, in seconds.
    pub reclaim_lease_s: f64,
}

/// What one node reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    /// Loading the node's share.
    pub load_ns: u64,
    /// The workers' run.
    pub run_ns: u64,
    /// Time the workers were held while shards moved (`shard` policy).
    pub paused_ns: u64,
    /// Queries done.
    pub queries: u64,
    /// Puts done.
    pub puts: u64,
    /// The workers' Gets and their costs.
    pub tally: Tally,
    /// Operations per second of modelled time, summed over workers.
    pub modelled_ops_per_s: f64,
    /// Migrations, moves and reclamation.
    pub counts: StoreCounts,
    /// Migrations refused for a value too large to move.
    pub refused: u64,
    /// Applications the coordinator refused as contended (the same on
    /// every node).
    pub contended: u64,
    /// Share of the last interval's Gets that went to pairs other nodes
    /// read more: remote under any placement of one copy per pair (the
    /// same on every node).
    pub shared_share: f64,
    /// Keys the last interval's reports showed read mostly away from their
    /// home (the same on every node).
    pub mostly_remote: u64,
    /// Operation latency, wall clock.
    pub latency: Histogram,
    /// Operation latency, modelled.
    pub modelled_latency: Histogram,
    /// Bytes of the registered region.
    pub region_bytes: u64,
    /// Words of values in use at the end.
    pub used_words: u64,
    /// The job's time series (the same on every node).
    pub series: Vec<Point>,
}

/// Quantiles of a latency distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
}

impl Latency {
    fn of(histogram: &Histogram) -> Latency {
        Latency {
            p50_ns: histogram.quantile(0.5),
            p99_ns: histogram.quantile(0.99),
            p999_ns: histogram.quantile(0.999),
        }
    }
}

/// What `quiver kv bench --json` prints: the graph, the fabric and the
/// benchmark's [`Report`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    /// The graph's file.
    pub graph: PathBuf,
    /// |V|.
    pub vertices: u32,
    /// |E| (stored directed edges).
    pub edges: u64,
    /// The fabric the nodes spoke over.
    pub fabric: &'static str,
    /// The run.
    #[serde(flatten)]
    pub report: Report,
}

/// A benchmark run of the whole job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Times and memory (`peak_mem_bytes`: the nodes' registered regions,
    /// as reserved; under `shard` each has room for the whole graph).
    #[serde(flatten)]
    pub summary: RunSummary,
    /// The policy.
    pub policy: Policy,
    /// The coordinator's plan (what the migrating policies decide by).
    pub plan: Plan,
    /// Nodes asked for (the ideal policy runs on one and scales by this).
    pub nodes: u32,
    /// Queries done.
    pub queries: u64,
    /// Puts done.
    pub puts: u64,
    /// Queries and Puts per second, wall clock (ideal: times `nodes`).
    pub ops_per_s: f64,
    /// Queries and Puts per second of modelled time (ideal: times `nodes`).
    pub modelled_ops_per_s: f64,
    /// Share of Gets that needed a remote operation.
    pub remote_share: f64,
    /// Share of Gets whose value was read from another node (the rest of
    /// `remote_share` only looked the key up remotely).
    pub remote_value_share: f64,
    /// Share of remote key lookups the location cache answered.
    pub cache_hit_rate: f64,
    /// Values migrated (a value moved twice counts twice; under `shard`,
    /// the keys of the shards moved).
    pub keys_moved: u64,
    /// `keys_moved` as a share of the graph's vertices.
    pub keys_moved_share: f64,
    /// Bytes of the values migrated.
    pub bytes_moved: u64,
    /// One-sided operations per migration (per key of a shard moved).
    pub one_sided_ops_per_migration: f64,
    /// Shards moved (`shard` policy).
    pub shards_moved: u64,
    /// Time the workers were held while shards moved, the longest of any
    /// node's (`shard` policy; part of the wall-clock run).
    pub paused_ns: u64,
    /// Migrations that lost their CAS and started over.
    pub migration_retries: u64,
    /// Migrations refused (value too large to move).
    pub migrations_refused: u64,
    /// Applications refused because the pair's top two readers could not
    /// be told apart (the [`Approval`](crate::Approval) rule).
    pub contended: u64,
    /// Share of the last full interval's Gets that went to pairs another
    /// node read more: remote wherever each pair's one copy lives (a floor
    /// on `remote_share` from the workload's sharing, as the monitors saw it).
    pub shared_share: f64,
    /// Keys that the last full interval's reports showed read more often
    /// by other nodes than by their home, as a share of the graph's
    /// vertices: the keys one copy each would have to move away from home
    /// (compare `keys_moved_share`).
    pub mostly_remote_share: f64,
    /// Puts forwarded to a home or a holder.
    pub forwarded_puts: u64,
    /// Reads that met an invalidated block and started over.
    pub read_retries: u64,
    /// Reads that met memory reused under them (a torn read, or one that
    /// ended past its lease) and started over.
    pub stale_reads: u64,
    /// Operation latency, wall clock.
    pub latency: Latency,
    /// Operation latency, modelled.
    pub modelled_latency: Latency,
    /// Means over the ticks of the last monitoring interval (after the
    /// migrations of the one before): the steady state.
    pub last_interval: Steady,
    /// One point per tick.
    pub series: Vec<Point>,
}

/// Means over some ticks of the time series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Steady {
    /// Ticks averaged.
    pub ticks: usize,
    /// Queries and Puts per second, wall clock (ideal: times `nodes`).
    pub ops_per_s: f64,
    /// Queries and Puts per second of modelled time (ideal: times `nodes`).
    pub modelled_ops_per_s: f64,
    /// Share of Gets that needed a remote operation.
    pub remote_share: f64,
    /// The cache lease in force, seconds.
    pub cache_lease_s: f64,
}

impl Steady {
    fn of(points: &[Point]) -> Steady {
        #[allow(clippy::cast_precision_loss)]
        let n = points.len().max(1) as f64;
        let mean = |f: fn(&Point) -> f64| points.iter().map(f).sum::<f64>() / n;
        Steady {
            ticks: points.len(),
            ops_per_s: mean(|p| p.ops_per_s),
            modelled_ops_per_s: mean(|p| p.modelled_ops_per_s),
            remote_share: mean(|p| p.remote_share),
            cache_lease_s: mean(|p| p.cache_lease_s),
        }
    }
}

/// The job's report from its nodes' reports (rank order), for a run of
/// `config` asked for on `nodes` nodes over a graph of `vertices`.
pub(crate) fn join(reports: &[NodeReport], config: &Config, nodes: u32, vertices: u32) -> Report {
    let scale = if config.policy == Policy::Ideal {
        f64::from(nodes)
    } else {
        1.0
    };
    let mut tally = Tally::default();
    let (mut latency, mut modelled) = (Histogram::default(), Histogram::default());
    let mut counts = StoreCounts::default();
    let (mut queries, mut puts, mut refused, mut paused_ns) = (0, 0, 0, 0);
    let mut modelled_ops_per_s = 0.0;
    let mut summary = RunSummary {
        threads: config.workers(),
        ..RunSummary::default()
    };
    for r in reports {
        tally.add(&r.tally);
        latency.merge(&r.latency);
        modelled.merge(&r.modelled_latency);
        queries += r.queries;
        puts += r.puts;
        refused += r.refused;
        modelled_ops_per_s += r.modelled_ops_per_s;
        counts.migrations += r.counts.migrations;
        counts.words_moved += r.counts.words_moved;
        counts.migration_ops += r.counts.migration_ops;
        counts.migration_retries += r.counts.migration_retries;
        counts.forwarded_puts += r.counts.forwarded_puts;
        counts.shards_moved += r.counts.shards_moved;
        paused_ns = paused_ns.max(r.paused_ns);
        summary.load_ns = summary.load_ns.max(r.load_ns);
        summary.compute_ns = summary.compute_ns.max(r.run_ns);
        summary.peak_mem_bytes += r.region_bytes;
    }
    summary.wall_ns = summary.load_ns + summary.compute_ns;
    let ratio = |a: u64, b: u64| {
        #[allow(clippy::cast_precision_loss)]
        if b == 0 {
            0.0
        } else {
            a as f64 / b as f64
        }
    };
    // Ideal's one node stands for all of them, in its series too.
    let series: Vec<Point> = reports
        .first()
        .map(|r| {
            r.series
                .iter()
                .map(|p| Point {
                    ops_per_s: p.ops_per_s * scale,
                    modelled_ops_per_s: p.modelled_ops_per_s * scale,
                    ..p.clone()
                })
                .collect()
        })
        .unwrap_or_default();
    let last = usize::try_from(config.ticks_per_interval())
        .unwrap_or(usize::MAX)
        .min(series.len());
    #[allow(clippy::cast_precision_loss)]
    let ops_per_s = (queries + puts) as f64 * 1e9 / summary.compute_ns.max(1) as f64 * scale;
    Report {
        policy: config.policy,
        plan: config.store.plan,
        nodes,
        queries,
        puts,
        ops_per_s,
        modelled_ops_per_s: modelled_ops_per_s * scale,
        remote_share: ratio(tally.remote_gets, tally.gets),
        remote_value_share: ratio(tally.remote_values, tally.gets),
        cache_hit_rate: ratio(tally.cache_hits, tally.cache_hits + tally.cache_misses),
        keys_moved: counts.migrations,
        keys_moved_share: ratio(counts.migrations, u64::from(vertices)),
        bytes_moved: counts.words_moved * 8,
        one_sided_ops_per_migration: ratio(counts.migration_ops, counts.migrations),
        shards_moved: counts.shards_moved,
        paused_ns,
        migration_retries: counts.migration_retries,
        migrations_refused: refused,
        contended: reports.first().map_or(0, |r| r.contended),
        shared_share: reports.first().map_or(0.0, |r| r.shared_share),
        mostly_remote_share: ratio(
            reports.first().map_or(0, |r| r.mostly_remote),
            u64::from(vertices),
        ),
        forwarded_puts: counts.forwarded_puts,
        read_retries: tally.retries,
        stale_reads: tally.stale_reads,
        latency: Latency::of(&latency),
        modelled_latency: Latency::of(&modelled),
        last_interval: Steady::of(&series[series.len() - last..]),
        series,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ideal runs on one node and stands for `nodes` of them: its rates,
    /// in the summary, the last interval and every point of the series,
    /// are that node's times `nodes`; another policy's are as measured.
    #[test]
    fn ideal_scales_its_rates_everywhere_and_no_other_policy_does() {
        let point = |ops| Point {
            t_s: 1.0,
            ops_per_s: ops,
            modelled_ops_per_s: 2.0 * ops,
            remote_share: 0.25,
            ..Point::default()
        };
        let node = NodeReport {
            run_ns: 1_000_000_000,
            queries: 90,
            puts: 10,
            modelled_ops_per_s: 200.0,
            series: vec![point(100.0), point(300.0)],
            ..NodeReport::default()
        };
        for (policy, scale) in [(Policy::Ideal, 8.0), (Policy::SplitCache, 1.0)] {
            let config = Config {
                policy,
                ..Config::default()
            };
            let report = join(std::slice::from_ref(&node), &config, 8, 1000);
            assert_eq!(report.ops_per_s, 100.0 * scale, "{policy:?}");
            assert_eq!(report.modelled_ops_per_s, 200.0 * scale, "{policy:?}");
            let series: Vec<(f64, f64, f64)> = report
                .series
                .iter()
                .map(|p| (p.ops_per_s, p.modelled_ops_per_s, p.remote_share))
                .collect();
            assert_eq!(
                series,
                [
                    (100.0 * scale, 200.0 * scale, 0.25),
                    (300.0 * scale, 600.0 * scale, 0.25)
                ],
                "{policy:?}"
            );
            assert_eq!(report.last_interval.ops_per_s, 200.0 * scale, "{policy:?}");
            assert_eq!(report.last_interval.remote_share, 0.25, "{policy:?}");
        }
    }
}
