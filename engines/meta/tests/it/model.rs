//! The reference: every version of every attribute and edge in ordered
//! maps, read and traversed by the simplest code that can be right.

use std::collections::BTreeMap;

use proptest::prelude::*;
use quiver_meta::{Client, Filter, GTravel, Travel, Write};

/// Ids by type: each id keeps one type, as the server requires.
const IDS: [(&str, &str); 8] = [
    ("u0", "user"),
    ("u1", "user"),
    ("j0", "job"),
    ("j1", "job"),
    ("/f0", "file"),
    ("/f1", "file"),
    ("/f0/x", "file"),
    ("/f\0", "file"),
];
const RELATIONS: [&str; 4] = ["run", "write", "read", "has"];

#[derive(Clone, Debug)]
pub enum Op {
    Vertex(usize, u8, u8),
    DeleteVertex(usize),
    Edge(usize, usize, usize, u8),
    DeleteEdge(usize, usize, usize),
}

pub fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS.len();
    prop_oneof![
        3 => (id.clone(), 0u8..3, 0u8..3).prop_map(|(i, a, x)| Op::Vertex(i, a, x)),
        1 => id.clone().prop_map(Op::DeleteVertex),
        5 => (0..RELATIONS.len(), id.clone(), id.clone(), 0u8..3).prop_map(|(r, s, d, x)| Op::Edge(r, s, d, x)),
        1 => (0..RELATIONS.len(), id.clone(), id).prop_map(|(r, s, d)| Op::DeleteEdge(r, s, d)),
    ]
}

fn id(i: usize) -> Vec<u8> {
    IDS[i].0.as_bytes().to_vec()
}

impl Op {
    pub fn write(&self) -> Write {
        match *self {
            Op::Vertex(i, a, x) => Write::Vertex {
                id: id(i),
                vtype: IDS[i].1.into(),
                // "mode" is static for files; "a1", "a2" are user-defined.
                attrs: BTreeMap::from([(
                    if a == 0 {
                        "mode".into()
                    } else {
                        format!("a{a}")
                    },
                    vec![b'0' + x],
                )]),
            },
            Op::DeleteVertex(i) => Write::DeleteVertex { id: id(i) },
            Op::Edge(r, s, d, x) => Write::Edge {
                src: id(s),
                etype: RELATIONS[r].into(),
                dst: id(d),
                props: BTreeMap::from([("p".into(), vec![b'0' + x])]),
            },
            Op::DeleteEdge(r, s, d) => Write::DeleteEdge {
                src: id(s),
                etype: RELATIONS[r].into(),
                dst: id(d),
            },
        }
    }
}

type Attrs = BTreeMap<String, Vec<u8>>;
type Versions<T> = Vec<(u64, Option<T>)>;
type EdgeKey = (Vec<u8>, String, Vec<u8>);

/// What the graph held at each time.
#[derive(Default)]
pub struct Model {
    /// vertex -> versions of (type, attrs), `None` once deleted.
    vertices: BTreeMap<Vec<u8>, Versions<(String, Attrs)>>,
    /// (src, type, dst) -> versions of the properties, `None` for a delete.
    edges: BTreeMap<EdgeKey, Versions<Attrs>>,
}

fn reverse(etype: &str) -> &'static str {
    match etype {
        "run" => "wasRunBy",
        "write" => "wasWrittenBy",
        "read" => "wasReadBy",
        "has" => "belongsTo",
        other => panic!("no reverse for {other}"),
    }
}

impl Model {
    fn vertex(&self, v: &[u8], t: u64) -> Option<(String, Attrs)> {
        self.vertices
            .get(v)?
            .iter()
            .rev()
            .find(|(ts, _)| *ts <= t)?
            .1
            .clone()
    }

    fn edges(&self, v: &[u8], etype: Option<&str>, t: u64) -> Vec<(String, Vec<u8>, Attrs)> {
        self.edges
            .iter()
            .filter(|((src, ty, _), _)| src == v && etype.is_none_or(|e| e == ty))
            .filter_map(|((_, ty, dst), versions)| {
                let props = versions.iter().rev().find(|(ts, _)| *ts <= t)?.1.clone()?;
                Some((ty.clone(), dst.clone(), props))
            })
            .collect()
    }

