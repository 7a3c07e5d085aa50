//! quiver-meta against a model: clusters of real gRPC servers on
//! 127.0.0.1, each with its own RocksDB, checked against a `BTreeMap` of
//! every version written.

mod fuzz;
mod model;
mod placement;
mod recovery;

use std::collections::BTreeMap;

use proptest::prelude::*;
use quiver_meta::server::{self, Prefetch, Running, ServerConfig};
use quiver_meta::{
    Client, Engine, Filter, GTravel, Membership, Partitioner, Travel, TravelOptions, Write,
};

/// A cluster on 127.0.0.1 with its data in a temporary directory.
struct Cluster {
    dir: tempfile::TempDir,
    configs: Vec<ServerConfig>,
    servers: Vec<Option<Running>>,
    client: Client,
}

impl Cluster {
    async fn start(n: usize, partitioner: Partitioner, vnodes: u32, threshold: u32) -> Cluster {
        // Prefetching on whatever the host's cores, so traversals test it.
        let base = ServerConfig {
            partitioner,
            vnodes,
            threshold,
            prefetch: Prefetch::On,
            ..ServerConfig::default()
        };
        Cluster::start_with(n, base).await
    }

    /// `n` servers with `base`'s settings.
    async fn start_with(n: usize, base: ServerConfig) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let mut listeners = Vec::new();
        for _ in 0..n {
            listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let addrs: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().unwrap().to_string())
            .collect();
        let cluster = Membership::fresh(&addrs, 0);
        let mut configs = Vec::new();
        let mut servers = Vec::new();
        for (index, listener) in listeners.into_iter().enumerate() {
            let config = ServerConfig {
                cluster: cluster.clone(),
                index,
                data: dir.path().join(format!("s{index}")),
                ..base.clone()
            };
            servers.push(Some(server::start(config.clone(), listener).await.unwrap()));
            configs.push(config);
        }
        let client = Client::connect(&cluster).await.unwrap();
        Cluster {
            dir,
            configs,
            servers,
            client,
        }
    }

    /// Stops server `i` (the crash of a server process is the driver's
    /// test, which kills one with SIGKILL).
    async fn stop_server(&mut self, i: usize) {
        self.servers[i].take().unwrap().shutdown().await.unwrap();
    }

    /// Starts server `i` again on its address and data.
    async fn restart(&mut self, i: usize) {
        for _ in 0..100 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let Ok(listener) =
                tokio::net::TcpListener::bind(&self.configs[i].cluster.servers[i].addr).await
            else {
                continue;
            };
            match server::start(self.configs[i].clone(), listener).await {
                Ok(running) => {
                    self.servers[i] = Some(running);
                    return;
                }
                Err(e) => eprintln!("restart: {}", quiver_run::chain(&e)),
            }
        }
        panic!("server {i} did not restart");
    }

    /// Stops every server and starts it again on a new port, on its data,
    /// with the cluster file's addresses changed and nothing else; the
    /// client reconnects.
    async fn move_to_new_ports(&mut self) {
        for i in 0..self.servers.len() {
            self.stop_server(i).await;
        }
        let mut listeners = Vec::new();
        for _ in 0..self.servers.len() {
            listeners.push(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap());
        }
        let addrs: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().unwrap().to_string())
            .collect();
        assert!(addrs.iter().all(|a| !self.client.servers().contains(a)));
        let moved = self.configs[0].cluster.moved_to(&addrs);
        for (i, listener) in listeners.into_iter().enumerate() {
            self.configs[i].cluster = moved.clone();
            self.servers[i] = Some(
                server::start(self.configs[i].clone(), listener)
                    .await
                    .unwrap(),
            );
        }
        self.client = Client::connect(&moved).await.unwrap();
    }

    async fn stop(self) {
        for s in self.servers.into_iter().flatten() {
            s.shutdown().await.unwrap();
        }
        drop(self.dir);
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn bytes(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// A vertex put with no attributes.
fn vertex(id: &str, vtype: &str) -> Write {
    Write::Vertex {
        id: bytes(id),
        vtype: vtype.into(),
        attrs: BTreeMap::new(),
    }
}

/// An edge without properties.
fn edge(src: &str, etype: &str, dst: &str) -> Write {
    Write::Edge {
        src: bytes(src),
        etype: etype.into(),
        dst: bytes(dst),
        props: BTreeMap::new(),
    }
}

/// The first `n` of the ids `{prefix}0`, `{prefix}1`, ... whose home is
/// `server` (a test that needs a vertex on a given server picks it this
/// way rather than knowing the ring).
fn homed_on(client: &Client, prefix: &str, server: usize, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|id| client.placement().home(id.as_bytes()) == server)
        .take(n)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Random writes, deletes and splits on a 3-server cluster, every
    /// partitioner: reads as of every write's time, scans, reverse edges
    /// and traversals equal the model's (digest invariants 5–8, 14, 20,
    /// 21).
    #[test]
    fn the_cluster_agrees_with_a_model(ops in prop::collection::vec(model::op(), 1..60), p in 0usize..4, threshold in 1u32..4) {
        let partitioner = Partitioner::ALL[p];
        runtime().block_on(async {
            let cluster = Cluster::start(3, partitioner, 8, threshold).await;
            let mut m = model::Model::default();
            let mut times = Vec::new();
            for op in &ops {
                let write = op.write();
                let done = cluster.client.write(std::slice::from_ref(&write)).await.unwrap();
                m.apply(&write, done.ts);
                times.push(done.ts);
            }
            times.push(cluster.client.session() + 1);
            for &t in &times {
                m.check_reads(&cluster.client, t).await;
            }
            let now = *times.last().unwrap();
            let mid = times[times.len() / 2];
            for travel in model::travels() {
                for (engine, prefetch) in [(Engine::Sync, false), (Engine::Sync, true), (Engine::Async, false)] {
                    for t in [now, mid] {
                        let got = cluster.client.travel(&travel, TravelOptions { as_of: Some(t), prefetch, engine }).await.unwrap();
                        let want = m.travel(&travel, t);
                        assert_eq!(got.marked, want.0, "{travel:?} with {partitioner:?}, {engine:?}, prefetch {prefetch}, as of {t}");
                        assert_eq!(got.paths, want.1, "{travel:?} paths, {engine:?}");
                    }
                }
            }
            cluster.stop().await;
        });
    }
}

/// Writers at once while partitions split: 16 clients write edges from
/// three jobs to forty files in small batches (the jobs' partitions split
/// under the writes, and so do the files' reverse-edge partitions under
/// the deliveries). Every edge and every reverse edge is stored once, on
/// the partition its tree names, whatever a split was doing when it came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_and_splits_lose_nothing() {
    for partitioner in [Partitioner::Dido, Partitioner::Giga] {
        let cluster = Cluster::start(4, partitioner, 16, 2).await;
        let c = &cluster.client;
        let jobs = (0..3).map(|j| vertex(&format!("job:{j}"), "job"));
        let files = (0..40).map(|f| vertex(&format!("/f{f}"), "file"));
        c.write(&jobs.chain(files).collect::<Vec<_>>())
            .await
            .unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for writer in 0..16 {
            let c = c.clone();
            tasks.spawn(async move {
                // Each writer's share of the 3 x 40 edges, 3 at a time.
                let mine: Vec<Write> = (0..120)
                    .filter(|e| e % 16 == writer)
                    .map(|e| Write::Edge {
                        src: bytes(&format!("job:{}", e % 3)),
                        etype: "write".into(),
                        dst: bytes(&format!("/f{}", e / 3)),
                        props: BTreeMap::from([("n".to_string(), bytes(&e.to_string()))]),
                    })
                    .collect();
                for batch in mine.chunks(3) {
                    c.write(batch).await.unwrap();
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.unwrap();
        }
        for j in 0..3 {
            let edges = c
                .scan_edges(format!("job:{j}").as_bytes(), Some("write"), None)
                .await
                .unwrap();
            let mut got: Vec<Vec<u8>> = edges.into_iter().map(|e| e.dst).collect();
            got.sort();
            let mut want: Vec<Vec<u8>> = (0..40).map(|f| bytes(&format!("/f{f}"))).collect();
            want.sort();
            assert_eq!(got, want, "job:{j} with {partitioner:?}");
        }
        for f in 0..40 {
            let back = c
                .scan_edges(format!("/f{f}").as_bytes(), Some("wasWrittenBy"), None)
                .await
                .unwrap();
            let got: Vec<Vec<u8>> = back.into_iter().map(|e| e.dst).collect();
            let want: Vec<Vec<u8>> = (0..3).map(|j| bytes(&format!("job:{j}"))).collect();
            assert_eq!(got, want, "/f{f} with {partitioner:?}");
        }
        let splits: u64 = c.stats().await.unwrap().iter().map(|s| s.splits).sum();
        assert!(splits > 3, "{partitioner:?} split {splits} times");
        cluster.stop().await;
    }
}

/// One write of 9,000 edges on one server: every reverse edge arrives (the
/// delivery is cut into requests of 8,192; the cut itself is the unit test
/// `a_large_delivery_is_cut_into_requests_in_order`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_delivery_arrives_whole() {
    let cluster = Cluster::start(1, Partitioner::EdgeCut, 16, 128).await;
    let c = &cluster.client;
    let edges: Vec<Write> = (0..9000)
        .map(|i| edge("job:big", "write", &format!("/f{i}")))
        .collect();
    c.write(&edges).await.unwrap();
    assert_eq!(
        c.scan_edges(b"job:big", None, None).await.unwrap().len(),
        9000
    );
    // Both sides of the split between requests, and every 250th.
    for i in (0..9000).step_by(250).chain([8191, 8192, 8999]) {
        let back = c
            .scan_edges(format!("/f{i}").as_bytes(), None, None)
            .await
            .unwrap();
        assert_eq!(back.len(), 1, "/f{i}");
    }
    cluster.stop().await;
}

/// DIDO with threshold 4 on 4 servers: a vertex with 200 edges spreads over
/// every server, each edge sits where its tree says, and splitting moved
/// edges toward their destinations (the paper's Fig. 6 claim).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_splits_toward_its_destinations() {
    let cluster = Cluster::start(4, Partitioner::Dido, 16, 4).await;
    let c = &cluster.client;
    let mut writes = vec![vertex("job:hub", "job")];
    writes.extend((0..200).map(|i| vertex(&format!("/f{i}"), "file")));
    c.write(&writes).await.unwrap();
    let mut splits = 0;
    for chunk in (0..200).collect::<Vec<_>>().chunks(10) {
        let edges: Vec<Write> = chunk
            .iter()
            .map(|i| edge("job:hub", "write", &format!("/f{i}")))
            .collect();
        splits += c.write(&edges).await.unwrap().splits;
    }
    assert!(splits > 0);
    let edges = c.scan_edges(b"job:hub", Some("write"), None).await.unwrap();
    assert_eq!(edges.len(), 200);
    // Every reverse edge exists, on the file's own partition.
    for i in 0..200 {
        let back = c
            .scan_edges(format!("/f{i}").as_bytes(), None, None)
            .await
            .unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(
            (back[0].etype.as_str(), back[0].dst.as_slice()),
            ("wasWrittenBy", &b"job:hub"[..])
        );
    }
    let stats = c.stats().await.unwrap();
    let moved: u64 = stats.iter().map(|s| s.edges_moved).sum();
    assert!(moved > 0, "{stats:?}");
    // A one-step traversal from the hub: most edges are now next to their
    // destination, so StatComm is well below the edge count.
    let t = c
        .travel(
            &GTravel::v(["job:hub"]).e("write"),
            TravelOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(t.vertices().len(), 200);
    let step = &t.steps[0];
    assert!(step.stat_comm < 100, "{step:?}");
    cluster.stop().await;
}

/// Placement follows server ids, not ports: a cluster whose every server
/// restarts on a new port answers every query exactly as before (scans
/// of every vertex's edges, provenance traversals as of now and of the
/// past, on both engines), and a data directory refuses to serve as
/// another cluster's server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_restarted_on_new_ports_answers_exactly_as_before() {
    let mut cluster = Cluster::start(3, Partitioner::Dido, 16, 4).await;
    let writes = quiver_meta::darshan::generate(600, 11);
    let half = writes.len() / 2;
    for chunk in writes[..half].chunks(64) {
        cluster.client.write(chunk).await.unwrap();
    }
    let middle = cluster.client.session();
    for chunk in writes[half..].chunks(64) {
        cluster.client.write(chunk).await.unwrap();
    }
    let sources: Vec<Vec<u8>> = writes
        .iter()
        .filter_map(|w| match w {
            Write::Vertex { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    let travels = [
        r#"v("uid:1000").e(run).v().e(contains).v().e(write).rtm().v().e(wasReadBy)"#,
        r#"v("uid:1001").e(run).v().e(contains).v().e(read).v()"#,
        r#"v("/proj/d0").e(has).v().e(wasReadBy).v()"#,
    ];
    let before = answers(&cluster.client, &sources, &travels, middle).await;
    assert!(
        before.iter().any(|a| a.len() > 100),
        "the queries find nothing"
    );
    cluster.move_to_new_ports().await;
    let after = answers(&cluster.client, &sources, &travels, middle).await;
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b, a);
    }
    // Server 0's data, offered to another cluster of the same shape.
    cluster.stop_server(0).await;
    let other = Membership::fresh(cluster.client.servers(), 99);
    let config = ServerConfig {
        cluster: other,
        ..cluster.configs[0].clone()
    };
    let err = server::open(config).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("belongs to server s0"), "{err}");
    cluster.stop().await;
}

/// Every answer the test of new ports compares: the edges of every source,
/// and each traversal as of now and `middle`, on both engines.
async fn answers(c: &Client, sources: &[Vec<u8>], travels: &[&str], middle: u64) -> Vec<String> {
    let mut out = Vec::new();
    for id in sources {
        out.push(format!("{:?}", c.scan_edges(id, None, None).await.unwrap()));
    }
    for text in travels {
        let travel = Travel::parse(text).unwrap();
        for (as_of, engine) in [
            (None, Engine::Sync),
            (Some(middle), Engine::Sync),
            (None, Engine::Async),
        ] {
            let options = TravelOptions {
                as_of,
                engine,
                ..TravelOptions::default()
            };
            let got = c.travel(&travel, options).await.unwrap();
            out.push(format!("{:?} {:?}", got.marked, got.paths));
        }
    }
    out
}

/// Every acknowledged write is there after a server restarts, and the
/// client gets a clear error, not a hang, while it is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_survive_a_restart_and_a_down_server_is_named() {
    let mut cluster = Cluster::start(2, Partitioner::Dido, 8, 3).await;
    let writes = quiver_meta::darshan::generate(300, 5);
    for chunk in writes.chunks(50) {
        cluster.client.write(chunk).await.unwrap();
    }
    let before = cluster.client.session();
    cluster.stop_server(1).await;
    let down = (0..400).map(|i| Write::Vertex {
        id: bytes(&format!("/probe{i}")),
        vtype: "file".into(),
        attrs: BTreeMap::new(),
    });
    let err = cluster
        .client
        .write(&down.collect::<Vec<_>>())
        .await
        .unwrap_err();
    assert!(err.is_unavailable(), "{}", quiver_run::chain(&err));
    assert!(
        err.to_string()
            .contains(&cluster.configs[1].cluster.servers[1].addr),
        "{err}"
    );
    cluster.restart(1).await;
    for w in &writes {
        match w {
            Write::Vertex { id, vtype, attrs } => {
                let got = cluster
                    .client
                    .read_vertex(id, Some(before))
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!((&got.vtype, &got.attrs), (vtype, attrs));
            }
            Write::Edge {
                src, etype, dst, ..
            } => {
                let edges = cluster
                    .client
                    .scan_edges(src, Some(etype), Some(before))
                    .await
                    .unwrap();
                assert!(
                    edges.iter().any(|e| &e.dst == dst),
                    "{:?} lost",
                    String::from_utf8_lossy(src)
                );
            }
            _ => unreachable!(),
        }
    }
    cluster.stop().await;
}

