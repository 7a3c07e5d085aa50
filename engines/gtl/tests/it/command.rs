//! The command decoder and the device's queues: graph commands reach the
//! GTL and block commands the FTL; commands rung together answer exactly
//! as the same commands one at a time, in no more modelled time, and reads
//! on different dies overlap.

use std::sync::Arc;

use proptest::prelude::*;
use quiver_csr::testing::{arb_graph, karate, Shape};
use quiver_csr::Graph;
use quiver_gtl::ftl::Lba;
use quiver_gtl::{Command, Error, Queue, Response, Result, Ssd, Update, UpdatePath};
use quiver_run::NoProgress;

use crate::small_config;

/// A device with `graph` loaded by the GraphInitialize command and its
/// CSR file written.
fn loaded(graph: &Arc<Graph>) -> Ssd {
    let mut ssd = Ssd::new(&small_config()).unwrap();
    let response = ssd.execute(Command::GraphInitialize(Arc::clone(graph)));
    assert!(matches!(response, Ok(Response::Initialized(_))));
    ssd.write_csr(graph, &NoProgress).unwrap();
    ssd
}

/// A page of `byte`s.
fn page(ssd: &Ssd, byte: u8) -> Vec<u8> {
    vec![byte; ssd.flash().geometry().page_bytes as usize]
}

#[test]
fn the_decoder_sends_graph_commands_to_the_gtl_and_block_commands_to_the_ftl() {
    let graph = Arc::new(karate(true));
    let mut ssd = loaded(&graph);
    let csr_pages = ssd.csr().unwrap().pages();
    let free = Lba(csr_pages);

    let (ftl, gtl) = (ssd.ftl().counters().clone(), *ssd.gtl().unwrap().counters());
    let reads = ssd.flash().counters().page_reads;
    let list = ssd
        .execute(Command::GetAdjacencyList { vertex: 33 })
        .unwrap();
    assert_eq!(list, Response::List(graph.neighbors(33).to_vec()));
    assert!(
        ssd.flash().counters().page_reads > reads,
        "the list came from flash"
    );
    let add = Update::AddEdge {
        source: 0,
        target: 9,
        weight: 1.0,
    };
    let applied = ssd.execute(Command::Update {
        updates: vec![add],
        path: UpdatePath::Delta,
    });
    assert_eq!(applied.unwrap(), Response::Applied(vec![true]));
    assert_eq!(
        ssd.ftl().counters(),
        &ftl,
        "graph commands leave the FTL alone"
    );
    assert!(ssd.gtl().unwrap().counters().delta_records > gtl.delta_records);

    let gtl = *ssd.gtl().unwrap().counters();
    let data = page(&ssd, 7);
    let written = ssd.execute(Command::WriteBlock {
        lba: free,
        data: data.clone(),
    });
    assert_eq!(written.unwrap(), Response::Written);
    let read = ssd.execute(Command::ReadBlock { lba: free }).unwrap();
    assert_eq!(read, Response::Block(data));
    let never = ssd.execute(Command::ReadBlock {
        lba: Lba(free.0 + 1),
    });
    assert_eq!(never.unwrap(), Response::Block(page(&ssd, 0)));
    assert_eq!(
        ssd.gtl().unwrap().counters(),
        &gtl,
        "block commands leave the GTL alone"
    );
    assert_eq!(ssd.ftl().counters().host_writes, ftl.host_writes + 1);
    assert_eq!(ssd.ftl().counters().host_reads, ftl.host_reads + 2);
    assert_eq!(
        ssd.execute(Command::GetAdjacencyList { vertex: 0 })
            .unwrap(),
        Response::List([graph.neighbors(0), &[9]].concat())
    );
}

