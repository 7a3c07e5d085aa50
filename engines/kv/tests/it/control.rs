//! A served store answering a client, against the graph it was loaded from.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;

use quiver_csr::testing::karate;
use quiver_kv::control::{serve, Client, Request, Response};
use quiver_kv::layout::Placement;
use quiver_kv::{Clock, Store, StoreConfig};
use quiver_run::chain;
use quiver_verbs::loopback;

fn call(address: &str, request: &Request) -> quiver_kv::Result<Response> {
    Client::connect(address)?.call(request)
}

/// A list of dense ids as a served graph without an id map names them.
fn wide(ids: &[u32]) -> Vec<u64> {
    ids.iter().map(|&v| u64::from(v)).collect()
}

#[test]
fn a_client_gets_puts_moves_and_traverses_and_stop_ends_every_node() {
    let graph = karate(true);
    let placement = Placement::new(graph.num_vertices(), 3);
    let key = (0..graph.num_vertices())
        .find(|&v| placement.home_node(v) == 2 && graph.degree(v) > 3)
        .unwrap();
    let (ready, address) = mpsc::channel();
    std::thread::scope(|scope| {
        let job = scope.spawn(|| {
            loopback::run(&loopback::Config::new(3), |node| {
                let listener = TcpListener::bind("127.0.0.1:0").unwrap();
                if node.rank().0 == 0 {
                    ready
                        .send(listener.local_addr().unwrap().to_string())
                        .unwrap();
                }
                let store =
                    Store::open(&node, &graph, &StoreConfig::default(), Clock::System).unwrap();
                serve(&store, &graph, &listener).unwrap()
            })
            .unwrap()
        });
        let zero: String = address.recv().unwrap();
        // Whatever fails, the job is stopped, so the test ends.
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let Response::Info(info) = call(&zero, &Request::Info).unwrap() else {
                panic!("not an info")
            };
            assert_eq!((info.nodes, info.vertices), (3, graph.num_vertices()));
            let on = |rank: usize| info.addresses[rank].as_str();

            // A Get away from the home: the key's bucket and the value, both READ.
            let get = |rank: usize| match call(
                on(rank),
                &Request::Get {
                    key: key.into(),
                    limit: u64::MAX,
                },
            )
            .unwrap()
            {
                Response::Get(reply) => reply,
                other => panic!("{other:?}"),
            };
            let away = get(1);
            assert_eq!(away.neighbours, wide(graph.neighbors(key)));
            assert_eq!((away.placed.home, away.placed.holder), (2, 2));
            assert_eq!((away.placed.cost.node, away.placed.cost.one_sided), (1, 2));
            assert_eq!(get(2).placed.cost.one_sided, 0, "at the home, all local");

            // Node 0 takes the value (at most five operations); it then reads it
            // without a remote operation, and node 1 still reads it right.
            let Response::Move(moved) = call(on(0), &Request::Move { key: key.into() }).unwrap()
            else {
                panic!("not a move")
            };
            assert_eq!(moved.holder, 0);
            assert!((1..=5).contains(&moved.cost.one_sided), "{moved:?}");
            assert_eq!(get(0).placed.cost.one_sided, 0);
            assert_eq!(get(1).placed.holder, 0);

            // A Put from node 1 is forwarded to the home and on to node 0.
            let Response::Put(put) = call(
                on(1),
                &Request::Put {
                    key: key.into(),
                    target: 33,
                    weight: None,
                },
            )
            .unwrap() else {
                panic!("not a put")
            };
            assert_eq!(put.holder, 0);
            let mut want = wide(graph.neighbors(key));
            want.push(33);
            assert_eq!(get(2).neighbours, want);

            // The two-hop query, against the graph.
            let Response::Traverse(hops) = call(
                on(2),
                &Request::Traverse {
                    start: 0,
                    neighbours: 3,
                },
            )
            .unwrap() else {
                panic!("not a traversal")
            };
            let first = &graph.neighbors(0)[..3];
            let mut reached = HashSet::new();
            let mut second = 0;
            for &v in first {
                let all = graph.neighbors(v);
                let list = &all[..3.min(all.len())];
                second += list.len() as u64;
                reached.extend(list.iter().copied());
            }
            assert_eq!((hops.first_hop, hops.second_hop), (3, second));
            assert_eq!(hops.distinct, reached.len() as u64);
            assert_eq!(hops.gets, 4);

            // A vertex the graph lacks is refused as an invalid argument
            // naming the request's parameter, and the node keeps serving.
            let unknown = call(on(1), &Request::Get { key: 34, limit: 1 }).unwrap_err();
            assert_eq!(
                chain(&unknown),
                "invalid argument: vertex: 34 is not in the graph (it has 34 vertices)"
            );
            let Response::Home(home) = call(&zero, &Request::Home { key: key.into() }).unwrap()
            else {
                panic!("not a home")
            };
            assert_eq!(home, 2);
            let far = call(&zero, &Request::Home { key: 1 << 40 }).unwrap_err();
            assert!(
                chain(&far).contains("vertex: 1099511627776 is not"),
                "{far:?}"
            );
            let bad_target = call(
                on(1),
                &Request::Put {
                    key: key.into(),
                    target: 99,
                    weight: None,
                },
            )
            .unwrap_err();
            assert!(
                chain(&bad_target).contains("target: 99 is not"),
                "{bad_target:?}"
            );
            // A weight: refused by the node (an unweighted graph), or by the
            // client (JSON cannot carry NaN).
            for (weight, says) in [
                (2.0, "the graph is unweighted"),
                (f32::NAN, "is not a weight"),
            ] {
                let request = Request::Put {
                    key: key.into(),
                    target: 3,
                    weight: Some(weight),
                };
                let refused = call(on(1), &request).unwrap_err();
                assert!(format!("{refused:?}").contains(says), "{refused:?}");
            }
            // Routed: whichever node a client asks runs the request on the
            // node named, or by default at the vertex's home, relaying it
            // there, over the client's one connection.
            let mut one = Client::connect(on(0)).unwrap();
            let routed = |one: &mut Client, to: Option<u32>| match one
                .call_on(
                    to,
                    Request::Get {
                        key: key.into(),
                        limit: u64::MAX,
                    },
                )
                .unwrap()
            {
                Response::Get(reply) => reply.placed.cost,
                other => panic!("{other:?}"),
            };
            // The value is on node 0 by now (moved above): its home reads
            // it remotely, node 0 locally.
            let at_home = routed(&mut one, None);
            assert_eq!((at_home.node, at_home.one_sided), (2, 1), "{at_home:?}");
            assert_eq!(routed(&mut one, Some(1)).node, 1);
            let on_0 = routed(&mut one, Some(0));
            assert_eq!((on_0.node, on_0.one_sided), (0, 0), "{on_0:?}");
            let Response::Traverse(hops) = one
                .call_on(
                    None,
                    Request::Traverse {
                        start: 0,
                        neighbours: 3,
                    },
                )
                .unwrap()
            else {
                panic!("not a traversal")
            };
            assert_eq!(hops.cost.node, placement.home_node(0));
            let nowhere = one
                .call_on(Some(3), Request::Get { key: 0, limit: 1 })
                .unwrap_err();
            assert_eq!(
                chain(&nowhere),
                "invalid argument: on: node 3 is not in the job (it has 3 nodes)"
            );
            let unknown = one
                .call_on(None, Request::Get { key: 34, limit: 1 })
                .unwrap_err();
            assert!(chain(&unknown).contains("vertex: 34 is not"), "{unknown:?}");
            let mut raw = TcpStream::connect(on(1)).unwrap();
            raw.write_all(b"{\"get\": 3}\n").unwrap();
            let mut line = String::new();
            BufReader::new(&raw).read_line(&mut line).unwrap();
            assert!(line.contains("not a request"), "{line}");
        }));
        if let Err(panic) = checked {
            let _ = call(&zero, &Request::Stop);
            std::panic::resume_unwind(panic);
        }
        // Stop at any node (here node 1, which asks node 0) stops the job.
        let Response::Info(info) = call(&zero, &Request::Info).unwrap() else {
            panic!("not an info")
        };
        let stopped = call(&info.addresses[1], &Request::Stop);
        assert_eq!(stopped.unwrap(), Response::Stopped);
        assert_eq!(job.join().unwrap().len(), 3);
        let refused = Client::connect(&zero).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("is `quiver kv serve` running?"),
            "{refused}"
        );
    });
}
