//! DIDO's per-vertex partition tree (paper §5.2.2, Fig. 6), over the
//! cluster's servers.
//!
//! The root is the vertex's home `S_v`; a node's left child is the same
//! server, its right child the next server not yet in the tree, handed
//! out round-robin from `S_v`, level by level and left to right. Positions
//! are offsets from `S_v`: node `(d, p)` holds offset `2^(d-1) + p/2` when
//! `p` is odd (a new one) and its parent's when even, so the tree is the
//! same for every vertex up to the rotation by `S_v`, and a pure function
//! of `k`. With `k` not a power of two the last level lacks the right
//! children whose offset would reach `k`.
//!
//! A partition at node `N` holds exactly the edges whose routing offset is
//! in `N`'s subtree; a split keeps the left child's edges and sends the
//! right child's away. DIDO routes an edge by its destination's virtual
//! node, so a split moves edges toward their destinations; GIGA+ routes by
//! a hash of the destination, which halves a partition evenly but keeps no
//! locality. [`SplitState`] (the expanded nodes, `X(v)` in the digest) is
//! all a client needs to find the partition of any edge.

use serde::{Deserialize, Serialize};

/// The largest number of servers a tree spans: `X(v)` is a `u128` of
/// heap-ordered nodes, 127 of them for 64 servers.
pub const MAX_SERVERS: u32 = 64;

/// A node of the tree: depth from the root and position from the left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Node {
    /// Depth, the root at 0.
    pub depth: u32,
    /// Position within the level, `0..2^depth`.
    pub pos: u32,
}

impl Node {
    /// The root.
    pub const ROOT: Node = Node { depth: 0, pos: 0 };

    /// Heap-order index: `2^depth - 1 + pos`.
    pub fn index(self) -> u32 {
        (1 << self.depth) - 1 + self.pos
    }

    /// The node with heap-order index `i`.
    pub fn from_index(i: u32) -> Node {
        let depth = 31 - (i + 1).leading_zeros();
        Node {
            depth,
            pos: i + 1 - (1 << depth),
        }
    }

    fn left(self) -> Node {
        Node {
            depth: self.depth + 1,
            pos: 2 * self.pos,
        }
    }

    fn right(self) -> Node {
        Node {
            depth: self.depth + 1,
            pos: 2 * self.pos + 1,
        }
    }
}

/// The tree's shape for `k` virtual nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tree {
    k: u32,
    max_depth: u32,
}

impl Tree {
    /// The tree over `k` servers, `1..=MAX_SERVERS`.
    pub fn new(k: u32) -> Tree {
        assert!(
            (1..=MAX_SERVERS).contains(&k),
            "a tree spans 1..={MAX_SERVERS} virtual nodes, not {k}"
        );
        Tree {
            k,
            max_depth: k.next_power_of_two().trailing_zeros(),
        }
    }

    /// The number of virtual nodes.
    pub fn k(self) -> u32 {
        self.k
    }

    /// The offset from `S_v` of the virtual node holding `node`.
    pub fn offset(self, node: Node) -> u32 {
        if node.depth == 0 {
            0
        } else if node.pos % 2 == 1 {
            (1 << (node.depth - 1)) + (node.pos >> 1)
        } else {
            self.offset(Node {
                depth: node.depth - 1,
                pos: node.pos >> 1,
            })
        }
    }

    /// The right child `node` splits into, if it can split.
    pub fn right_child(self, node: Node) -> Option<Node> {
        let right = node.right();
        (node.depth < self.max_depth && self.offset(right) < self.k).then_some(right)
    }

    /// The left child, which stays on `node`'s virtual node.
    pub fn left_child(self, node: Node) -> Node {
        node.left()
    }

    /// Where offset `o` first enters the tree: the root for 0, else as a
    /// right child.
    fn first_node(o: u32) -> Node {
        if o == 0 {
            Node::ROOT
        } else {
            let depth = 32 - o.leading_zeros();
            Node {
                depth,
                pos: 2 * (o - (1 << (depth - 1))) + 1,
            }
        }
    }

