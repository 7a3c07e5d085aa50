//! A Put's update of an adjacency list ([`Update`]) and what it does to
//! the list: the store applies it where the value is held, and a forwarded
//! Put carries it to that node ([`crate::message`]).

use serde::{Deserialize, Serialize};

use crate::layout::Edges;
use crate::{Error, Result};

/// A Put's update of an adjacency list.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Update {
    /// Appends an edge to `target` (of weight 1 in a weighted graph, the
    /// weight `.qcsr` gives an unweighted edge).
    AddEdge(u32),
    /// Points edge `index` (counted modulo the degree) at `target`
    /// instead, keeping its weight; on a vertex without edges, appends one.
    SetEdge {
        /// Which edge.
        index: u32,
        /// Its new target.
        target: u32,
    },
    /// Appends an edge to `target` of weight `weight` (a weighted graph
    /// only).
    AddWeightedEdge {
        /// The new neighbour.
        target: u32,
        /// The edge's weight.
        weight: f32,
    },
    /// Sets the weight of edge `index` (counted modulo the degree; a
    /// weighted graph only, and a vertex with edges).
    SetWeight {
        /// Which edge.
        index: u32,
        /// Its new weight.
        weight: f32,
    },
}

impl Update {
    /// The weight it sets, which only a weighted graph's edges have.
    pub fn weight(self) -> Option<f32> {
        match self {
            Update::AddWeightedEdge { weight, .. } | Update::SetWeight { weight, .. } => {
                Some(weight)
            }
            Update::AddEdge(_) | Update::SetEdge { .. } => None,
        }
    }

    /// Applies the update to `edges`, weighted if it sets a weight. Fails
    /// only for a weight set on a vertex without edges.
    pub(crate) fn apply(self, key: u32, edges: &mut Edges) -> Result<()> {
        match self {
            Update::AddEdge(target) => edges.push(target, 1.0),
            Update::AddWeightedEdge { target, weight } => edges.push(target, weight),
            Update::SetEdge { index, target } => match edges.ids.len() {
                0 => edges.push(target, 1.0),
                n => edges.ids[index as usize % n] = target,
            },
            Update::SetWeight { index, weight } => {
                let n = edges.ids.len();
                let weights = edges.weights.as_mut().filter(|_| n > 0).ok_or_else(|| {
                    Error::invalid(
                        "update",
                        format!("vertex {key} has no edge whose weight to set"),
                    )
                })?;
                weights[index as usize % n] = weight;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unweighted(ids: &[u32]) -> Edges {
        Edges {
            ids: ids.to_vec(),
            weights: None,
        }
    }

    #[test]
    fn updates_append_or_repoint_one_edge() {
        let mut edges = unweighted(&[1, 2, 3]);
        Update::AddEdge(9).apply(0, &mut edges).unwrap();
        assert_eq!(edges, unweighted(&[1, 2, 3, 9]));
        Update::SetEdge {
            index: 5,
            target: 7,
        }
        .apply(0, &mut edges)
        .unwrap();
        assert_eq!(
            edges,
            unweighted(&[1, 7, 3, 9]),
            "index 5 of 4 edges is edge 1"
        );
        let mut none = unweighted(&[]);
        Update::SetEdge {
            index: 3,
            target: 4,
        }
        .apply(0, &mut none)
        .unwrap();
        assert_eq!(none, unweighted(&[4]));
    }

    #[test]
    fn weighted_updates_keep_each_edge_with_its_weight() {
        let mut edges = Edges {
            ids: vec![1, 2],
            weights: Some(vec![0.5, 2.0]),
        };
        Update::AddEdge(9).apply(0, &mut edges).unwrap();
        let weight = 3.5;
        Update::AddWeightedEdge { target: 8, weight }
            .apply(0, &mut edges)
            .unwrap();
        Update::SetEdge {
            index: 1,
            target: 7,
        }
        .apply(0, &mut edges)
        .unwrap();
        Update::SetWeight {
            index: 6,
            weight: -1.0,
        }
        .apply(0, &mut edges)
        .unwrap();
        assert_eq!(edges.ids, [1, 7, 9, 8]);
        assert_eq!(
            edges.weights.unwrap(),
            [0.5, 2.0, -1.0, 3.5],
            "index 6 of 4 edges is edge 2"
        );
        let mut none = Edges {
            ids: Vec::new(),
            weights: Some(Vec::new()),
        };
        let set = Update::SetWeight {
            index: 0,
            weight: 1.0,
        };
        let err = set.apply(42, &mut none).unwrap_err();
        assert!(
            format!("{err:?}").contains("vertex 42 has no edge"),
            "{err:?}"
        );
    }
}
