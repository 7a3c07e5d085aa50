//! The benchmark as a job ([`quiver_kv::run`]): policies compared on one
//! small graph, and a run its caller stops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use quiver_kv::{Config, Mix, Policy};
use quiver_run::{NoProgress, Progress};
use quiver_verbs::job::{Fabric, Job, Nodes};

fn graph_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = dir.path().join("karate.qcsr");
    quiver_csr::write_graph(&quiver_csr::testing::karate(true), &path).unwrap();
    path
}

/// A sparse random symmetric graph of 2,000 vertices (6 edges drawn from
/// each): few neighbourhoods overlap, unlike karate's, so reads are rarely
/// shared between nodes and migration can make almost all of them local.
fn sparse_file(dir: &tempfile::TempDir) -> std::path::PathBuf {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
    let mut edges = Vec::new();
    for s in 0..SPARSE {
        for _ in 0..6 {
            let t = rng.random_range(0..SPARSE);
            if t != s {
                edges.push((s, t, 1.0));
                edges.push((t, s, 1.0));
            }
        }
    }
    let graph = quiver_csr::Graph::from_edges(SPARSE, &edges, false, true).unwrap();
    let path = dir.path().join("sparse.qcsr");
    quiver_csr::write_graph(&graph, &path).unwrap();
    path
}

const SPARSE: u32 = 2_000;

fn run(path: &std::path::Path, config: &Config, nodes: u32) -> quiver_kv::Report {
    let graph = quiver_csr::Graph::open(path).unwrap();
    assert_eq!(graph.num_vertices(), SPARSE);
    let job = Job::new(Fabric::Loopback { cost: None }, Nodes::Local(nodes));
    quiver_kv::run(&graph, &job, config, &NoProgress)
        .unwrap()
        .expect("a local job reports")
}

/// A 1.2 s run on the sparse graph in 200 ms ticks and 400 ms intervals,
/// 16 hot starts and 4 neighbours a hop, short leases.
fn sparse_config() -> Config {
    Config {
        duration: Duration::from_millis(1_200),
        tick: Duration::from_millis(200),
        interval: Duration::from_millis(400),
        scope: 16,
        neighbours: 4,
        min_degree: 4,
        report_rate: Some(1),
        instant_rate: Some(10),
        mix: Mix { queries: 99 },
        store: quiver_kv::StoreConfig {
            cache_lease: Duration::from_millis(50),
            reclaim_lease: Duration::from_millis(100),
            ..quiver_kv::StoreConfig::default()
        },
        ..Config::default()
    }
}

#[test]
fn migration_makes_reads_local_and_orig_stays_remote() {
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(&dir);
    let config = sparse_config();
    let orig = run(
        &path,
        &Config {
            policy: Policy::Orig,
            ..config.clone()
        },
        4,
    );
    let split = run(&path, &config, 4);
    let shard = run(
        &path,
        &Config {
            policy: Policy::Shard,
            ..config.clone()
        },
        4,
    );
    let ideal = run(
        &path,
        &Config {
            policy: Policy::Ideal,
            ..config.clone()
        },
        4,
    );
    for report in [&orig, &split, &shard, &ideal] {
        assert!(report.queries > 0 && report.puts > 0, "{report:?}");
        assert_eq!(report.series.len(), 6);
    }
    // Random placement on 4 nodes: a query's start is local, each of its
    // 4 neighbours remote 3/4 of the time, so about 3/5 of Gets are remote;
    // how the few hot starts' neighbours fall makes it vary (0.50 seen).
    assert!(orig.remote_share > 0.3, "orig {}", orig.remote_share);
    assert_eq!(orig.keys_moved, 0);
    assert_eq!(ideal.remote_share, 0.0);
    assert!(split.keys_moved > 0);
    assert!(split.one_sided_ops_per_migration <= 5.0);
    // The series: each tick's own percentiles, moves and hit rate (a tick
    // reads the counters while migrations go on, so costs are checked on
    // the run's totals, which cannot tear).
    for p in split.series.iter().chain(&orig.series) {
        assert!(p.p50_ns <= p.p99_ns && p.p99_ns <= p.p999_ns, "{p:?}");
        // Every tick ran queries, whose hops are timed one Get at a time.
        assert!(p.get_p999_ns > 0, "{p:?}");
        assert_eq!(
            p.one_sided_per_migration.is_some(),
            p.migrations > 0,
            "{p:?}"
        );
        assert!(
            p.cache_hit_rate.is_none_or(|r| (0.0..=1.0).contains(&r)),
            "{p:?}"
        );
    }
    let ticked: u64 = split.series.iter().map(|p| p.migrations).sum();
    assert!(
        ticked > 0 && ticked <= split.keys_moved,
        "{ticked} of {}",
        split.keys_moved
    );
    let bytes: u64 = split.series.iter().map(|p| p.bytes_moved).sum();
    assert!(
        bytes > 0 && bytes <= split.bytes_moved,
        "{bytes} of {}",
        split.bytes_moved
    );
    assert!(orig
        .series
        .iter()
        .all(|p| p.migrations == 0 && p.bytes_moved == 0));
    let last = &split.last_interval;
    assert!(
        last.remote_share < orig.remote_share / 2.0,
        "after migration {} of Gets are remote (orig {})",
        last.remote_share,
        orig.remote_share
    );
    assert!(split.modelled_ops_per_s > orig.modelled_ops_per_s);
    // Shards move at the interval ends (at 0.4 and 0.8 s), keys and values
    // together, to the node that read them most: fewer Gets stay remote.
    assert!(shard.shards_moved > 0 && shard.keys_moved > 0, "{shard:?}");
    assert!(shard.paused_ns > 0);
    assert!(
        shard.last_interval.remote_share < orig.remote_share,
        "after shard moves {} of Gets are remote (orig {})",
        shard.last_interval.remote_share,
        orig.remote_share
    );
}

