//! What a program gives the engine: the edges it reads, how its messages
//! combine, and its `signal`, `gather` and `reduce` (the paper's
//! `compute` and `reduce`).

use crate::frontier::Frontier;

/// The edges a program reads: out-edges, or every edge in both directions
/// (the graph taken as undirected).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Edges as stored.
    Out,
    /// Every edge in both directions.
    Both,
}

/// Which ways an algorithm moves values along a directed graph's edges,
/// which decides what a node holds of them: a push reads the owned
/// vertices' out-lists, a pull their transpose (the edges into them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Pushes only: the out-lists, and no transpose.
    Push,
    /// Pulls only: the transpose, and the out-lists leave memory once
    /// read (a node of several reads them at load, for which nodes need
    /// each vertex's state).
    Pull,
    /// Either, superstep by superstep: both.
    Both,
}

/// How messages to one vertex combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// Idempotent (a minimum): a mirror forwards each improvement at once.
    Min,
    /// A sum: a mirror accumulates and forwards once per superstep.
    Sum,
}

/// One vertex's edges.
#[derive(Clone, Copy, Debug)]
pub struct Edges<'a> {
    /// Neighbours.
    pub vertices: &'a [u32],
    /// The edges' weights, beside `vertices`, on weighted graphs.
    pub weights: Option<&'a [f32]>,
}

impl Edges<'_> {
    /// The `i`-th edge's weight (1 on an unweighted graph).
    #[inline]
    pub fn weight(&self, i: usize) -> f32 {
        self.weights.map_or(1.0, |w| w[i])
    }
}

/// A superstep's computation along edges, as messages: the paper's
/// `compute` (here `signal` for pushing and `gather` for pulling) and
/// `reduce`. Messages are `u64`s (a depth, a label, the bits of an `f64`).
pub trait EdgeProgram: Sync {
    /// The edges this program reads.
    fn side(&self) -> Side {
        Side::Out
    }

    /// How messages to one vertex combine.
    fn combine(&self) -> Combine {
        Combine::Min
    }

    /// Whether a changed vertex becomes active (default: yes). A program
    /// that runs on every vertex each superstep (PageRank) skips the
    /// bookkeeping.
    fn activates(&self) -> bool {
        true
    }

    /// The state an active vertex carries into its superstep (a distance,
    /// a label): what `signal` reads of its source. A task handed to
    /// another node carries it, so that node needs no copy of the source's
    /// value. Default: nothing.
    fn state(&self, _src: u32) -> u64 {
        0
    }

    /// The message that active `src`, carrying `state`, sends to `dst`
    /// along an edge of `weight`, if any.
    fn signal(&self, src: u32, state: u64, dst: u32, weight: f32) -> Option<u64>;

    /// Whether `dst` takes part in a pull superstep at all (default: yes).
    fn wants_pull(&self, _dst: u32) -> bool {
        true
    }

    /// Whether [`EdgeProgram::wants_pull`] turns false for good once a
    /// vertex has its value (BFS), so that pulls read fewer lists as the
    /// run goes on and a large frontier is cheaper pulled than pushed (see
    /// [`PUSH_BELOW`](crate::engine::PUSH_BELOW)); default: no, a pull reads every edge.
    fn pull_narrows(&self) -> bool {
        false
    }

    /// Pull: the message that owned `dst` gets from its incoming `edges`
    /// whose sources are in `active`, combined, if any. A source another
    /// node owns is in `active` when it is active there, and its state is
    /// what [`EdgeProgram::mirror`] was given this superstep.
    fn gather(&self, dst: u32, edges: Edges<'_>, active: &Frontier) -> Option<u64>;

    /// Pull: the `state` of `src`, active on the node that owns it, for
    /// the gathers of this node's masters (called before them, concurrently
    /// for different sources). Default: nothing, for a program whose gather
    /// reads no more of a source than that it is active.
    fn mirror(&self, _src: u32, _state: u64) {}

    /// Applies a message to `dst`'s value (master or mirror); returns
    /// whether the value changed.
    fn reduce(&self, dst: u32, message: u64) -> bool;

    /// Pull into a master this node owns: `message` is all that `dst`'s
    /// in-neighbours give it this superstep, and nothing else writes it
    /// (a pull sends no messages), so a program may store it without an
    /// atomic read-modify-write. Returns whether the value changed; by
    /// default it is `reduce`.
    fn assign(&self, dst: u32, message: u64) -> bool {
        self.reduce(dst, message)
    }

    /// A sum's mirror: its accumulated message, reset to empty.
    fn take(&self, _mirror: u32) -> u64 {
        unreachable!("only Combine::Sum programs forward mirrors at the end")
    }
}