/// A traversal leaves no state behind when it ends, and one whose client
/// vanished (or a late batch of one) is dropped once idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traversal_state_is_dropped_when_ended_or_idle() {
    use quiver_meta::rpc;
    let base = ServerConfig {
        travel_idle: std::time::Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let cluster = Cluster::start_with(2, base).await;
    let c = &cluster.client;
    let writes = quiver_meta::darshan::generate(200, 3);
    c.write(&writes).await.unwrap();
    let open = || async {
        let stats = c.stats().await.unwrap();
        stats.iter().map(|s| s.travels).sum::<u64>()
    };
    let travel = GTravel::v([bytes("uid:1000")]).e("run").repeat(2);
    for engine in [Engine::Sync, Engine::Async] {
        let options = TravelOptions {
            engine,
            ..TravelOptions::default()
        };
        c.travel(&travel, options).await.unwrap();
        assert_eq!(open().await, 0, "{engine:?} left state behind");
    }
    // A client that dies after sending a frontier, and a batch of a
    // traversal that has ended.
    let mut raw = rpc::connect_lazy(c.membership()).unwrap().remove(0);
    let entry = rpc::Entry {
        id: bytes("uid:1000"),
        path: Vec::new(),
    };
    raw.frontier(rpc::FrontierRequest {
        travel: 7,
        step: 0,
        entries: vec![entry.clone()],
    })
    .await
    .unwrap();
    let last = rpc::StepSpec {
        vertex_filters: Vec::new(),
        hop: None,
        keep: true,
    };
    let flow = rpc::FlowRequest {
        travel: 8,
        plan: vec![last.clone()],
        entries: vec![entry.clone()],
        ..Default::default()
    };
    raw.flow(flow.clone()).await.unwrap();
    assert_eq!(open().await, 2);
    // Plans a worker could not follow are refused: one whose last step
    // follows edges, and another plan for a traversal under way.
    let hop = rpc::Hop {
        etype: "run".into(),
        edge_filters: Vec::new(),
    };
    let onward = rpc::StepSpec {
        hop: Some(hop),
        ..last.clone()
    };
    for (travel, plan) in [(9, vec![onward.clone()]), (8, vec![onward, last])] {
        let bad = rpc::FlowRequest {
            travel,
            plan,
            ..flow.clone()
        };
        let err = raw.flow(bad).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
    }
    // A late batch of an ended traversal leaves nothing.
    raw.end_travel(rpc::EndTravelRequest { travel: 8 })
        .await
        .unwrap();
    raw.flow(flow).await.unwrap();
    assert_eq!(open().await, 1);
    // The upkeep runs once a second.
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    assert_eq!(open().await, 0);
    cluster.stop().await;
}

