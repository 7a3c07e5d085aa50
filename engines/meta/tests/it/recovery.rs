//! Servers that stop and come back: reverse edges that waited for a
//! server that was down, and what a graceful shutdown leaves on disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use prost::Message;
use quiver_meta::store::Store;
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
    let (writer, down) = (0, 1);
    let job = homed_on(&c, "job:", writer, 1).remove(0);
    let file = homed_on(&c, "/out", down, 1).remove(0);
    c.write(&[vertex(&job, "job"), vertex(&file, "file")])
        .await
        .unwrap();

    cluster.stop_server(down).await;
    let err = c.write(&[edge(&job, "write", &file)]).await.unwrap_err();
    assert!(err.is_unavailable(), "{}", quiver_run::chain(&err));
    assert!(
        quiver_run::chain(&err).contains("the write is stored but its reverse edges wait"),
        "{}",
        quiver_run::chain(&err)
    );
    let forward = c
        .scan_edges(job.as_bytes(), Some("write"), None)
        .await
        .unwrap();
    assert_eq!(forward.len(), 1, "{forward:?}");
    assert_eq!(forward[0].dst, bytes(&file));

    // The reverse edge waits in the writer's pending family.
    cluster.stop_server(writer).await;
    let pending = pending_reverse_edges(&cluster.configs[writer].data).await;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let waiting = &pending[0];
    assert_eq!(
        (&waiting.src, waiting.etype.as_str(), &waiting.dst),
        (&bytes(&file), "wasWrittenBy", &bytes(&job))
    );

    // The writer comes back first and fails to deliver (its peer is still
    // down); the reverse edge arrives on a later attempt, after the peer
    // returns.
    cluster.restart(writer).await;
    cluster.restart(down).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let reverse = loop {
        let reverse = c
            .scan_edges(file.as_bytes(), Some("wasWrittenBy"), None)
            .await
            .unwrap();
        if !reverse.is_empty() {
            break reverse;
        }
        assert!(
            Instant::now() < deadline,
            "the reverse edge did not arrive within 10 s of its server's return"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(reverse.len(), 1, "{reverse:?}");
    assert_eq!(reverse[0].dst, bytes(&job));
    assert_eq!(reverse[0].ts, forward[0].ts, "stamped as its forward edge");
    cluster.stop().await;
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