#[test]
fn block_writes_to_the_csr_file_or_of_a_wrong_size_are_refused() {
    let graph = Arc::new(karate(true));
    let mut ssd = loaded(&graph);
    let csr_pages = ssd.csr().unwrap().pages();
    let data = page(&ssd, 1);
    let refused = ssd.execute(Command::WriteBlock {
        lba: Lba(csr_pages - 1),
        data,
    });
    assert!(
        matches!(refused, Err(Error::CsrFilePage { lba, pages }) if lba == csr_pages - 1 && pages == csr_pages)
    );
    let short = ssd.execute(Command::WriteBlock {
        lba: Lba(csr_pages),
        data: vec![1; 3],
    });
    assert!(matches!(short, Err(Error::PageSize { data: 3, .. })));
    let beyond = ssd.execute(Command::ReadBlock {
        lba: Lba(ssd.ftl().logical_pages()),
    });
    assert!(matches!(beyond, Err(Error::LbaOutOfRange { .. })));
    assert_eq!(
        ssd.ftl().counters().host_writes,
        csr_pages,
        "nothing was written"
    );
    assert_eq!(
        ssd.csr_get_adjacency_list(5).unwrap().value,
        graph.neighbors(5),
        "the baseline's file is intact"
    );
}

#[test]
fn a_csr_file_is_not_written_over_block_data() {
    let graph = karate(true);
    let mut ssd = Ssd::new(&small_config()).unwrap();
    let data = page(&ssd, 3);
    ssd.write_block(Lba(4), &data).unwrap();
    let refused = ssd.write_csr(&graph, &NoProgress);
    assert!(matches!(refused, Err(Error::BlocksInUse { lba: 4, .. })));
    assert!(ssd.csr().is_none());
    assert_eq!(
        ssd.read_block(Lba(4)).unwrap().value,
        data,
        "the block is intact"
    );
}

#[test]
fn an_empty_ring_answers_nothing_and_leaves_the_clock() {
    let mut ssd = loaded(&Arc::new(karate(true)));
    let now = ssd.now();
    assert!(Queue::new().ring(&mut ssd).is_empty());
    assert_eq!(ssd.now(), now);
}

#[test]
fn reads_rung_together_overlap_on_the_dies() {
    let graph = Arc::new(karate(true));
    let mut one_by_one = loaded(&graph);
    let mut queued = loaded(&graph);
    let (start, queued_start) = (one_by_one.now(), queued.now());
    let mut queue = Queue::new();
    for vertex in 0..34 {
        one_by_one
            .execute(Command::GetAdjacencyList { vertex })
            .unwrap();
        queue.submit(Command::GetAdjacencyList { vertex });
    }
    assert_eq!(queue.len(), 34);
    let replies = queue.ring(&mut queued);
    assert!(queue.is_empty());
    assert!(
        replies.windows(2).all(|w| w[0].done <= w[1].done),
        "completion order"
    );
    for reply in &replies {
        assert_eq!(
            reply.submitted, queued_start,
            "every read started at the doorbell"
        );
        let vertex = u32::try_from(reply.tag).unwrap();
        let list = reply.result.as_ref().unwrap();
        assert_eq!(list, &Response::List(graph.neighbors(vertex).to_vec()));
        assert!(reply.pages_read >= 1);
        assert_eq!(reply.pages_written, 0);
    }
    let sequential = one_by_one.now() - start;
    let overlapped = queued.now() - queued_start;
    assert_eq!(queued.now(), replies.last().unwrap().done);
    // Four dies: reads of one ring overlap on them.
    assert!(
        overlapped * 2 < sequential,
        "{overlapped} ns rung together against {sequential} ns one at a time"
    );
}

/// A command drawn for the equivalence test, its ids resolved against
/// `n` vertices and the first logical page after the CSR file.
#[derive(Clone, Debug)]
enum Raw {
    Get(u32),
    Weight(u32, u32),
    Add(u32, u32, bool),
    Delete(u32, u32, bool),
    Merge(Option<usize>),
    Read(u64),
    Write(u64, u8),
}

fn arb_raw() -> impl Strategy<Value = Raw> {
    prop_oneof![
        4 => any::<u32>().prop_map(Raw::Get),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(s, t)| Raw::Weight(s, t)),
        3 => (any::<u32>(), any::<u32>(), any::<bool>()).prop_map(|(s, t, d)| Raw::Add(s, t, d)),
        2 => (any::<u32>(), any::<u32>(), any::<bool>()).prop_map(|(s, t, d)| Raw::Delete(s, t, d)),
        1 => proptest::option::of(1usize..4).prop_map(Raw::Merge),
        2 => (0u64..12).prop_map(Raw::Read),
        2 => (0u64..12, any::<u8>()).prop_map(|(l, b)| Raw::Write(l, b)),
    ]
}

