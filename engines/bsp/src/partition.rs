//! RGraph's block partitioning (§3 of the paper): `P` chunks of consecutive
//! vertex ids, one per node, each owning its vertices' out-edges, balanced by
//! minimising Σ F(P_i) with
//!
//! ```text
//! F(P_i) = α · | |V_i| − |V|/P |  +  | |E_i| − |E|/P |,    α = ⌊|E|/|V|⌋
//! ```
//!
//! The start is Gemini's chunking (accumulate `out_degree(v) + 8·(P − 1)` in
//! id order, cut when the running sum reaches the remaining amount over the
//! remaining chunks); then neighbouring chunks move their shared boundary
//! to the position that minimises their two F values, found by trying every
//! position between their outer boundaries, until a sweep over all pairs
//! changes nothing.
//!
//! Decisions the paper leaves open:
//! - Gemini rounds boundaries to multiples of 4,096 vertices (for its NUMA
//!   bitmaps); we do not, so small graphs split as well as large ones.
//! - α is clamped to at least 1, so that vertices still count on graphs with
//!   fewer edges than vertices (⌊|E|/|V|⌋ = 0 there).
//! - The adjustment sweeps pairs left to right instead of starting from the
//!   node with the largest F: Σ F strictly decreases with every move, so it
//!   terminates, and the outcome does not depend on how ties between nodes
//!   are broken. A chunk keeps at least one vertex while it can.
//! - Each move is exhaustive over its range (the pair's cost is not unimodal
//!   in the boundary), O(1) per candidate through the offsets array.

use std::ops::Range;

/// Chunk boundaries: chunk `i` owns vertices `bounds[i]..bounds[i + 1]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    bounds: Vec<u32>,
}

/// At most this many sweeps of the adjustment: each sweep strictly lowers
/// Σ F or ends it, and on real graphs a few suffice; the cap bounds the
/// cost of adversarial degree sequences.
const MAX_SWEEPS: usize = 64;

impl Partition {
    /// RGraph's partition of a graph with CSR `offsets` (|V| + 1 entries)
    /// into `chunks` chunks, with the default α = max(1, ⌊|E|/|V|⌋).
    ///
    /// Panics if `chunks` is 0 (callers validate it as a parameter).
    pub fn rgraph(offsets: &[u64], chunks: u32) -> Partition {
        let alpha = default_alpha(offsets);
        let mut partition = Partition::gemini(offsets, chunks);
        partition.adjust(offsets, alpha);
        partition
    }

    /// Gemini's chunking without its 4,096-vertex rounding: chunk `i` ends
    /// where the running sum of `out_degree(v) + 8·(chunks − 1)` first
    /// reaches the remaining sum divided by the remaining chunks.
    pub fn gemini(offsets: &[u64], chunks: u32) -> Partition {
        assert!(chunks > 0, "a partition needs at least one chunk");
        let n = vertex_count(offsets);
        let alpha_g = 8 * u64::from(chunks - 1);
        let cost = |v: u32| offsets[v as usize] + alpha_g * u64::from(v);
        let mut bounds = vec![0u32];
        let mut start = 0u32;
        for i in 0..chunks - 1 {
            let remaining = cost(n) - cost(start);
            let share = remaining.div_ceil(u64::from(chunks - i));
            // The first end whose chunk reaches its share.
            let mut end = start;
            while end < n && cost(end) - cost(start) < share {
                end += 1;
            }
            bounds.push(end);
            start = end;
        }
        bounds.push(n);
        Partition { bounds }
    }

    /// A partition with the given boundaries: `bounds[0] == 0`,
    /// non-decreasing, and the last is |V|.
    pub fn from_bounds(bounds: Vec<u32>) -> Partition {
        assert!(
            bounds.len() >= 2 && bounds[0] == 0 && bounds.windows(2).all(|w| w[0] <= w[1]),
            "partition bounds must start at 0 and not decrease: {bounds:?}"
        );
        Partition { bounds }
    }

