//! Servers that stop and come back: reverse edges that waited for a
//! server that was down, and what a graceful shutdown leaves on disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use prost::Message;
use quiver_meta::store::{EdgeVersion, Store};
use quiver_meta::{rpc, Partitioner, Write};

use super::{bytes, edge, homed_on, vertex, Cluster};

/// A write whose reverse edge's server is down is stored but not
/// acknowledged: the client gets Unavailable saying the reverse edge waits,
/// the forward edge is readable at once, and the writing server holds the
/// reverse edge as a durable pending entry (seen in its store while it is
/// stopped, and kept across its restart). Once the reverse edge's server
/// is back, the writer's once-a-second redelivery brings the reverse edge
/// there, at the forward edge's timestamp.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reverse_edge_whose_server_was_down_arrives_when_it_returns() {
    let mut cluster = Cluster::start(2, Partitioner::Dido, 8, 128).await;
    let c = cluster.client.clone();
    let (job, file) = edge_to_a_stopped_server(&mut cluster).await;
    let forward = c
        .scan_edges(job.as_bytes(), Some("write"), None)
        .await
        .unwrap();
    assert_eq!(forward.len(), 1, "{forward:?}");
    assert_eq!(forward[0].dst, bytes(&file));

    // The reverse edge waits in the writer's pending family.
    cluster.stop_server(WRITER).await;
    let pending = pending_reverse_edges(&cluster.configs[WRITER].data).await;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let waiting = &pending[0];
    assert_eq!(
        (&waiting.src, waiting.etype.as_str(), &waiting.dst),
        (&bytes(&file), "wasWrittenBy", &bytes(&job))
    );

    // The writer comes back first and fails to deliver (its peer is still
    // down); the reverse edge arrives on a later attempt, after the peer
    // returns.
    cluster.restart(WRITER).await;
    cluster.restart(DOWN).await;
    let reverse = reverse_edges_within_10s(&c, &file).await;
    assert_eq!(reverse.len(), 1, "{reverse:?}");
    assert_eq!(reverse[0].dst, bytes(&job));
    assert_eq!(reverse[0].ts, forward[0].ts, "stamped as its forward edge");
    cluster.stop().await;
}

/// The server that writes an edge, and the one its reverse edge goes to.
const WRITER: usize = 0;
const DOWN: usize = 1;

/// Writes a job homed on [`WRITER`] and a file on [`DOWN`], stops `DOWN`
/// and writes an edge from the job to the file, which is stored but not
/// acknowledged (its reverse edge waits); returns the job and the file.
async fn edge_to_a_stopped_server(cluster: &mut Cluster) -> (String, String) {
    let c = cluster.client.clone();
    let job = homed_on(&c, "job:", WRITER, 1).remove(0);
    let file = homed_on(&c, "/out", DOWN, 1).remove(0);
    c.write(&[vertex(&job, "job"), vertex(&file, "file")])
        .await
        .unwrap();
    cluster.stop_server(DOWN).await;
    let err = c.write(&[edge(&job, "write", &file)]).await.unwrap_err();
    assert!(err.is_unavailable(), "{}", quiver_run::chain(&err));
    assert!(
        quiver_run::chain(&err).contains("the write is stored but its reverse edges wait"),
        "{}",
        quiver_run::chain(&err)
    );
    (job, file)
}

