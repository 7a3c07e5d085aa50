//! Original vertex ids: the index that finds a vertex by the id it had in
//! the input, and the check that no two vertices share one.
//!
//! An id map holds the original id of each dense vertex, distinct but in any
//! order. A map in increasing order (what Graphalytics ingest writes) is its
//! own index: finding a vertex is a binary search of the map itself, with no
//! memory on top. Any other map gets a permutation, the vertices sorted by
//! original id (4 bytes a vertex). Either is built when the graph is made
//! or opened, because building it is also how distinctness is checked.

use rayon::prelude::*;

use crate::{Error, Result};

/// Checks an id map given for a graph of `num_vertices` (one id per
/// vertex, all distinct) and returns its index.
pub(crate) fn checked_index(ids: &[u64], num_vertices: u32) -> Result<IdIndex> {
    if ids.len() as u64 != u64::from(num_vertices) {
        return Err(Error::invalid(
            "ids",
            format!("{} original ids for {num_vertices} vertices", ids.len()),
        ));
    }
    IdIndex::build(ids).map_err(|shared| Error::invalid("ids", shared.to_string()))
}

/// Finds the dense vertex of an original id in an id map.
#[derive(Debug)]
pub(crate) enum IdIndex {
    /// The map is strictly increasing: search it directly.
    Sorted,
    /// The vertices in increasing order of their original ids.
    Permutation(Vec<u32>),
}

/// Two vertices of an id map with the same original id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SharedId {
    /// The original id.
    pub original: u64,
    /// The two vertices, the smaller first.
    pub vertices: (u32, u32),
}

impl std::fmt::Display for SharedId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "vertices {} and {} both have original id {}",
            self.vertices.0, self.vertices.1, self.original
        )
    }
}

impl IdIndex {
    /// Indexes `ids`, the original id of each vertex (at most `u32::MAX`
    /// of them, as vertex ids go), or names two vertices that share one.
    pub(crate) fn build(ids: &[u64]) -> Result<IdIndex, SharedId> {
        if ids.par_windows(2).all(|w| w[0] < w[1]) {
            return Ok(IdIndex::Sorted);
        }
        let mut order: Vec<u32> = (0..ids.len())
            .map(|v| u32::try_from(v).expect("an id map has at most u32::MAX entries"))
            .collect();
        order.par_sort_unstable_by_key(|&v| ids[vertex(v)]);
        match order
            .par_windows(2)
            .position_first(|w| ids[vertex(w[0])] == ids[vertex(w[1])])
        {
            None => Ok(IdIndex::Permutation(order)),
            Some(i) => {
                let (a, b) = (order[i], order[i + 1]);
                Err(SharedId {
                    original: ids[vertex(a)],
                    vertices: (a.min(b), a.max(b)),
                })
            }
        }
    }

    /// The vertex whose original id is `original` in `ids`, the map this
    /// index was built from.
    pub(crate) fn find(&self, ids: &[u64], original: u64) -> Option<u32> {
        let v = match self {
            IdIndex::Sorted => ids.binary_search(&original).ok()?,
            IdIndex::Permutation(order) => {
                let at = order
                    .binary_search_by_key(&original, |&v| ids[vertex(v)])
                    .ok()?;
                return Some(order[at]);
            }
        };
        Some(u32::try_from(v).expect("an id map has at most u32::MAX entries"))
    }

    /// Bytes the index holds in memory.
    pub(crate) fn memory_bytes(&self) -> u64 {
        match self {
            IdIndex::Sorted => 0,
            IdIndex::Permutation(order) => order.len() as u64 * 4,
        }
    }
}

fn vertex(v: u32) -> usize {
    crate::to_usize(u64::from(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_maps_are_their_own_index() {
        let ids = [3, 17, 40, u64::MAX];
        let index = IdIndex::build(&ids).unwrap();
        assert_eq!(index.memory_bytes(), 0);
        assert_eq!(index.find(&ids, 40), Some(2));
        assert_eq!(index.find(&ids, u64::MAX), Some(3));
        assert_eq!(index.find(&ids, 4), None);
    }

    #[test]
    fn other_maps_get_a_permutation() {
        let ids = [40, 3, u64::MAX, 17];
        let index = IdIndex::build(&ids).unwrap();
        assert_eq!(index.memory_bytes(), 16);
        for (v, &id) in ids.iter().enumerate() {
            assert_eq!(index.find(&ids, id), Some(u32::try_from(v).unwrap()));
        }
        assert_eq!(index.find(&ids, 0), None);
    }

    #[test]
    fn a_shared_id_names_both_vertices() {
        let err = IdIndex::build(&[9, 5, 7, 5]).unwrap_err();
        assert_eq!(
            err,
            SharedId {
                original: 5,
                vertices: (1, 3)
            }
        );
        assert_eq!(err.to_string(), "vertices 1 and 3 both have original id 5");
    }
}
