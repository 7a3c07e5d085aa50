//! What placement costs and how clients keep up with it: StatComm and
//! StatReads against a count by hand, and a client whose split state of a
//! vertex is stale.

use quiver_meta::{Client, Engine, GTravel, Partitioner, TravelOptions, Write};

use super::{bytes, edge, homed_on, vertex, Cluster};

/// In a cluster of two: a job homed on server 0, `near` files homed there
/// too and `far` files homed on server 1, written as vertices (no edges
/// yet). Returns their ids: the job, the near files, the far files.
async fn job_and_files(c: &Client, near: usize, far: usize) -> (String, Vec<String>, Vec<String>) {
    let job = homed_on(c, "job:", 0, 1).remove(0);
    let near = homed_on(c, "/near", 0, near);
    let far = homed_on(c, "/far", 1, far);
    let mut writes = vec![vertex(&job, "job")];
    writes.extend(near.iter().chain(&far).map(|f| vertex(f, "file")));
    c.write(&writes).await.unwrap();
    (job, near, far)
}

/// A job that wrote four files homed on its server and two homed on the
/// other (a cluster of two, threshold 2): StatComm, StatReads and messages
/// of each step of `v(job).e(write).e(wasWrittenBy)` equal a count made by
/// hand from where each vertex and edge lives, for DIDO (the job's six
/// edges pass the threshold and split: the two to far files move to server
/// 1) and edge-cut (all six stay on server 0), with prefetching off and
/// on; the asynchronous engine counts the same StatComm and StatReads.
///
/// StatComm counts a vertex's partition on another server than the vertex
/// and an edge on another server than its destination; StatReads is the
/// most vertices and edges any one server read in the step; messages are
/// the requests between servers.
///
/// | step        | server 0 reads        | server 1 reads | StatComm               | messages          |
/// |-------------|-----------------------|----------------|------------------------|-------------------|
/// | 0, DIDO     | job + 4 edges = 5     | 2 edges        | 1 (the far partition)  | 1 (expand on 1)   |
/// | 0, edge-cut | job + 6 edges = 7     | none           | 2 (edges to far files) | 1 (frontier to 1) |
/// | 1           | 4 files + 4 edges = 8 | 2 + 2 = 4      | 2 (far files' edges)   | 1 (frontier to 0) |
/// | 2           | the job, once = 1     | none           | 0                      | 0                 |
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stat_comm_stat_reads_and_messages_equal_a_count_by_hand() {
    // (StatComm, StatReads, messages) of step 0, which differs, and the
    // splits the edges make.
    for (partitioner, first_step, splits) in [
        (Partitioner::Dido, (1, 5, 1), 1),
        (Partitioner::EdgeCut, (2, 7, 1), 0),
    ] {
        let cluster = Cluster::start(2, partitioner, 16, 2).await;
        let c = &cluster.client;
        let (job, near, far) = job_and_files(c, 4, 2).await;
        let edges: Vec<Write> = near
            .iter()
            .chain(&far)
            .map(|f| edge(&job, "write", f))
            .collect();
        let done = c.write(&edges).await.unwrap();
        assert_eq!(done.splits, splits, "{partitioner:?}");
        let want = [first_step, (2, 8, 1), (0, 1, 0)];
        let travel = GTravel::v([job.as_str()]).e("write").e("wasWrittenBy");
        for (engine, prefetch) in [
            (Engine::Sync, false),
            (Engine::Sync, true),
            (Engine::Async, false),
        ] {
            let options = TravelOptions {
                engine,
                prefetch,
                ..TravelOptions::default()
            };
            let t = c.travel(&travel, options).await.unwrap();
            assert_eq!(t.vertices(), [bytes(&job)]);
            let got: Vec<(u64, u64, u64)> = t
                .steps
                .iter()
                .map(|s| (s.stat_comm, s.stat_reads, s.messages))
                .collect();
            if engine == Engine::Sync {
                assert_eq!(got, want, "{partitioner:?}, prefetch {prefetch}: {t:#?}");
            } else {
                // Its messages are batches, as many as the timing makes.
                let without_messages = |s: &[(u64, u64, u64)]| -> Vec<(u64, u64)> {
                    s.iter().map(|&(comm, reads, _)| (comm, reads)).collect()
                };
                assert_eq!(
                    without_messages(&got),
                    without_messages(&want),
                    "{partitioner:?}, asynchronous: {t:#?}"
                );
            }
        }
        cluster.stop().await;
    }
}

/// A client that learned a vertex's split state before another client's
/// writes split it sends edges, and an edge delete, to the partition that
/// no longer holds them: the server returns them as stale and the client
/// sends them on to the right one (`rerouted` counts each, and only
/// those), learning the split so that its next write goes straight there.
/// Both clients' scans and a traversal then find every edge, and every
/// reverse edge, and not the deleted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_a_stale_split_state_reroutes_and_loses_no_edge() {
    let cluster = Cluster::start(2, Partitioner::Dido, 16, 2).await;
    let stale = &cluster.client;
    let (job, near, far) = job_and_files(stale, 4, 5).await;
    // The job has no edges yet, so one partition, on its home.
    let none = stale.scan_edges(job.as_bytes(), None, None).await.unwrap();
    assert!(none.is_empty(), "{none:?}");

    // Five edges pass the threshold: the partition splits, and the edges
    // to far files move to server 1.
    let other = Client::connect(stale.membership()).await.unwrap();
    let first: Vec<Write> = near[..3]
        .iter()
        .chain(&far[..2])
        .map(|f| edge(&job, "write", f))
        .collect();
    let done = other.write(&first).await.unwrap();
    assert_eq!((done.splits, done.rerouted), (1, 0));

    let delete = Write::DeleteEdge {
        src: bytes(&job),
        etype: "write".into(),
        dst: bytes(&far[0]),
    };
    let late = [
        edge(&job, "write", &far[2]),
        edge(&job, "write", &far[3]),
        edge(&job, "write", &near[3]),
        delete,
    ];
    let done = stale.write(&late).await.unwrap();
    assert_eq!(done.rerouted, 3, "the two far edges and the delete");
    let done = stale.write(&[edge(&job, "write", &far[4])]).await.unwrap();
    assert_eq!(done.rerouted, 0, "the client learned the split");

    let mut want: Vec<Vec<u8>> = near.iter().chain(&far[1..]).map(|f| bytes(f)).collect();
    want.sort();
    for (who, c) in [("stale", stale), ("other", &other)] {
        let edges = c
            .scan_edges(job.as_bytes(), Some("write"), None)
            .await
            .unwrap();
        let got: Vec<Vec<u8>> = edges.into_iter().map(|e| e.dst).collect();
        assert_eq!(got, want, "the {who} client's scan");
    }
    let from_job = GTravel::v([job.as_str()]).e("write");
    let t = stale
        .travel(&from_job, TravelOptions::default())
        .await
        .unwrap();
    assert_eq!(t.vertices(), want, "a traversal from the job");
    for file in near.iter().chain(&far) {
        let reverse = stale
            .scan_edges(file.as_bytes(), Some("wasWrittenBy"), None)
            .await
            .unwrap();
        let want = if *file == far[0] { 0 } else { 1 };
        assert_eq!(reverse.len(), want, "{file}: {reverse:?}");
    }
    cluster.stop().await;
}