/// Prefetching (the paper's §4.6): a server that has finished a step reads
/// the next step's frontier while it waits at the barrier, and the next
/// step finds every one of those reads done. The wait is made long here
/// (a slow peer's step, in a real cluster), and longer again should a
/// loaded machine not have finished the reads in it, so that the count
/// is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_waiting_at_the_barrier_has_read_the_next_step() {
    use quiver_meta::rpc;
    use std::time::Duration;

    /// The counts of step 1 of a traversal from a user to its jobs (step
    /// 0) and on to their processes, with `wait` at the barrier between.
    async fn second_step(
        raw: &mut rpc::Peer,
        as_of: u64,
        travel: u64,
        prefetch: bool,
        wait: Duration,
    ) -> rpc::StepCounts {
        let hop = |etype: &str| rpc::Hop {
            etype: etype.into(),
            edge_filters: Vec::new(),
        };
        let start = rpc::Entry {
            id: bytes("uid:1000"),
            path: Vec::new(),
        };
        raw.frontier(rpc::FrontierRequest {
            travel,
            step: 0,
            entries: vec![start],
        })
        .await
        .unwrap();
        let step = |step, etype, next_hop| rpc::RunStepRequest {
            travel,
            step,
            as_of,
            hop: Some(hop(etype)),
            next_hop,
            prefetch,
            ..Default::default()
        };
        raw.run_step(step(0, "run", Some(hop("contains"))))
            .await
            .unwrap();
        tokio::time::sleep(wait).await;
        let reply = raw
            .run_step(step(1, "contains", None))
            .await
            .unwrap()
            .into_inner();
        raw.end_travel(rpc::EndTravelRequest { travel })
            .await
            .unwrap();
        let [counts] = reply.work.as_slice() else {
            panic!("one server did the step: {:?}", reply.work);
        };
        *counts
    }

    let prefetching = ServerConfig {
        prefetch: Prefetch::On,
        ..ServerConfig::default()
    };
    let cluster = Cluster::start_with(1, prefetching).await;
    let c = &cluster.client;
    c.write(&quiver_meta::darshan::generate(200, 3))
        .await
        .unwrap();
    let as_of = c.session();
    let mut raw = rpc::connect_lazy(c.membership()).unwrap().remove(0);
    let off = second_step(&mut raw, as_of, 1, false, Duration::from_millis(500)).await;
    assert!(
        off.vertex_reads > 1 && off.edge_reads > off.vertex_reads,
        "the user has jobs with processes to read: {off:?}"
    );
    assert_eq!((off.prefetched, off.prefetch_hits), (0, 0), "{off:?}");
    let mut on = off;
    for (travel, wait_ms) in [(2, 500), (3, 2_000), (4, 8_000)] {
        on = second_step(
            &mut raw,
            as_of,
            travel,
            true,
            Duration::from_millis(wait_ms),
        )
        .await;
        if on.prefetch_hits == on.vertex_reads + on.partition_scans {
            break;
        }
    }
    assert_eq!(
        (on.vertex_reads, on.partition_scans, on.edge_reads),
        (off.vertex_reads, off.partition_scans, off.edge_reads),
        "prefetching changed the step's work"
    );
    assert!(on.prefetched > 0, "{on:?}");
    assert_eq!(
        on.prefetch_hits,
        on.vertex_reads + on.partition_scans,
        "every read of the step was prefetched: {on:?}"
    );
    cluster.stop().await;
}