/// The policies and the mix the test above does not run: `cache` keeps
/// locations and moves nothing, `split` moves values and caches no
/// location, and the 50/50 mix puts as often as it queries.
#[test]
fn cache_alone_split_alone_and_the_update_heavy_mix_do_what_they_say() {
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(&dir);
    let with = |policy, queries| {
        let config = Config {
            policy,
            mix: Mix { queries },
            ..sparse_config()
        };
        run(&path, &config, 4)
    };
    let cache = with(Policy::Cache, 99);
    assert_eq!(cache.keys_moved, 0, "{cache:?}");
    assert!(cache.cache_hit_rate > 0.5, "{cache:?}");
    let split = with(Policy::Split, 99);
    assert!(split.keys_moved > 0, "{split:?}");
    assert_eq!(split.cache_hit_rate, 0.0, "{split:?}");
    assert!(split.one_sided_ops_per_migration <= 5.0, "{split:?}");
    let half = with(Policy::SplitCache, 50);
    #[allow(clippy::cast_precision_loss)]
    let put_share = half.puts as f64 / (half.queries + half.puts) as f64;
    assert!((0.4..0.6).contains(&put_share), "{half:?}");
}

#[test]
fn the_deferred_plan_moves_values_once_their_homes_counted_to_an_interval_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(&dir);
    let sparse = sparse_config();
    let config = Config {
        duration: Duration::from_millis(1_600),
        store: quiver_kv::StoreConfig {
            plan: quiver_kv::Plan::Deferred,
            ..sparse.store.clone()
        },
        ..sparse
    };
    let deferred = run(&path, &config, 4);
    assert_eq!(
        deferred.plan,
        quiver_kv::Plan::Deferred,
        "the report names its plan"
    );
    assert_eq!(deferred.series.len(), 8);
    // Candidates come from the first tick's reports at the earliest; their
    // homes count until the interval ends at tick 2 (0.4 s), when they are
    // decided, so the first moves land in tick 3 (the tracked plan moves
    // them at once, in tick 2).
    let early: u64 = deferred.series[..2].iter().map(|p| p.migrations).sum();
    assert_eq!(early, 0, "{:?}", deferred.series);
    assert!(deferred.keys_moved > 0, "{deferred:?}");
    assert!(deferred.one_sided_ops_per_migration <= 5.0);
}

/// Before the first interval ends, only the monitor's instant reports can
/// move values: a pair read past `instant_rate` times a second is reported
/// at the tick's end and moves; with a rate no pair reaches, nothing does.
#[test]
fn a_pair_past_the_instant_rate_moves_before_any_interval_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(&dir);
    let with = |instant_rate| {
        let config = Config {
            // Longer than the run: no interval ends in it.
            interval: Duration::from_secs(2),
            instant_rate,
            ..sparse_config()
        };
        run(&path, &config, 4)
    };
    let instant = with(Some(10));
    assert!(instant.keys_moved > 0, "{instant:?}");
    let derived = with(None);
    assert!(derived.keys_moved > 0, "{derived:?}");
    let never = with(Some(1_000_000));
    assert_eq!(never.keys_moved, 0, "{never:?}");
}