    /// Whether offset `o` lies in `node`'s subtree.
    pub fn in_subtree(self, o: u32, node: Node) -> bool {
        debug_assert!(o < self.k);
        let first = Tree::first_node(o);
        if first.depth <= node.depth {
            self.offset(node) == o
        } else {
            first.pos >> (first.depth - node.depth) == node.pos
        }
    }
}

/// `X(v)`: the nodes of one vertex's tree that have split. Only grows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SplitState(pub u128);

impl SplitState {
    /// Whether `node` has split.
    pub fn is_split(self, node: Node) -> bool {
        self.0 >> node.index() & 1 == 1
    }

    /// The state with `node` split too.
    pub fn with_split(self, node: Node) -> SplitState {
        SplitState(self.0 | 1 << node.index())
    }

    /// The state with every ancestor of `node` split: a partition at
    /// `node` exists only once each of them has.
    pub fn with_ancestors_of(self, node: Node) -> SplitState {
        let mut x = self;
        let mut n = node;
        while n.depth > 0 {
            n = Node {
                depth: n.depth - 1,
                pos: n.pos / 2,
            };
            x = x.with_split(n);
        }
        x
    }

    /// The partition (an unsplit node) holding edges routed by offset `o`.
    pub fn leaf_for(self, tree: Tree, o: u32) -> Node {
        let mut node = Node::ROOT;
        while self.is_split(node) {
            node = match tree.right_child(node) {
                Some(right) if tree.in_subtree(o, right) => right,
                _ => tree.left_child(node),
            };
        }
        node
    }

