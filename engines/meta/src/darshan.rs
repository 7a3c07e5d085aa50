//! A generator of Darshan-like HPC metadata (paper §6.2): users run jobs,
//! jobs contain processes, processes read and write files in directories,
//! every vertex and edge with a 128-byte attribute.
//!
//! Degrees follow the shape the paper reports for a year of Intrepid logs:
//! most vertices have fewer than ten edges, a few (popular input files,
//! busy users, shared directories) have thousands. Popularity is Zipf-like
//! (a file's chance of being read falls with its rank), ids are paths and
//! names as a real system's would be, and the same seed gives the same
//! graph.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::client::Write;

/// The size of every generated attribute value, as in the paper.
pub const ATTR_BYTES: usize = 128;

fn attr(rng: &mut Pcg64) -> Vec<u8> {
    (0..ATTR_BYTES)
        .map(|_| rng.random_range(b'a'..=b'z'))
        .collect()
}

fn attrs(rng: &mut Pcg64, key: &str) -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([(key.to_string(), attr(rng))])
}

/// Zipf-like rank in `0..n`: rank r with weight about 1/(r+1).
fn skewed(rng: &mut Pcg64, n: usize) -> usize {
    let x: f64 = rng.random();
    // In [0, n] by construction; the float-to-int cast saturates.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let r = ((n as f64 + 1.0).powf(x) - 1.0) as usize;
    r.min(n - 1)
}

/// Writes creating a Darshan-like graph of about `vertices` vertices, in an
/// order a real system would see them (a vertex before its edges).
pub fn generate(vertices: usize, seed: u64) -> Vec<Write> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let users = (vertices / 200).max(1);
    let dirs = (vertices / 100).max(1);
    let files = (vertices * 6 / 10).max(1);
    let mut out = Vec::new();
    let vertex = |rng: &mut Pcg64, id: String, vtype: &str| Write::Vertex {
        id: id.into_bytes(),
        vtype: vtype.into(),
        attrs: attrs(rng, "stat"),
    };
    let edge = |rng: &mut Pcg64, src: &str, etype: &str, dst: &str| Write::Edge {
        src: src.as_bytes().to_vec(),
        etype: etype.into(),
        dst: dst.as_bytes().to_vec(),
        props: attrs(rng, "env"),
    };
    for u in 0..users {
        out.push(vertex(&mut rng, format!("uid:{}", 1000 + u), "user"));
    }
    for d in 0..dirs {
        out.push(vertex(&mut rng, format!("/proj/d{d}"), "directory"));
    }
    let mut paths = Vec::with_capacity(files);
    for f in 0..files {
        let dir = format!("/proj/d{}", skewed(&mut rng, dirs));
        let path = format!("{dir}/f{f}.dat");
        out.push(vertex(&mut rng, path.clone(), "file"));
        out.push(edge(&mut rng, &dir, "has", &path));
        paths.push(path);
    }
    let mut made = users + dirs + files;
    let mut job = 0;
    while made < vertices {
        let jid = format!("job:{job}");
        let user = format!("uid:{}", 1000 + skewed(&mut rng, users));
        out.push(vertex(&mut rng, jid.clone(), "job"));
        out.push(edge(&mut rng, &user, "run", &jid));
        let exe = paths[skewed(&mut rng, files.min(50))].clone();
        made += 1;
        for p in 0..1 + skewed(&mut rng, 8) {
            let pid = format!("{jid}/rank:{p}");
            out.push(vertex(&mut rng, pid.clone(), "process"));
            out.push(edge(&mut rng, &jid, "contains", &pid));
            out.push(edge(&mut rng, &pid, "exe", &exe));
            for _ in 0..1 + skewed(&mut rng, 4) {
                let read = paths[skewed(&mut rng, files)].clone();
                out.push(edge(&mut rng, &pid, "read", &read));
            }
            let written = paths[rng.random_range(0..files)].clone();
            out.push(edge(&mut rng, &pid, "write", &written));
            made += 1;
        }
        job += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_graph_and_edges_follow_their_vertices() {
        let a = generate(2000, 7);
        assert_eq!(a, generate(2000, 7));
        let mut seen = std::collections::HashSet::new();
        let mut vertices = 0;
        for w in &a {
            match w {
                Write::Vertex { id, attrs, .. } => {
                    vertices += 1;
                    assert_eq!(attrs.values().next().map(Vec::len), Some(ATTR_BYTES));
                    seen.insert(id.clone());
                }
                Write::Edge { src, dst, .. } => assert!(seen.contains(src) && seen.contains(dst)),
                _ => unreachable!("the generator only creates"),
            }
        }
        assert!((2000..2010).contains(&vertices), "{vertices}");
    }
}
