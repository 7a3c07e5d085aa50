//! Walks as pools hold them: the packed word (in 32 bits when it fits),
//! plus an id in exact mode, plus the previous vertex for second-order
//! walks.

use quiver_walkstate::{ExactWalk, WalkWord};

/// A walk as pools hold it: the packed word, plus an id in exact mode.
pub(super) trait PooledWalk: WalkWord + Copy {
    fn make(word: u64, id: u64) -> Self;
    fn id(&self) -> Option<u64>;
    fn with_word(self, word: u64) -> Self;
    /// The vertex the walk came from, for second-order walks.
    fn prev(&self) -> Option<u32> {
        None
    }
    /// The same walk having come from `prev`.
    fn with_prev(self, _prev: Option<u32>) -> Self {
        self
    }
}

impl PooledWalk for u64 {
    fn make(word: u64, _id: u64) -> Self {
        word
    }
    fn id(&self) -> Option<u64> {
        None
    }
    fn with_word(self, word: u64) -> Self {
        word
    }
}

/// A compact walk whose layout fits 32 bits: one that carries no source
/// (see [`super::carries_source`]) on a graph and walk length that leave
/// its position and hop at most 32 bits.
impl PooledWalk for u32 {
    fn make(word: u64, _id: u64) -> Self {
        u32::try_from(word).expect("a 32-bit walk's layout fits 32 bits")
    }
    fn id(&self) -> Option<u64> {
        None
    }
    fn with_word(self, word: u64) -> Self {
        Self::make(word, 0)
    }
}

impl PooledWalk for ExactWalk {
    fn make(word: u64, id: u64) -> Self {
        ExactWalk { word, id }
    }
    fn id(&self) -> Option<u64> {
        Some(self.id)
    }
    fn with_word(self, word: u64) -> Self {
        ExactWalk { word, id: self.id }
    }
}

/// A Node2Vec walk: an exact walk that also remembers where it came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(super) struct SecondOrderWalk {
    pub(super) word: u64,
    pub(super) id: u64,
    /// The previous vertex, or `NO_PREV`.
    pub(super) prev: u32,
    pub(super) _pad: u32,
}

pub(super) const NO_PREV: u32 = u32::MAX;

impl WalkWord for SecondOrderWalk {
    fn word(&self) -> u64 {
        self.word
    }
}

impl PooledWalk for SecondOrderWalk {
    fn make(word: u64, id: u64) -> Self {
        SecondOrderWalk {
            word,
            id,
            prev: NO_PREV,
            _pad: 0,
        }
    }
    fn id(&self) -> Option<u64> {
        Some(self.id)
    }
    fn with_word(self, word: u64) -> Self {
        SecondOrderWalk { word, ..self }
    }
    fn prev(&self) -> Option<u32> {
        Some(self.prev).filter(|&p| p != NO_PREV)
    }
    fn with_prev(self, prev: Option<u32>) -> Self {
        SecondOrderWalk {
            prev: prev.unwrap_or(NO_PREV),
            ..self
        }
    }
}