/// `raw` as a command on `ssd`: vertex ids reach one past |V| (an error),
/// logical pages start 2 before the end of the CSR file (a refusal).
fn command(raw: &Raw, ssd: &Ssd) -> Command {
    let n = ssd.gtl().unwrap().vertices();
    let v = |x: u32| x % (n + 1);
    let lba = |x: u64| Lba(ssd.csr().unwrap().pages().saturating_sub(2) + x);
    let path = |direct: bool| {
        if direct {
            UpdatePath::Direct
        } else {
            UpdatePath::Delta
        }
    };
    match *raw {
        Raw::Get(x) => Command::GetAdjacencyList { vertex: v(x) },
        Raw::Weight(s, t) => Command::GetEdgeWeight {
            source: v(s),
            target: v(t),
        },
        Raw::Add(s, t, direct) => Command::Update {
            updates: vec![Update::AddEdge {
                source: v(s),
                target: v(t),
                weight: 2.0,
            }],
            path: path(direct),
        },
        Raw::Delete(s, t, direct) => Command::Update {
            updates: vec![Update::DeleteEdge {
                source: v(s),
                target: v(t),
            }],
            path: path(direct),
        },
        Raw::Merge(groups) => Command::Merge { groups },
        Raw::Read(x) => Command::ReadBlock { lba: lba(x) },
        Raw::Write(x, byte) => Command::WriteBlock {
            lba: lba(x),
            data: page(ssd, byte),
        },
    }
}

/// What a command returned, without its modelled time.
fn outcome(result: &Result<Response>) -> String {
    match result {
        Ok(Response::Merged(merged)) => {
            format!("merged {} ({} left)", merged.groups, merged.remaining)
        }
        Ok(response) => format!("{response:?}"),
        Err(e) => format!("error: {e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn commands_rung_together_answer_as_one_at_a_time_in_no_more_time(
        graph in arb_graph(Shape::new(24, 60)),
        raws in proptest::collection::vec(arb_raw(), 1..40),
        rings in proptest::collection::vec(1usize..8, 40),
    ) {
        let graph = Arc::new(graph);
        let mut one_by_one = loaded(&graph);
        let mut queued = loaded(&graph);
        let mut queue = Queue::new();
        let mut raws = raws.iter();
        for &size in &rings {
            let ring: Vec<&Raw> = raws.by_ref().take(size).collect();
            if ring.is_empty() {
                break;
            }
            let start = queued.now();
            let mut tags = Vec::new();
            let mut want = Vec::new();
            for raw in ring {
                tags.push(queue.submit(command(raw, &queued)));
                want.push(outcome(&one_by_one.execute(command(raw, &one_by_one))));
            }
            let replies = queue.ring(&mut queued);
            prop_assert!(replies.windows(2).all(|w| (w[0].done, w[0].tag) < (w[1].done, w[1].tag)));
            prop_assert_eq!(queued.now(), replies.iter().map(|r| r.done).max().unwrap());
            for reply in &replies {
                prop_assert_eq!(reply.submitted, start);
                prop_assert!(reply.done >= start);
                let i = tags.iter().position(|&t| t == reply.tag).unwrap();
                prop_assert_eq!(outcome(&reply.result), want[i].clone(), "command {}", i);
            }
        }
        prop_assert!(queued.now() <= one_by_one.now(), "{} ns queued against {} ns", queued.now(), one_by_one.now());
        let (a, b) = (queued.read_graph().unwrap(), one_by_one.read_graph().unwrap());
        for v in 0..graph.num_vertices() {
            prop_assert_eq!(a.neighbors(v), b.neighbors(v), "list of {}", v);
            prop_assert_eq!(a.edge_weights(v), b.edge_weights(v), "weights of {}", v);
        }
        queued.gtl().unwrap().check_structure(queued.flash());
        queued.ftl().check(queued.flash());
    }
}