    pub fn apply(&mut self, write: &Write, ts: u64) {
        match write {
            Write::Vertex { id, vtype, attrs } => {
                let mut state = self.vertex(id, ts).map(|s| s.1).unwrap_or_default();
                state.extend(attrs.clone());
                self.vertices
                    .entry(id.clone())
                    .or_default()
                    .push((ts, Some((vtype.clone(), state))));
            }
            Write::DeleteVertex { id } => self
                .vertices
                .entry(id.clone())
                .or_default()
                .push((ts, None)),
            Write::Edge {
                src,
                etype,
                dst,
                props,
            } => {
                self.edges
                    .entry((src.clone(), etype.clone(), dst.clone()))
                    .or_default()
                    .push((ts, Some(props.clone())));
                let back = (dst.clone(), reverse(etype).to_string(), src.clone());
                self.edges
                    .entry(back)
                    .or_default()
                    .push((ts, Some(props.clone())));
            }
            Write::DeleteEdge { src, etype, dst } => {
                self.edges
                    .entry((src.clone(), etype.clone(), dst.clone()))
                    .or_default()
                    .push((ts, None));
                let back = (dst.clone(), reverse(etype).to_string(), src.clone());
                self.edges.entry(back).or_default().push((ts, None));
            }
        }
    }

    pub async fn check_reads(&self, client: &Client, t: u64) {
        for (i, (name, _)) in IDS.iter().enumerate() {
            let v = id(i);
            let got = client
                .read_vertex(&v, Some(t))
                .await
                .unwrap()
                .map(|s| (s.vtype, s.attrs));
            assert_eq!(got, self.vertex(&v, t), "vertex {name:?} as of {t}");
            for etype in [None, Some("write"), Some("wasWrittenBy")] {
                let got: Vec<(String, Vec<u8>, Attrs)> = client
                    .scan_edges(&v, etype, Some(t))
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|e| (e.etype, e.dst, e.props))
                    .collect();
                assert_eq!(
                    got,
                    self.edges(&v, etype, t),
                    "edges of {name:?} ({etype:?}) as of {t}"
                );
            }
        }
    }

    /// (marked steps, paths) as the cluster should return them.
    #[allow(clippy::type_complexity)]
    pub fn travel(
        &self,
        travel: &Travel,
        t: u64,
    ) -> (Vec<(usize, Vec<Vec<u8>>)>, Vec<Vec<Vec<u8>>>) {
        let mut frontier: Vec<(Vec<u8>, Vec<Vec<u8>>)> = travel
            .start
            .iter()
            .map(|v| (v.clone(), Vec::new()))
            .collect();
        let mut marked = Vec::new();
        let mut paths = Vec::new();
        let last = travel.hops.len();
        for step in 0..=last {
            frontier.sort();
            frontier.dedup_by(|a, b| a.0 == b.0 && (!travel.paths || a.1 == b.1));
            let level = &travel.levels[step];
            let passed: Vec<_> = frontier
                .drain(..)
                .filter(|(v, _)| {
                    self.vertex(v, t).is_some_and(|(vtype, attrs)| {
                        quiver_meta::travel::vertex_passes(&level.filters, &vtype, &attrs)
                    })
                })
                .collect();
            if level.mark || step == last {
                let mut ids: Vec<Vec<u8>> = passed.iter().map(|(v, _)| v.clone()).collect();
                ids.sort();
                ids.dedup();
                marked.push((step, ids));
                if travel.paths && step == last {
                    paths = passed
                        .iter()
                        .map(|(v, p)| {
                            let mut p = p.clone();
                            p.push(v.clone());
                            p
                        })
                        .collect();
                    paths.sort();
                }
            }
            let Some(hop) = travel.hops.get(step) else {
                break;
            };
            for (v, path) in &passed {
                for (_, dst, props) in self.edges(v, Some(&hop.etype), t) {
                    if quiver_meta::travel::edge_passes(&hop.filters, &props) {
                        let mut p = Vec::new();
                        if travel.paths {
                            p = path.clone();
                            p.push(v.clone());
                        }
                        frontier.push((dst, p));
                    }
                }
            }
            if frontier.is_empty() {
                marked.push((last, Vec::new()));
                break;
            }
        }
        (marked, paths)
    }
}

/// Traversals that cover every step kind.
pub fn travels() -> Vec<Travel> {
    vec![
        GTravel::v(["u0", "u1"]).e("run").v().e("write"),
        GTravel::v(["j0", "j1"])
            .e("write")
            .v()
            .va(Filter::eq("type", "file"))
            .rtm()
            .e("wasWrittenBy")
            .return_fp(),
        GTravel::v(["/f0", "/f1"])
            .e("wasReadBy")
            .v()
            .e("read")
            .repeat(2),
        GTravel::v(["j0"])
            .e("read")
            .ea(Filter::eq("p", "1"))
            .v()
            .e("has")
            .repeat(3)
            .return_fp(),
        Travel::parse(r#"v("/f0", "/f0/x", "u0").va(mode in ("0", "2")).e(belongsTo).v().e(has)"#)
            .unwrap(),
    ]
}