    /// Moves shared boundaries between neighbouring chunks until no move
    /// lowers F of the pair (see the module docs), with the given α.
    pub fn adjust(&mut self, offsets: &[u64], alpha: f64) {
        let chunks = self.len();
        if chunks < 2 {
            return;
        }
        let balance = Balance::new(offsets, chunks, alpha);
        for _ in 0..MAX_SWEEPS {
            let mut moved = false;
            for k in 0..chunks - 1 {
                let (lo, hi) = (self.bounds[k], self.bounds[k + 2]);
                let current = self.bounds[k + 1];
                let pair = |n: u32| balance.f(lo..n) + balance.f(n..hi);
                // Each chunk keeps a vertex while the pair has two.
                let candidates = if hi - lo >= 2 { lo + 1..hi } else { lo..hi + 1 };
                let mut best = (pair(current), current);
                for n in candidates {
                    let cost = pair(n);
                    if cost < best.0 - 1e-9 * best.0.abs().max(1.0) {
                        best = (cost, n);
                    }
                }
                if best.1 != current {
                    self.bounds[k + 1] = best.1;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
    }

    /// Σ F(P_i) of this partition under `offsets` and `alpha`.
    pub fn cost(&self, offsets: &[u64], alpha: f64) -> f64 {
        let balance = Balance::new(offsets, self.len(), alpha);
        (0..self.len()).map(|i| balance.f(self.range(i))).sum()
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Whether there are no chunks (never: a partition has at least one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The vertices of chunk `i`.
    pub fn range(&self, i: usize) -> Range<u32> {
        self.bounds[i]..self.bounds[i + 1]
    }

    /// The boundaries, `len() + 1` of them.
    pub fn bounds(&self) -> &[u32] {
        &self.bounds
    }

    /// The chunk that owns vertex `v` (a binary search). Panics if `v` is
    /// not below |V|.
    pub fn owner(&self, v: u32) -> usize {
        assert!(
            v < *self.bounds.last().expect("bounds are never empty"),
            "vertex {v} is beyond the last chunk"
        );
        self.bounds[1..].partition_point(|&end| end <= v)
    }

    /// The chunks that own the vertices of `sorted` (ascending ids), each
    /// once, ascending: a binary search per chunk met, so a list costs
    /// O(chunks · log len) however long it is.
    pub fn owners<'a>(&'a self, sorted: &'a [u32]) -> impl Iterator<Item = usize> + 'a {
        let mut rest = sorted;
        std::iter::from_fn(move || {
            let &first = rest.first()?;
            let chunk = self.owner(first);
            let end = self.bounds[chunk + 1];
            rest = &rest[rest.partition_point(|&u| u < end)..];
            Some(chunk)
        })
    }
}

/// α = max(1, ⌊|E|/|V|⌋), the paper's default with the clamp of the module
/// docs.
pub fn default_alpha(offsets: &[u64]) -> f64 {
    let n = u64::from(vertex_count(offsets)).max(1);
    let m = offsets.last().copied().unwrap_or(0);
    #[allow(clippy::cast_precision_loss)] // An integer far below 2^52.
    let alpha = (m / n).max(1) as f64;
    alpha
}

fn vertex_count(offsets: &[u64]) -> u32 {
    u32::try_from(offsets.len().saturating_sub(1)).expect("a CSR's vertex count fits u32")
}

/// F of any chunk in O(1) from the offsets.
struct Balance<'a> {
    offsets: &'a [u64],
    alpha: f64,
    avg_vertices: f64,
    avg_edges: f64,
}

#[allow(clippy::cast_precision_loss)] // Counts far below 2^52.
impl<'a> Balance<'a> {
    fn new(offsets: &'a [u64], chunks: usize, alpha: f64) -> Self {
        let n = offsets.len().saturating_sub(1) as f64;
        let m = offsets.last().copied().unwrap_or(0) as f64;
        Balance {
            offsets,
            alpha,
            avg_vertices: n / chunks as f64,
            avg_edges: m / chunks as f64,
        }
    }

    fn f(&self, chunk: Range<u32>) -> f64 {
        let vertices = f64::from(chunk.end - chunk.start);
        let edges = (self.offsets[chunk.end as usize] - self.offsets[chunk.start as usize]) as f64;
        self.alpha * (vertices - self.avg_vertices).abs() + (edges - self.avg_edges).abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets_of(degrees: &[u64]) -> Vec<u64> {
        std::iter::once(0)
            .chain(degrees.iter().scan(0, |sum, d| {
                *sum += d;
                Some(*sum)
            }))
            .collect()
    }

    /// The paper's worked example (Fig. 2(a)): 8 vertices, 14 edges, P = 3,
    /// α = 1.1, Gemini's start [0,2,4,8] with Σ F ≈ 10.27 ends at [0,2,6,8]
    /// with Σ F ≈ 6.27 (the degrees are the notes' reconstruction that
    /// reproduces every number the text states).
    #[test]
    fn the_papers_worked_example_ends_at_its_boundaries() {
        let offsets = offsets_of(&[3, 2, 1, 0, 0, 2, 2, 4]);
        let mut partition = Partition::from_bounds(vec![0, 2, 4, 8]);
        assert!((partition.cost(&offsets, 1.1) - 10.2667).abs() < 1e-3);
        partition.adjust(&offsets, 1.1);
        assert_eq!(partition.bounds(), &[0, 2, 6, 8]);
        assert!((partition.cost(&offsets, 1.1) - 6.2667).abs() < 1e-3);
    }

    #[test]
    fn owners_follow_the_bounds() {
        let partition = Partition::from_bounds(vec![0, 3, 3, 7]);
        let owners: Vec<usize> = (0..7).map(|v| partition.owner(v)).collect();
        assert_eq!(owners, [0, 0, 0, 2, 2, 2, 2]);
    }

    #[test]
    fn owners_of_a_sorted_list_are_each_chunk_met_once() {
        let partition = Partition::from_bounds(vec![0, 3, 3, 7, 10]);
        let owners = |list: &[u32]| partition.owners(list).collect::<Vec<_>>();
        assert_eq!(owners(&[]), Vec::<usize>::new());
        assert_eq!(owners(&[0, 1, 2, 2]), [0]);
        assert_eq!(owners(&[2, 3, 9]), [0, 2, 3]);
        assert_eq!(owners(&[6, 6, 7]), [2, 3]);
        // Against the owner of each member.
        let list: Vec<u32> = vec![0, 0, 4, 5, 8, 9, 9];
        let mut each: Vec<usize> = list.iter().map(|&v| partition.owner(v)).collect();
        each.dedup();
        assert_eq!(owners(&list), each);
    }

    #[test]
    fn alpha_is_at_least_one() {
        assert!((default_alpha(&offsets_of(&[0, 1, 0, 0])) - 1.0).abs() < f64::EPSILON);
        assert!((default_alpha(&offsets_of(&[9, 9, 9, 9])) - 9.0).abs() < f64::EPSILON);
    }
}
