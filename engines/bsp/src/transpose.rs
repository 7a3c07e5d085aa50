//! In-edges: the transpose of a CSR, for the reference implementations of
//! the algorithms that read in-neighbours (PageRank, WCC, CDLP, LCC), and
//! for LCC's pairs of neighbours on a directed graph.

use quiver_csr::Graph;

/// The in-edges of every vertex: `sources[offsets[v]..offsets[v + 1]]` are
/// the vertices with an edge to `v`, ascending.
#[derive(Clone, Debug, PartialEq)]
pub struct InEdges {
    offsets: Vec<u64>,
    sources: Vec<u32>,
}

impl InEdges {
    /// The transpose of `graph`, by counting sort (two passes over the
    /// edges; sources come out ascending because the passes go in source
    /// order).
    pub fn of(graph: &Graph) -> InEdges {
        let n = graph.num_vertices() as usize;
        let out_offsets = graph.offsets();
        let targets = graph.targets();
        let mut offsets = vec![0u64; n + 1];
        for &t in targets {
            offsets[t as usize + 1] += 1;
        }
        for v in 0..n {
            offsets[v + 1] += offsets[v];
        }
        let mut fill: Vec<u64> = offsets[..n].to_vec();
        let mut sources = vec![0u32; targets.len()];
        for u in 0..n {
            let edges = index(out_offsets[u])..index(out_offsets[u + 1]);
            for e in edges {
                let t = targets[e] as usize;
                let slot = index(fill[t]);
                sources[slot] = u32::try_from(u).expect("vertex ids fit u32");
                fill[t] += 1;
            }
        }
        InEdges { offsets, sources }
    }

    /// The vertices with an edge to `v`.
    pub fn sources(&self, v: u32) -> &[u32] {
        &self.sources[self.range(v)]
    }

    fn range(&self, v: u32) -> std::ops::Range<usize> {
        let v = v as usize;
        index(self.offsets[v])..index(self.offsets[v + 1])
    }
}

/// An edge offset as an index: edge counts fit memory, so `usize`.
fn index(offset: u64) -> usize {
    usize::try_from(offset).expect("edge offsets of an in-memory graph fit usize")
}