#[test]
fn nonsense_parameters_are_named() {
    let bad = [
        Config {
            scope: 0,
            ..Config::default()
        },
        Config {
            zipf: -1.0,
            ..Config::default()
        },
        Config {
            margin: Some(0.5),
            ..Config::default()
        },
        Config {
            interval: Duration::from_millis(1500),
            ..Config::default()
        },
    ];
    for (config, name) in bad.iter().zip(["scope", "zipf", "margin", "interval"]) {
        let err = config.validate().unwrap_err();
        assert!(
            quiver_run::chain(&err).contains(name),
            "{}",
            quiver_run::chain(&err)
        );
    }
    // 0 threads is one a core, as in every engine.
    let all_cores = Config {
        threads: 0,
        ..Config::default()
    };
    assert!(all_cores.validate().is_ok());
    assert_eq!(all_cores.workers(), quiver_run::worker_threads(0));
    assert!("95/5".parse::<Mix>().is_ok());
    assert!("95/6".parse::<Mix>().is_err());
    assert!("nope"
        .parse::<Policy>()
        .unwrap_err()
        .contains("split+cache"));
}

#[test]
fn migration_speed_moves_values_with_five_operations_and_no_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = graph_file(&dir);
    let config = quiver_kv::speed::SpeedJob {
        graph: path,
        config: quiver_kv::speed::SpeedConfig {
            values: 10,
            max_bytes: 4096,
            batch: 4,
            store: quiver_kv::StoreConfig::default(),
        },
    };
    let job = Job::new(Fabric::Loopback { cost: None }, Nodes::Local(2));
    let reports = job
        .run::<quiver_kv::speed::SpeedTask>(&config)
        .unwrap()
        .unwrap();
    let speed = &reports[1];
    assert_eq!(speed.values, 10);
    // A cold cache: every migration looks its key up.
    assert_eq!(speed.one_sided, 50);
    assert_eq!(speed.messages, 0);
    assert!(speed.values_per_s > 0.0 && speed.modelled_values_per_s > 0.0);
    assert_eq!(reports[0].values, 0, "node 0's CPU migrates nothing");
    let one = Job::new(Fabric::Loopback { cost: None }, Nodes::Local(1));
    let err = one.run::<quiver_kv::speed::SpeedTask>(&config).unwrap_err();
    assert!(
        quiver_run::chain(&err).contains("at least 2"),
        "{}",
        quiver_run::chain(&err)
    );
}

/// Hears the ticks of a run and asks it to stop once `after` have passed.
struct StopAfter {
    ticks: AtomicU64,
    after: u64,
}

impl Progress for StopAfter {
    fn advance(&self, delta: u64) {
        self.ticks.fetch_add(delta, Ordering::Relaxed);
    }

    fn cancelled(&self) -> bool {
        self.ticks.load(Ordering::Relaxed) >= self.after
    }
}

/// A run whose caller asks it to stop ends with `Cancelled` at the nodes'
/// next tick, long before its minute is up; one asked before it starts
/// never starts.
#[test]
fn a_run_its_caller_stops_ends_at_the_next_tick_with_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let path = sparse_file(&dir);
    let graph = quiver_csr::Graph::open(&path).unwrap();
    let config = Config {
        duration: Duration::from_secs(60),
        tick: Duration::from_millis(100),
        interval: Duration::from_millis(200),
        ..sparse_config()
    };
    let job = Job::new(Fabric::Loopback { cost: None }, Nodes::Local(3));
    let progress = StopAfter {
        ticks: AtomicU64::new(0),
        after: 3,
    };
    let started = Instant::now();
    let err = quiver_kv::run(&graph, &job, &config, &progress).unwrap_err();
    assert!(matches!(err, quiver_kv::Error::Cancelled(_)), "{err}");
    assert!(
        started.elapsed() < config.duration / 2,
        "{:?}",
        started.elapsed()
    );
    // Every tick the caller heard was one the nodes ran, and it heard
    // those it asked to stop after.
    let heard = progress.ticks.load(Ordering::Relaxed);
    assert!((3..600).contains(&heard), "{heard} ticks");
    let at_once = StopAfter {
        ticks: AtomicU64::new(0),
        after: 0,
    };
    let err = quiver_kv::run(&graph, &job, &config, &at_once).unwrap_err();
    assert!(matches!(err, quiver_kv::Error::Cancelled(_)), "{err}");
    assert_eq!(at_once.ticks.load(Ordering::Relaxed), 0);
}
