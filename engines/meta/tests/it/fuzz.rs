//! Every RPC on every server, fed random bytes and random well-formed
//! requests: no server panics or stops answering, and every store still
//! holds only entries in its own format afterwards.

use std::sync::atomic::{AtomicUsize, Ordering};

use prost::bytes::{Buf, BufMut};
use quiver_meta::rpc::{self, TOKEN_HEADER};
use quiver_meta::store::Store;
use quiver_meta::Partitioner;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::Status;

use crate::{edge, vertex, Cluster};

/// The service's methods, as their paths name them.
const METHODS: [&str; 14] = [
    "Hello",
    "Write",
    "ReadVertex",
    "ScanEdges",
    "GetSplit",
    "Adopt",
    "MarkSplit",
    "Frontier",
    "Expand",
    "RunStep",
    "EndTravel",
    "Flow",
    "Progress",
    "Stats",
];

/// Panics anywhere in this process since the hook was set.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Sends and receives message bodies as the bytes they are.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        Ok(Some(bytes.to_vec()))
    }
}

/// Random bytes: empty, short, long, and the body of a valid request cut
/// short or with a byte changed.
fn random_body(rng: &mut Pcg64, valid: &[u8]) -> Vec<u8> {
    match rng.random_range(0..4) {
        0 => Vec::new(),
        1 => (0..rng.random_range(1..64)).map(|_| rng.random()).collect(),
        2 if !valid.is_empty() => valid[..rng.random_range(0..valid.len())].to_vec(),
        _ => {
            let mut body = valid.to_vec();
            if body.is_empty() {
                body = (0..300).map(|_| rng.random()).collect();
            }
            let i = rng.random_range(0..body.len());
            body[i] = rng.random();
            body
        }
    }
}

/// An id from the loaded ones, or a stranger: empty, binary, long.
fn id(rng: &mut Pcg64) -> Vec<u8> {
    match rng.random_range(0..8) {
        0 => Vec::new(),
        1 => (0..rng.random_range(1..20)).map(|_| rng.random()).collect(),
        2 => vec![b'x'; 5000],
        _ => format!("/f{}", rng.random_range(0..12)).into_bytes(),
    }
}

fn name(rng: &mut Pcg64) -> String {
    [
        "has",
        "read",
        "wasReadBy",
        "contains",
        "likes",
        "",
        "file",
        "job",
    ][rng.random_range(0..8)]
    .to_string()
}

fn big(rng: &mut Pcg64) -> u64 {
    [0, 1, u64::MAX, rng.random(), quiver_meta::clock::wall_ns()][rng.random_range(0..5)]
}

fn small(rng: &mut Pcg64) -> u32 {
    [0, 1, 2, 126, 127, u32::MAX, rng.random()][rng.random_range(0..7)]
}

fn op(rng: &mut Pcg64) -> rpc::Op {
    let props = |rng: &mut Pcg64| {
        (0..rng.random_range(0..3))
            .map(|_| (name(rng), id(rng)))
            .collect()
    };
    let op = match rng.random_range(0..3) {
        0 => rpc::op::Op::Vertex(rpc::VertexPut {
            id: id(rng),
            vtype: name(rng),
            attrs: props(rng),
        }),
        1 => rpc::op::Op::Edge(rpc::EdgePut {
            src: id(rng),
            etype: name(rng),
            dst: id(rng),
            props: props(rng),
            node: small(rng),
            remove: rng.random(),
            ts: big(rng),
        }),
        _ => rpc::op::Op::DeleteVertex(rpc::VertexDelete { id: id(rng) }),
    };
    rpc::Op { op: Some(op) }
}

fn entries(rng: &mut Pcg64) -> Vec<rpc::Entry> {
    (0..rng.random_range(0..4))
        .map(|_| rpc::Entry {
            id: id(rng),
            path: (0..rng.random_range(0..2)).map(|_| id(rng)).collect(),
        })
        .collect()
}

fn filters(rng: &mut Pcg64) -> Vec<rpc::Filter> {
    (0..rng.random_range(0..2))
        .map(|_| rpc::Filter {
            key: name(rng),
            test: match rng.random_range(0..4) {
                0 => None,
                1 => Some(rpc::filter::Test::Eq(id(rng))),
                2 => Some(rpc::filter::Test::Any(rpc::Values {
                    values: vec![id(rng)],
                })),
                _ => Some(rpc::filter::Test::Range(rpc::Range {
                    lo: id(rng),
                    hi: id(rng),
                })),
            },
        })
        .collect()
}

fn hop(rng: &mut Pcg64) -> Option<rpc::Hop> {
    rng.random::<bool>().then(|| rpc::Hop {
        etype: name(rng),
        edge_filters: filters(rng),
    })
}

