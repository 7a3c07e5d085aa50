//! The programming model: an application says which walks to run
//! ([`WalkApp::spec`]), sees every position of every walk
//! ([`WalkApp::visit`]), and turns what it gathered into a result
//! ([`WalkApp::finish`]). Walks are moved on many threads; each thread
//! gathers into its own [`WalkApp::State`] and states are merged.

use serde::Serialize;

use crate::spec::WalkSpec;

/// The source fields of the visits [`WalkApp::visit_positions`] makes,
/// where no source is known.
pub const NO_SOURCE: u32 = u32::MAX;

/// One position of one walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Visit {
    /// The walk's id in exact mode; `None` in compact mode.
    pub walk: Option<u64>,
    /// The walk's source index (see [`crate::Starts::source_vertex`]).
    pub source: u64,
    /// The walk's source vertex.
    pub source_vertex: u32,
    /// Where the walk is.
    pub vertex: u32,
    /// Steps taken to get there (0 at the start).
    pub hop: u32,
}

/// A random-walk application.
pub trait WalkApp: Sync {
    /// What one thread gathers.
    type State: Send;
    /// The application's result.
    type Output: Serialize + Send;

    /// The walks to run.
    fn spec(&self) -> WalkSpec;

    /// Whether the app needs walk ids in [`Visit`] (forces exact mode).
    fn needs_walk_ids(&self) -> bool {
        false
    }

    /// Whether [`WalkApp::visit`] writes where the walk's id says, each
    /// walk to a place of its own (a corpus writes a row per walk; implies
    /// [`WalkApp::needs_walk_ids`]). First-order walks then move in
    /// interleaved lanes, which keep a walk's visits together, instead of
    /// hop by hop by partition, which scatters each hop's writes over the
    /// whole output: in memory, a DeepWalk corpus of 2 walks of 40 steps
    /// from every vertex was written 2x faster that way (Kronecker 18 and
    /// 20, 2 threads), while walks that only count moved faster by
    /// partition (exact raw walks on Kronecker 20: 1.4-2x).
    fn writes_by_walk(&self) -> bool {
        false
    }

    /// An empty state.
    fn new_state(&self) -> Self::State;

    /// Called once for every position of every walk, hop 0 included.
    fn visit(&self, state: &mut Self::State, visit: &Visit);

    /// Whether [`WalkApp::visit`] reads nothing of a visit but its
    /// `vertex` and `hop`. In compact mode, with no restarts, memory mode
    /// then moves walks as bare vertices (a quarter of the bytes to sort)
    /// and reports them through [`WalkApp::visit_positions`].
    fn reads_positions_only(&self) -> bool {
        false
    }

    /// The visits of walks standing at `vertices` after `hop` steps, for an
    /// app that [reads positions only](WalkApp::reads_positions_only).
    /// The default calls [`WalkApp::visit`] for each, with no walk id and
    /// [`NO_SOURCE`] for the source fields; an app that needs less (a
    /// count) can take the whole slice at once.
    fn visit_positions(&self, state: &mut Self::State, hop: u32, vertices: &[u32]) {
        for &vertex in vertices {
            let visit = Visit {
                walk: None,
                source: u64::from(NO_SOURCE),
                source_vertex: NO_SOURCE,
                vertex,
                hop,
            };
            self.visit(state, &visit);
        }
    }

    /// Folds `other` into `into`.
    fn merge(&self, into: &mut Self::State, other: Self::State);

    /// Turns the merged state into the result (writing any output file).
    fn finish(&self, state: Self::State) -> crate::Result<Self::Output>;
}
