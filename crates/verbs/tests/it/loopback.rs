use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use quiver_verbs::loopback::{self, Config};
use quiver_verbs::{conformance, CostModel, Error, NodeRank, Op, Verb, WorkRequest};

fn assert_conforms(config: &Config) {
    let outcomes = loopback::run(config, |node| conformance::run(&node)).unwrap();
    let mut failures = Vec::new();
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        let outcome = outcome.unwrap_or_else(|err| panic!("node {rank}: {err}"));
        assert_eq!(outcome.len(), conformance::CHECKS.len());
        failures.extend(
            outcome
                .iter()
                .filter(|check| !check.passed)
                .map(|check| format!("node {rank}: {check}")),
        );
    }
    assert!(
        failures.is_empty(),
        "{} nodes:\n{}",
        config.nodes,
        failures.join("\n")
    );
}

#[test]
fn conformance_one_to_four_nodes() {
    for nodes in 1..=4 {
        assert_conforms(&Config::new(nodes));
    }
}

#[test]
fn conformance_with_cost_model() {
    assert_conforms(&Config {
        cost: Some(CostModel::default()),
        ..Config::new(3)
    });
}

/// A 64-byte READ racing WRITEs that flip the whole range between all-0 and
/// all-1 words sees a mix at least once: multi-word READs are not atomic.
#[test]
fn concurrent_write_tears_a_read() {
    let torn = loopback::run(&Config::new(2), |node| {
        let region = node.register(64).unwrap();
        let remotes = node.exchange(&region).unwrap();
        let stop = AtomicBool::new(false);
        let mut torn = false;
        if node.rank() == NodeRank(0) {
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    let mut queue = node.queue();
                    let mut flip = 0u8;
                    while !stop.load(Ordering::Relaxed) {
                        flip ^= 0xff;
                        queue.write(remotes[1], 0, &[flip; 64]).unwrap();
                    }
                });
                let mut queue = node.queue();
                let deadline = Instant::now() + Duration::from_secs(20);
                while !torn && Instant::now() < deadline {
                    let data = queue.read(remotes[1], 0, 64).unwrap();
                    torn = data.iter().any(|&b| b != data[0]);
                    // Every word is whole: each 8-byte word is all 0 or all 1.
                    for word in data.chunks(8) {
                        assert!(
                            word.iter().all(|&b| b == word[0]),
                            "an 8-byte word was torn: {word:?}"
                        );
                    }
                }
                stop.store(true, Ordering::Relaxed);
            });
        }
        node.barrier().unwrap();
        torn
    })
    .unwrap();
    assert!(torn[0], "no torn READ in 20 s of racing WRITEs");
}

/// With the cost model, 32 dependent READs cost 32 latencies of virtual
/// time, while 32 posted together cost about one; the counters carry the
/// same modelled time.
#[test]
fn cost_model_clock() {
    let model = CostModel::default();
    let config = Config {
        cost: Some(model),
        ..Config::new(2)
    };
    let clocks = loopback::run(&config, |node| {
        let region = node.register(64).unwrap();
        let remote = node.exchange(&region).unwrap()[1 - node.rank().index()];
        let mut queue = node.queue();
        let start = node.clock_ns();
        for _ in 0..32 {
            queue.read(remote, 0, 8).unwrap();
        }
        let serial = node.clock_ns() - start;
        queue
            .post((0..32).map(|i| {
                WorkRequest::new(
                    i,
                    Op::Read {
                        remote,
                        offset: 0,
                        len: 8,
                    },
                )
            }))
            .unwrap();
        let mut out = Vec::new();
        queue.wait(&mut out, 32, 32).unwrap();
        let batched = node.clock_ns() - start - serial;
        let modelled = node.counters().total(Verb::Read).modelled_ns;
        node.barrier().unwrap();
        (serial, batched, modelled)
    })
    .unwrap();
    let one = u64::try_from(model.latency(Verb::Read, 8).as_nanos()).unwrap();
    for (serial, batched, modelled) in clocks {
        assert_eq!(serial, 32 * one);
        assert_eq!(batched, one + 31 * model.gap_ns);
        assert!(
            modelled > serial,
            "counted modelled time {modelled} covers both phases"
        );
    }
}

/// A node that leaves (its thread returns) makes the others' collectives
/// fail promptly with an error naming it, and remote operations on it
/// complete with PeerLost.
#[test]
fn a_departed_node_is_named() {
    let config = Config {
        timeout: Duration::from_secs(10),
        ..Config::new(3)
    };
    let started = Instant::now();
    let results = loopback::run(&config, |node| {
        let region = node.register(8).unwrap();
        let remotes = node.exchange(&region).unwrap();
        if node.rank() == NodeRank(2) {
            return None;
        }
        let err = node.barrier().unwrap_err();
        let mut queue = node.queue();
        let lost = queue.read(remotes[2], 0, 8).unwrap_err();
        Some((err.to_string(), lost.to_string()))
    })
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "departure noticed without waiting for the timeout"
    );
    for (barrier, read) in results.into_iter().flatten() {
        assert!(barrier.contains("node 2"), "{barrier}");
        assert!(read.contains("read failed"), "{read}");
    }
}

/// A node that never reaches a collective is named after the timeout.
#[test]
fn a_missing_node_times_out() {
    let config = Config {
        timeout: Duration::from_millis(300),
        ..Config::new(2)
    };
    let results = loopback::run(&config, |node| {
        if node.rank() == NodeRank(1) {
            std::thread::sleep(Duration::from_secs(1));
            return None;
        }
        Some(node.barrier().unwrap_err())
    })
    .unwrap();
    match &results[0] {
        Some(Error::NodeFailed { node, reason }) => {
            assert_eq!(*node, NodeRank(1));
            assert!(reason.contains("300ms"), "{reason}");
        }
        other => panic!("expected NodeFailed for node 1, got {other:?}"),
    }
}

/// A node whose collective failed does not leave a stale contribution
/// behind: trying again fails again instead of completing without the
/// missing node.
#[test]
fn a_failed_collective_stays_failed() {
    let config = Config {
        timeout: Duration::from_millis(200),
        ..Config::new(2)
    };
    let results = loopback::run(&config, |node| {
        if node.rank() == NodeRank(1) {
            std::thread::sleep(Duration::from_millis(600));
            return None;
        }
        let first = node.barrier().unwrap_err();
        let second = node.barrier().unwrap_err();
        Some((first.to_string(), second.to_string()))
    })
    .unwrap();
    let (first, second) = results[0].clone().unwrap();
    assert!(first.contains("node 1 failed"), "{first}");
    assert!(second.contains("node 1 failed"), "{second}");
}

#[test]
fn bad_arguments_are_refused() {
    let nodes = loopback::cluster(&Config::new(2)).unwrap();
    assert!(matches!(
        nodes[0].register(0),
        Err(Error::InvalidArgument(_))
    ));
    let region = nodes[1].register(8).unwrap();
    let mut queue = nodes[0].queue();
    let mut remote = region.remote();
    remote.node = NodeRank(5);
    let err = queue
        .post([WorkRequest::new(
            1,
            Op::Read {
                remote,
                offset: 0,
                len: 8,
            },
        )])
        .unwrap_err();
    assert!(
        quiver_run::chain(&err).contains("targets node 5, but the job has 2 nodes"),
        "{err}"
    );
    assert_eq!(queue.outstanding(), 0);
    assert!(loopback::cluster(&Config::new(0)).is_err());
    let err = queue.wait(&mut Vec::new(), 2, 1).unwrap_err();
    assert!(
        quiver_run::chain(&err).contains("at least 2 but at most 1"),
        "{err}"
    );
}
