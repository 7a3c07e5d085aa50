//! quiver-verbs per fabric: 8-byte READ and CAS at depth 1, 4 KiB and
//! 64 KiB WRITEs at depth 1 and in posted batches of 32, from node 0 to
//! node 1 of a two-node job. Loopback nodes are threads; tcp nodes are
//! threads too, each with its own fabric (sockets, NIC threads), so the
//! wire path is the one separate processes use (`cargo xtask bench verbs`
//! runs real processes beside a TCP ping-pong).

use std::hint::black_box;
use std::sync::mpsc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use quiver_verbs::cluster::{Coordinator, Launch};
use quiver_verbs::{loopback, tcp, Node, NodeRank, Op, Output, Queue, RemoteRegion, WorkRequest};

/// Node 1 of the job serves until node 0 is done; node 0 is handed to `body`.
fn with_pair(nodes: Vec<Node>, body: impl FnOnce(&Node, RemoteRegion)) {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let mut nodes = nodes.into_iter();
        let (first, second) = (
            nodes.next().expect("two nodes"),
            nodes.next().expect("two nodes"),
        );
        scope.spawn(move || {
            let region = second.register(64 << 10).expect("register");
            second.exchange(&region).expect("exchange");
            done_rx.recv().ok();
            second.barrier().expect("final barrier");
        });
        let region = first.register(64 << 10).expect("register");
        let target = first.exchange(&region).expect("exchange")[1];
        body(&first, target);
        done_tx.send(()).ok();
        first.barrier().expect("final barrier");
    });
}

fn tcp_pair() -> Vec<Node> {
    let coordinator =
        Coordinator::start("127.0.0.1:0", 2, Duration::from_secs(30)).expect("coordinator");
    let addr = coordinator.addr().to_string();
    let nodes = std::thread::scope(|scope| {
        let joins: Vec<_> = (0..2)
            .map(|rank| {
                let addr = addr.clone();
                scope.spawn(move || {
                    tcp::join(&Launch {
                        rank: NodeRank(rank),
                        size: 2,
                        coordinator: addr,
                        hosts_coordinator: false,
                        timeout: Duration::from_secs(30),
                    })
                    .expect("join")
                })
            })
            .collect();
        joins
            .into_iter()
            .map(|j| j.join().expect("join thread"))
            .collect()
    });
    // The coordinator thread keeps serving the job after this handle is dropped.
    drop(coordinator);
    nodes
}

/// Posts 32 WRITEs of `bytes` at once and waits for them, reusing the
/// buffers the completions hand back (so the allocator is not measured).
fn write_batch(queue: &mut Queue, target: RemoteRegion, bytes: usize, spare: &mut Vec<Vec<u8>>) {
    let ops = (0..32).map(|i| {
        let data = spare.pop().unwrap_or_else(|| vec![1; bytes]);
        WorkRequest::new(
            i,
            Op::Write {
                remote: target,
                offset: 0,
                data,
            },
        )
    });
    queue.post(ops.collect::<Vec<_>>()).expect("post");
    let mut done = Vec::with_capacity(32);
    queue.wait(&mut done, 32, 32).expect("completions");
    for completion in done {
        match completion.result {
            Ok(Output::Written(buffer)) => spare.push(buffer),
            other => panic!("a WRITE completed with {other:?}"),
        }
    }
}

fn fabric(c: &mut Criterion, name: &str, nodes: Vec<Node>) {
    with_pair(nodes, |node, target| {
        let mut group = c.benchmark_group(format!("verbs/{name}"));
        let mut queue = node.queue();
        group.throughput(Throughput::Elements(1));
        group.bench_function("read 8 B depth 1", |b| {
            b.iter(|| black_box(queue.read(target, 0, 8).expect("read")))
        });
        group.bench_function("cas 8 B depth 1", |b| {
            b.iter(|| black_box(queue.compare_swap(target, 8, 0, 0).expect("cas")))
        });
        for bytes in [4usize << 10, 64 << 10] {
            group.throughput(Throughput::Bytes(bytes as u64));
            group.bench_function(format!("write {} KiB depth 1", bytes >> 10), |b| {
                b.iter(|| queue.write(target, 0, &vec![1; bytes]).expect("write"));
            });
            group.throughput(Throughput::Bytes(32 * bytes as u64));
            group.bench_function(format!("write {} KiB batch of 32", bytes >> 10), |b| {
                let mut spare = Vec::new();
                b.iter(|| write_batch(&mut queue, target, bytes, &mut spare));
            });
        }
        group.finish();
    });
}

fn verbs(c: &mut Criterion) {
    fabric(
        c,
        "loopback",
        loopback::cluster(&loopback::Config::new(2)).expect("loopback job"),
    );
    fabric(c, "tcp", tcp_pair());
}

criterion_group!(benches, verbs);
criterion_main!(benches);