/// A random request of the method `METHODS[m]`, encoded.
fn well_formed(rng: &mut Pcg64, m: usize) -> Vec<u8> {
    use prost::Message;
    let travel = rng.random_range(0..4);
    match METHODS[m] {
        "Hello" => rpc::HelloRequest {}.encode_to_vec(),
        "Write" => rpc::WriteRequest {
            session_ts: big(rng),
            ops: (0..rng.random_range(0..5)).map(|_| op(rng)).collect(),
            reverse: rng.random(),
        }
        .encode_to_vec(),
        "ReadVertex" => rpc::ReadVertexRequest {
            id: id(rng),
            as_of: big(rng),
            session_ts: big(rng),
        }
        .encode_to_vec(),
        "ScanEdges" => rpc::ScanEdgesRequest {
            src: id(rng),
            etype: name(rng),
            as_of: big(rng),
            session_ts: big(rng),
        }
        .encode_to_vec(),
        "GetSplit" => rpc::GetSplitRequest { id: id(rng) }.encode_to_vec(),
        "Adopt" => rpc::AdoptRequest {
            src: id(rng),
            node: small(rng),
            entries: (0..rng.random_range(0..3))
                .map(|_| rpc::RawEntry {
                    key: id(rng),
                    value: id(rng),
                })
                .collect(),
        }
        .encode_to_vec(),
        "MarkSplit" => rpc::MarkSplitRequest {
            src: id(rng),
            node: small(rng),
        }
        .encode_to_vec(),
        "Frontier" => rpc::FrontierRequest {
            travel,
            step: small(rng),
            entries: entries(rng),
        }
        .encode_to_vec(),
        "Expand" => rpc::ExpandRequest {
            travel,
            step: small(rng),
            hop: hop(rng),
            as_of: big(rng),
            entries: entries(rng),
            paths: rng.random(),
        }
        .encode_to_vec(),
        "RunStep" => rpc::RunStepRequest {
            travel,
            step: small(rng),
            as_of: big(rng),
            vertex_filters: filters(rng),
            hop: hop(rng),
            keep: rng.random(),
            paths: rng.random(),
            next_hop: hop(rng),
            prefetch: rng.random(),
        }
        .encode_to_vec(),
        "EndTravel" => rpc::EndTravelRequest { travel }.encode_to_vec(),
        "Flow" => rpc::FlowRequest {
            travel,
            step: small(rng),
            as_of: big(rng),
            paths: rng.random(),
            plan: (0..rng.random_range(0..3))
                .map(|_| rpc::StepSpec {
                    vertex_filters: filters(rng),
                    hop: hop(rng),
                    keep: rng.random(),
                })
                .collect(),
            entries: entries(rng),
            scan: rng.random(),
        }
        .encode_to_vec(),
        "Progress" => rpc::ProgressRequest { travel }.encode_to_vec(),
        "Stats" => rpc::StatsRequest {}.encode_to_vec(),
        other => unreachable!("{other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rpc_survives_random_bytes_and_random_requests() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::Relaxed);
        previous(info);
    }));
    let mut cluster = Cluster::start(2, Partitioner::Dido, 8, 4).await;
    let c = cluster.client.clone();
    // Files with edges enough to split, so splits and their states are
    // among what the requests meet.
    let mut writes: Vec<_> = (0..12).map(|i| vertex(&format!("/f{i}"), "file")).collect();
    for i in 0..12 {
        for j in 0..12 {
            writes.push(edge(&format!("/f{i}"), "has", &format!("/f{j}")));
        }
    }
    c.write(&writes).await.unwrap();

    let token = c.membership().token.clone();
    let mut rng = Pcg64::seed_from_u64(47);
    let mut answered = [0u64; 2];
    for addr in c.servers() {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .timeout(std::time::Duration::from_secs(20))
            .connect()
            .await
            .unwrap();
        let mut grpc = tonic::client::Grpc::new(channel);
        for round in 0..600 {
            let m = round % METHODS.len();
            let valid = well_formed(&mut rng, m);
            let (body, kind) = if round % 2 == 0 {
                (random_body(&mut rng, &valid), 0)
            } else {
                (valid, 1)
            };
            let mut req = tonic::Request::new(body);
            req.metadata_mut()
                .insert(TOKEN_HEADER, token.parse().unwrap());
            grpc.ready().await.unwrap();
            let path = PathAndQuery::try_from(format!("/quiver.meta.Meta/{}", METHODS[m])).unwrap();
            let reply = grpc.unary(req, path, RawCodec).await;
            if let Err(status) = &reply {
                // A refusal, never a crash: the transport still answers.
                assert_ne!(status.code(), tonic::Code::Unknown, "{status:?}");
            }
            answered[kind] += u64::from(reply.is_ok());
        }
    }
    // Both kinds reach the service: some random requests are served.
    assert!(answered[1] > 0, "{answered:?}");
    assert_eq!(PANICS.load(Ordering::Relaxed), 0, "a server panicked");
    // Every server still answers and the cluster still works.
    for peer in rpc::connect_lazy(c.membership()).unwrap() {
        peer.clone().hello(rpc::HelloRequest {}).await.unwrap();
    }
    c.write(&[vertex("/after", "file")]).await.unwrap();
    assert!(c.read_vertex(b"/after", None).await.unwrap().is_some());
    let configs = cluster.configs.clone();
    for i in 0..configs.len() {
        cluster.stop_server(i).await;
    }
    for config in &configs {
        let store = Store::open(&config.data, false).unwrap();
        let checked = store.check();
        let at = config.data.display();
        assert!(checked.is_ok(), "{at}: {checked:?}");
        // It read the entries the load wrote (each server has some).
        assert!(checked.is_ok_and(|entries| entries > 12), "{at}");
    }
    cluster.stop().await;
}