/// The `wasWrittenBy` edges of `file`, once there are any; fails after
/// 10 s without.
async fn reverse_edges_within_10s(c: &quiver_meta::Client, file: &str) -> Vec<EdgeVersion> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reverse = c
            .scan_edges(file.as_bytes(), Some("wasWrittenBy"), None)
            .await
            .unwrap();
        if !reverse.is_empty() {
            return reverse;
        }
        assert!(
            Instant::now() < deadline,
            "the reverse edge did not arrive within 10 s of its server's return"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The reverse edges waiting in the store in `data`, its server stopped.
/// A delivery call the server's upkeep made when it was stopped may hold
/// the store for a moment after `shutdown` returns (it is aborted, not
/// awaited), so the store is opened as `Cluster::restart` opens it: again
/// until the lock is free.
async fn pending_reverse_edges(data: &Path) -> Vec<rpc::EdgePut> {
    let mut opened = Store::open(data, false);
    for _ in 0..100 {
        if opened.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        opened = Store::open(data, false);
    }
    opened
        .unwrap()
        .pending()
        .unwrap()
        .into_iter()
        .map(|(_, value)| rpc::EdgePut::decode(value.as_slice()).unwrap())
        .collect()
}

/// A graceful shutdown flushes the store: a server stopped with
/// `Running::shutdown` whose write-ahead log files are then deleted
/// restarts with its vertices, edges and reverse edges (without the flush
/// they were in the log only, and a reopened store would not have them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gracefully_stopped_server_restarts_without_its_write_ahead_log() {
    let mut cluster = Cluster::start(1, Partitioner::Dido, 8, 128).await;
    let c = cluster.client.clone();
    let attrs = BTreeMap::from([("owner".to_string(), bytes("ann"))]);
    c.write(&[
        Write::Vertex {
            id: bytes("job:1"),
            vtype: "job".into(),
            attrs: attrs.clone(),
        },
        vertex("/out", "file"),
        edge("job:1", "write", "/out"),
    ])
    .await
    .unwrap();
    cluster.stop_server(0).await;
    let data = &cluster.configs[0].data;
    let mut logs = 0;
    for entry in std::fs::read_dir(data).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            std::fs::remove_file(path).unwrap();
            logs += 1;
        }
    }
    assert!(logs > 0, "no write-ahead log in {}", data.display());
    cluster.restart(0).await;
    let job = c.read_vertex(b"job:1", None).await.unwrap();
    assert_eq!(job.map(|j| j.attrs), Some(attrs), "the vertex was lost");
    let forward = c.scan_edges(b"job:1", None, None).await.unwrap();
    assert_eq!(
        forward.iter().map(|e| &e.dst).collect::<Vec<_>>(),
        [&bytes("/out")]
    );
    let reverse = c.scan_edges(b"/out", None, None).await.unwrap();
    assert_eq!(
        reverse.iter().map(|e| &e.dst).collect::<Vec<_>>(),
        [&bytes("job:1")]
    );
    cluster.stop().await;
}

/// A reverse edge whose delivery failed while its server was down arrives
/// once the server is back, with the writer up all along (the failure, not
/// a restart, makes the writer's upkeep deliver again). And under a load
/// that spans several upkeep ticks, every reverse edge is written exactly
/// once: the upkeep leaves entries that a delivery in flight will take
/// alone (it once scanned the pending family every second and sent those
/// again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_is_retried_and_a_working_one_is_never_doubled() {
    // Edge-cut: no splits, so no write is sent twice for a stale partition
    // and the servers' op counts are exact.
    let mut cluster = Cluster::start(2, Partitioner::EdgeCut, 8, 128).await;
    let c = cluster.client.clone();
    let (_, file) = edge_to_a_stopped_server(&mut cluster).await;
    cluster.restart(DOWN).await;
    reverse_edges_within_10s(&c, &file).await;

    let before: u64 = c.stats().await.unwrap().iter().map(|s| s.writes).sum();
    let jobs: Vec<String> = (0..64).map(|i| format!("job:{i}")).collect();
    let files: Vec<String> = (0..64).map(|i| format!("/f{i}")).collect();
    let vertices: Vec<Write> = jobs
        .iter()
        .map(|j| vertex(j, "job"))
        .chain(files.iter().map(|f| vertex(f, "file")))
        .collect();
    c.write(&vertices).await.unwrap();
    // Batches from 4 clients until the load has spanned 3 upkeep ticks.
    let started = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    for k in 0..4usize {
        let (c, jobs, files) = (c.clone(), jobs.clone(), files.clone());
        clients.spawn(async move {
            let mut edges = 0u64;
            let mut round = 0usize;
            while started.elapsed() < Duration::from_millis(3_200) {
                let batch: Vec<Write> = (0..32)
                    .map(|i| {
                        let n = (round * 32 + i) * 4 + k;
                        edge(&jobs[n % 64], "write", &files[(n / 64) % 64])
                    })
                    .collect();
                c.write(&batch).await.unwrap();
                edges += batch.len() as u64;
                round += 1;
            }
            edges
        });
    }
    let mut edges = 0;
    while let Some(n) = clients.join_next().await {
        edges += n.unwrap();
    }
    let after: u64 = c.stats().await.unwrap().iter().map(|s| s.writes).sum();
    assert_eq!(
        after - before,
        vertices.len() as u64 + 2 * edges,
        "ops the servers wrote for {} vertices and {edges} edges with their reverse edges",
        vertices.len()
    );
    cluster.stop().await;
}