    /// Every partition: the unsplit nodes under split ones, left to right.
    pub fn leaves(self, tree: Tree) -> Vec<Node> {
        let mut out = Vec::new();
        let mut stack = vec![Node::ROOT];
        while let Some(node) = stack.pop() {
            if self.is_split(node) {
                if let Some(right) = tree.right_child(node) {
                    stack.push(right);
                }
                stack.push(tree.left_child(node));
            } else {
                out.push(node);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Servers as the paper numbers them, S1 the root.
    fn level(tree: Tree, depth: u32) -> Vec<Option<u32>> {
        (0..1 << depth)
            .map(|pos| {
                let node = Node { depth, pos };
                let parent_allows = depth == 0
                    || pos % 2 == 0
                    || tree
                        .right_child(Node {
                            depth: depth - 1,
                            pos: pos >> 1,
                        })
                        .is_some();
                parent_allows.then(|| tree.offset(node) + 1)
            })
            .collect()
    }

    #[test]
    fn reproduces_the_papers_tree_for_eight_servers() {
        let t = Tree::new(8);
        assert_eq!(level(t, 1), [Some(1), Some(2)]);
        assert_eq!(level(t, 2), [Some(1), Some(3), Some(2), Some(4)]);
        let s = |v: &[u32]| v.iter().map(|&x| Some(x)).collect::<Vec<_>>();
        assert_eq!(level(t, 3), s(&[1, 5, 3, 6, 2, 7, 4, 8]));
        // "the first time S2 is extended, S4 will be chosen ... again, S7".
        let s2 = Node { depth: 1, pos: 1 };
        assert_eq!(t.offset(t.right_child(s2).unwrap()) + 1, 4);
        assert_eq!(t.offset(t.right_child(t.left_child(s2)).unwrap()) + 1, 7);
        // subtree(S2 at depth 1) = {S2, S4, S7, S8}; S8 is in it.
        let sub: Vec<u32> = (0..8)
            .filter(|&o| t.in_subtree(o, s2))
            .map(|o| o + 1)
            .collect();
        assert_eq!(sub, [2, 4, 7, 8]);
        // The 32-server leaves the digest lists.
        let t32 = Tree::new(32);
        let leaves: Vec<u32> = (0..32)
            .map(|pos| t32.offset(Node { depth: 5, pos }) + 1)
            .collect();
        assert_eq!(
            leaves,
            [
                1, 17, 9, 18, 5, 19, 10, 20, 3, 21, 11, 22, 6, 23, 12, 24, 2, 25, 13, 26, 7, 27,
                14, 28, 4, 29, 15, 30, 8, 31, 16, 32
            ]
        );
        // k = 6: S2 and S4 cannot split at depth 2.
        assert_eq!(
            level(Tree::new(6), 3),
            [
                Some(1),
                Some(5),
                Some(3),
                Some(6),
                Some(2),
                None,
                Some(4),
                None
            ]
        );
    }

    proptest! {
        /// Invariants 11 and 13: every virtual node enters once, children
        /// partition their parent's subtree, a split-out leaf's subtree is
        /// itself alone.
        #[test]
        fn children_partition_the_parents_subtree(k in 1u32..=MAX_SERVERS) {
            let t = Tree::new(k);
            let mut entered = vec![0u32; k as usize];
            let mut stack = vec![Node::ROOT];
            while let Some(node) = stack.pop() {
                let sub: Vec<u32> = (0..k).filter(|&o| t.in_subtree(o, node)).collect();
                prop_assert!(sub.contains(&t.offset(node)));
                if node.depth == 0 || node.pos % 2 == 1 {
                    entered[t.offset(node) as usize] += 1;
                }
                match t.right_child(node) {
                    Some(right) => {
                        let left = t.left_child(node);
                        for &o in &sub {
                            prop_assert!(t.in_subtree(o, left) != t.in_subtree(o, right), "offset {} under {:?}", o, node);
                        }
                        stack.push(left);
                        stack.push(right);
                    }
                    None => {
                        // Its left descendants' right children would have
                        // larger offsets still: it holds its own alone.
                        prop_assert_eq!(sub, vec![t.offset(node)]);
                    }
                }
            }
            prop_assert!(entered.iter().all(|&n| n == 1), "{:?}", entered);
        }

        /// Invariants 14–15: after any splits, every offset has exactly one
        /// leaf, which contains it, and an offset at a leaf that cannot
        /// split further is that leaf's own virtual node.
        #[test]
        fn every_offset_finds_exactly_one_leaf(k in 1u32..=MAX_SERVERS, splits in prop::collection::vec(0u32..64, 0..40)) {
            let t = Tree::new(k);
            let mut x = SplitState::default();
            for o in splits {
                let leaf = x.leaf_for(t, o % k);
                if t.right_child(leaf).is_some() {
                    x = x.with_split(leaf);
                }
            }
            let leaves = x.leaves(t);
            for o in 0..k {
                let leaf = x.leaf_for(t, o);
                prop_assert!(t.in_subtree(o, leaf));
                prop_assert_eq!(leaves.iter().filter(|&&n| t.in_subtree(o, n)).count(), 1);
                if t.right_child(leaf).is_none() {
                    prop_assert_eq!(t.offset(leaf), o);
                }
            }
            // Invariant 13: a virtual node holds at most one partition.
            let mut offsets: Vec<u32> = leaves.iter().map(|&n| t.offset(n)).collect();
            offsets.sort_unstable();
            let before = offsets.len();
            offsets.dedup();
            prop_assert_eq!(before, offsets.len());
        }
    }

    #[test]
    fn a_nodes_ancestors_are_its_path_from_the_root() {
        let t = Tree::new(8);
        let node = Node { depth: 3, pos: 5 };
        let x = SplitState::default().with_ancestors_of(node);
        assert_eq!(x.leaf_for(t, t.offset(node)), node);
        assert_eq!(x.leaves(t).len(), 4);
    }

    #[test]
    fn heap_index_round_trips() {
        for i in 0..127 {
            assert_eq!(Node::from_index(i).index(), i);
        }
    }
}