/// A cluster whose schema adds a vertex type and a relation with its
/// reverse: the new type is stored with its attributes, the new relation's
/// reverse edge is written with it on the destination's server, and a
/// traversal follows it; a type still unknown is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_types_and_relations_are_stored_reversed_and_followed() {
    let schema = quiver_meta::schema::Schema::with_additions(
        r#"{"types": {"workflow": ["name"]}, "relations": {"partOf": "hasPart"}}"#,
    )
    .unwrap();
    let base = ServerConfig {
        schema,
        ..ServerConfig::default()
    };
    let cluster = Cluster::start_with(2, base).await;
    let c = &cluster.client;
    let attrs = BTreeMap::from([("name".to_string(), b"nightly".to_vec())]);
    let writes = [
        Write::Vertex {
            id: bytes("wf:1"),
            vtype: "workflow".into(),
            attrs: attrs.clone(),
        },
        vertex("job:1", "job"),
        edge("job:1", "partOf", "wf:1"),
    ];
    c.write(&writes).await.unwrap();
    let wf = c.read_vertex(b"wf:1", None).await.unwrap().unwrap();
    assert_eq!((wf.vtype.as_str(), &wf.attrs), ("workflow", &attrs));
    let reverse = c.scan_edges(b"wf:1", Some("hasPart"), None).await.unwrap();
    assert_eq!(reverse.len(), 1, "{reverse:?}");
    assert_eq!(reverse[0].dst, bytes("job:1"));
    let t = c
        .travel(
            &GTravel::v(["wf:1"]).e("hasPart").e("partOf"),
            TravelOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(t.vertices(), [bytes("wf:1")]);
    let planet = Write::Vertex {
        id: bytes("p:1"),
        vtype: "planet".into(),
        attrs: BTreeMap::new(),
    };
    let err = quiver_run::chain(&c.write(&[planet]).await.unwrap_err());
    assert!(err.contains("unknown vertex type \"planet\""), "{err}");
    cluster.stop().await;
}

/// Bad requests get an error that names the problem and store nothing.
/// Every request must carry the cluster's token: a raw request without it
/// or with another is refused as unauthenticated by every server, and so
/// is a client with a cluster file whose token is wrong; the cluster's own
/// clients are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_the_clusters_token_are_refused() {
    use quiver_meta::rpc;

    let cluster = Cluster::start(2, Partitioner::Dido, 8, 128).await;
    let c = &cluster.client;
    assert_eq!(c.membership().token.len(), 32);
    c.write(&[vertex("/ok", "file")]).await.unwrap();
    let mut wrong = c.membership().clone();
    wrong.token = "0".repeat(32);
    let mut none = c.membership().clone();
    none.token = String::new();
    for stranger in [&wrong, &none] {
        for mut raw in rpc::connect_lazy(stranger).unwrap() {
            let status = raw.hello(rpc::HelloRequest {}).await.unwrap_err();
            assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
            assert!(status.message().contains("cluster token"), "{status:?}");
            let write = rpc::WriteRequest {
                session_ts: 0,
                ops: Vec::new(),
                reverse: false,
            };
            let status = raw.write(write).await.unwrap_err();
            assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
        }
        let err = Client::connect(stranger).await.unwrap_err();
        assert!(quiver_run::chain(&err).contains("cluster token"), "{err}");
    }
    // Nothing a stranger sent was stored; the cluster still answers.
    let read = c.read_vertex(b"/ok", None).await.unwrap();
    assert!(read.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_whole() {
    use quiver_meta::rpc;

    let cluster = Cluster::start(2, Partitioner::Dido, 8, 128).await;
    let c = &cluster.client;
    let file = |id: &str| Write::Vertex {
        id: bytes(id),
        vtype: "file".into(),
        attrs: BTreeMap::new(),
    };
    c.write(&[file("/ok")]).await.unwrap();
    let cases: Vec<(Vec<Write>, &str)> = vec![
        (
            vec![
                file("/a"),
                Write::Vertex {
                    id: bytes("/b"),
                    vtype: "planet".into(),
                    attrs: BTreeMap::new(),
                },
            ],
            "unknown vertex type \"planet\"",
        ),
        (
            vec![edge("/ok", "likes", "/ok")],
            "unknown relation \"likes\"",
        ),
        (
            vec![Write::Vertex {
                id: bytes("/c"),
                vtype: "file".into(),
                attrs: BTreeMap::from([("blob".into(), vec![0; 70_000])]),
            }],
            "has 70000 bytes; the limit is 65536",
        ),
        (vec![file("")], "vertex: must have 1 to 4096 bytes, not 0"),
        (
            vec![Write::Vertex {
                id: bytes("/ok"),
                vtype: "job".into(),
                attrs: BTreeMap::new(),
            }],
            "is a file; a put cannot make it a job",
        ),
    ];
    for (writes, want) in cases {
        let err = quiver_run::chain(&c.write(&writes).await.unwrap_err());
        assert!(err.contains(want), "{err}");
    }
    // A write stamped in the future, as a session's timestamp or as a
    // reverse edge's (only a raw request can send either), to every
    // server, the vertex's home among them.
    let future = quiver_meta::clock::wall_ns() + 60_000_000_000;
    let put = rpc::Op {
        op: Some(rpc::op::Op::Vertex(rpc::VertexPut {
            id: bytes("/d"),
            vtype: "file".into(),
            attrs: Default::default(),
        })),
    };
    let reverse_edge = rpc::Op {
        op: Some(rpc::op::Op::Edge(rpc::EdgePut {
            src: bytes("/d"),
            etype: "wasReadBy".into(),
            dst: bytes("/ok"),
            ts: future,
            ..Default::default()
        })),
    };
    for mut raw in rpc::connect_lazy(c.membership()).unwrap() {
        for (session_ts, op, reverse) in [(future, &put, false), (0, &reverse_edge, true)] {
            let request = rpc::WriteRequest {
                session_ts,
                ops: vec![op.clone()],
                reverse,
            };
            let status = raw.write(request).await.unwrap_err();
            assert!(status.message().contains("future"), "{status}");
        }
    }
    // The same refusals from the servers themselves, to a raw request that
    // no client checked first, on every server (each checks before it looks
    // at where the vertex lives). An edge entry adopted with a value that
    // is not an edge version is refused too.
    let vertex = |id: &str, vtype: &str, attrs: BTreeMap<String, Vec<u8>>| rpc::Op {
        op: Some(rpc::op::Op::Vertex(rpc::VertexPut {
            id: bytes(id),
            vtype: vtype.into(),
            attrs,
        })),
    };
    let raw_cases = [
        (
            vertex("/b", "planet", BTreeMap::new()),
            "unknown vertex type \"planet\"",
        ),
        (
            rpc::Op {
                op: Some(rpc::op::Op::Edge(rpc::EdgePut {
                    src: bytes("/ok"),
                    etype: "likes".into(),
                    dst: bytes("/ok"),
                    ..Default::default()
                })),
            },
            "unknown relation \"likes\"",
        ),
        (
            vertex(
                "/c",
                "file",
                BTreeMap::from([("blob".into(), vec![0; 70_000])]),
            ),
            "has 70000 bytes; the limit is 65536",
        ),
        (
            vertex("", "file", BTreeMap::new()),
            "vertex id must have 1 to 4096 bytes, not 0",
        ),
    ];
    let mut adopt_refusals = Vec::new();
    for mut raw in rpc::connect_lazy(c.membership()).unwrap() {
        for (op, want) in &raw_cases {
            let request = rpc::WriteRequest {
                session_ts: 0,
                ops: vec![op.clone()],
                reverse: false,
            };
            let status = raw.write(request).await.unwrap_err();
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status}");
            assert!(status.message().contains(want), "{status}");
        }
        let entry = rpc::RawEntry {
            key: quiver_meta::key::edge_key(b"/ok", b"has", b"/e", 1),
            value: vec![7, 7, 7],
        };
        let status = raw
            .adopt(rpc::AdoptRequest {
                src: bytes("/ok"),
                node: 2,
                entries: vec![entry],
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status}");
        adopt_refusals.push(status.message().to_string());
    }
    // A traversal step along an unknown relation, sent raw to every server
    // (by either engine), is refused too.
    for mut raw in rpc::connect_lazy(c.membership()).unwrap() {
        let hop = Some(rpc::Hop {
            etype: "likes".into(),
            edge_filters: Vec::new(),
        });
        let step = rpc::RunStepRequest {
            travel: 7,
            hop: hop.clone(),
            ..Default::default()
        };
        let status = raw.run_step(step).await.unwrap_err();
        assert!(
            status.message().contains("unknown relation \"likes\""),
            "{status}"
        );
        let first = rpc::StepSpec {
            vertex_filters: Vec::new(),
            hop,
            keep: false,
        };
        let last = rpc::StepSpec {
            hop: None,
            keep: true,
            ..first.clone()
        };
        let flow = rpc::FlowRequest {
            travel: 8,
            plan: vec![first, last],
            ..Default::default()
        };
        let status = raw.flow(flow).await.unwrap_err();
        assert!(
            status.message().contains("unknown relation \"likes\""),
            "{status}"
        );
    }
    // The partition is one server's; the other refuses it as not its own.
    assert_eq!(
        adopt_refusals
            .iter()
            .filter(|m| m.contains("not an edge version"))
            .count(),
        1,
        "{adopt_refusals:?}"
    );
    for id in ["/a", "/b", "/c", "/d"] {
        assert_eq!(
            c.read_vertex(id.as_bytes(), None).await.unwrap(),
            None,
            "{id} was stored"
        );
    }
    assert_eq!(
        c.scan_edges(b"/ok", None, None).await.unwrap(),
        Vec::new(),
        "the edge of an unknown relation was stored"
    );
    // A read as of a time in the future.
    let err = c
        .read_vertex(b"/ok", Some(future))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("in this server's future"), "{err}");
    let err = c
        .travel(
            &GTravel::v(["/ok"]).e("has"),
            TravelOptions {
                as_of: Some(future),
                ..TravelOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("future"), "{err}");
    // A traversal that makes no sense never reaches a server.
    let err = c
        .travel(&GTravel::v(Vec::<Vec<u8>>::new()), TravelOptions::default())
        .await
        .unwrap_err();
    assert!(quiver_run::is_invalid_argument(&err), "{err}");
    let err = c
        .travel(&GTravel::v(["/ok"]).e("wrote"), TravelOptions::default())
        .await
        .unwrap_err();
    assert!(quiver_run::is_invalid_argument(&err), "{err}");
    assert!(
        quiver_run::chain(&err).contains("e(wrote) names an unknown relation"),
        "{err}"
    );
    cluster.stop().await;
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Requests with random field values, and random bytes that happen to
    /// decode as a request, sent straight to a server: an error or a
    /// consistent answer, never a crash or a hang; the server still serves.
    #[test]
    fn random_requests_get_answers_not_crashes(
        raw in prop::collection::vec(any::<u8>(), 0..200),
        id in prop::collection::vec(any::<u8>(), 0..20),
        vtype in "[a-z]{0,6}",
        node: u32,
        ts: u64,
    ) {
        use prost::Message;
        use quiver_meta::rpc;
        runtime().block_on(async {
            let cluster = Cluster::start(1, Partitioner::Dido, 4, 2).await;
            let mut raw_client = rpc::connect_lazy(cluster.client.membership()).unwrap().remove(0);
            if let Ok(req) = rpc::WriteRequest::decode(raw.as_slice()) {
                let _ = raw_client.write(req).await;
            }
            if let Ok(req) = rpc::RunStepRequest::decode(raw.as_slice()) {
                let _ = raw_client.run_step(req).await;
            }
            if let Ok(req) = rpc::AdoptRequest::decode(raw.as_slice()) {
                let _ = raw_client.adopt(req).await;
            }
            if let Ok(req) = rpc::FlowRequest::decode(raw.as_slice()) {
                let travel = req.travel;
                let _ = raw_client.flow(req).await;
                let _ = raw_client.progress(rpc::ProgressRequest { travel }).await;
            }
            let hop = rpc::Hop { etype: vtype.clone(), edge_filters: Vec::new() };
            let last = rpc::StepSpec { vertex_filters: Vec::new(), hop: None, keep: true };
            let plan = vec![rpc::StepSpec { hop: Some(hop), ..last.clone() }, last];
            let entry = rpc::Entry { id: id.clone(), path: vec![raw.clone()] };
            let flow = rpc::FlowRequest { travel: ts, step: node % 3, as_of: ts, paths: node % 2 == 0, plan, entries: vec![entry], scan: node % 5 == 0 };
            let _ = raw_client.flow(flow).await;
            let _ = raw_client.progress(rpc::ProgressRequest { travel: ts }).await;
            let edge = rpc::EdgePut { src: id.clone(), etype: vtype.clone(), dst: id.clone(), node, ..Default::default() };
            let ops = vec![
                rpc::Op { op: Some(rpc::op::Op::Vertex(rpc::VertexPut { id: id.clone(), vtype, attrs: Default::default() })) },
                rpc::Op { op: Some(rpc::op::Op::Edge(edge)) },
                rpc::Op { op: None },
            ];
            let _ = raw_client.write(rpc::WriteRequest { session_ts: ts, ops: ops.clone(), reverse: false }).await;
            let _ = raw_client.write(rpc::WriteRequest { session_ts: ts, ops, reverse: true }).await;
            let _ = raw_client.read_vertex(rpc::ReadVertexRequest { id: id.clone(), as_of: ts, session_ts: 0 }).await;
            let _ = raw_client.adopt(rpc::AdoptRequest { src: id.clone(), node, entries: vec![rpc::RawEntry { key: raw.clone(), value: raw.clone() }] }).await;
            let _ = raw_client.mark_split(rpc::MarkSplitRequest { src: id.clone(), node }).await;
            // Whatever was taken left nothing unreadable behind.
            if !id.is_empty() {
                cluster.client.read_vertex(&id, None).await.unwrap();
                cluster.client.scan_edges(&id, None, None).await.unwrap();
            }
            // Still serving, and still right.
            let w = Write::Vertex { id: b"/after".to_vec(), vtype: "file".into(), attrs: BTreeMap::new() };
            cluster.client.write(std::slice::from_ref(&w)).await.unwrap();
            assert!(cluster.client.read_vertex(b"/after", None).await.unwrap().is_some());
            cluster.stop().await;
        });
    }
}

#[test]
fn traversal_text_matches_the_builder_used_above() {
    let t = Travel::parse(r#"v("u1").e(run).v().va(type = "job").rtm().e(contains).return_fp()"#)
        .unwrap();
    assert_eq!(
        t,
        GTravel::v(["u1"])
            .e("run")
            .v()
            .va(Filter::eq("type", "job"))
            .rtm()
            .e("contains")
            .return_fp()
    );
}
