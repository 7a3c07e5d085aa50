//! Staging allocation: which bytes of a queue pair's staging memory each
//! work request at the NIC owns. Pure bookkeeping; the memory itself is
//! [`super::resources::Staging`].

use super::STAGING_ALIGN;

/// A piece of a staging ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) len: usize,
    /// The ring's head before this allocation (to undo it).
    prev_head: usize,
    /// Bytes it took from the ring, including any skipped at the end.
    consumed: usize,
}

/// A ring allocator over a queue pair's staging memory. Pieces are freed in
/// the order they were allocated — the order of the queue pair's
/// completions — so a head and a fill level describe it.
#[derive(Debug)]
pub(super) struct Ring {
    capacity: usize,
    head: usize,
    used: usize,
}

impl Ring {
    /// An empty ring of `capacity` bytes (a multiple of [`STAGING_ALIGN`]).
    pub(super) fn new(capacity: usize) -> Self {
        assert!(capacity.is_multiple_of(STAGING_ALIGN) && capacity > 0);
        Self {
            capacity,
            head: 0,
            used: 0,
        }
    }

    fn tail(&self) -> usize {
        (self.head + self.capacity - self.used) % self.capacity
    }

    /// A piece of at least `len` bytes (at least one alignment unit),
    /// aligned to [`STAGING_ALIGN`]; `None` until enough older pieces are freed.
    pub(super) fn alloc(&mut self, len: usize) -> Option<Span> {
        let len = len.max(1).next_multiple_of(STAGING_ALIGN);
        if len > self.capacity - self.used {
            return None;
        }
        if self.used == 0 {
            self.head = 0;
        }
        let prev_head = self.head;
        let tail = self.tail();
        let (start, consumed) = if self.head >= tail {
            // Used: [tail, head); free: [head, capacity) and [0, tail).
            if self.capacity - self.head >= len {
                (self.head, len)
            } else if tail >= len {
                (0, self.capacity - self.head + len)
            } else {
                return None;
            }
        } else if tail - self.head >= len {
            (self.head, len)
        } else {
            return None;
        };
        self.head = (start + len) % self.capacity;
        self.used += consumed;
        Some(Span {
            start,
            len,
            prev_head,
            consumed,
        })
    }

    /// Frees the oldest piece.
    pub(super) fn free(&mut self, span: Span) {
        let tail = self.tail();
        assert!(
            span.start == tail || (span.start == 0 && span.consumed > span.len),
            "staging freed out of order: {span:?} while the oldest starts at {tail}"
        );
        self.used -= span.consumed;
    }

    /// Takes back the newest piece.
    pub(super) fn unalloc(&mut self, span: Span) {
        assert_eq!(
            self.head,
            (span.start + span.len) % self.capacity,
            "staging taken back out of order"
        );
        self.head = span.prev_head;
        self.used -= span.consumed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Allocations freed oldest first never overlap, stay in the ring
        /// and aligned, and an empty ring has all its room back.
        #[test]
        fn ring_pieces_never_overlap(ops in proptest::collection::vec((any::<bool>(), 1usize..3000), 1..200)) {
            let capacity = 8 * 1024;
            let mut ring = Ring::new(capacity);
            let mut live: VecDeque<Span> = VecDeque::new();
            for (alloc, len) in ops {
                if alloc || live.is_empty() {
                    if let Some(span) = ring.alloc(len) {
                        prop_assert!(span.start.is_multiple_of(STAGING_ALIGN) && span.len >= len);
                        prop_assert!(span.start + span.len <= capacity);
                        for other in &live {
                            prop_assert!(span.start + span.len <= other.start || other.start + other.len <= span.start,
                                "{span:?} overlaps {other:?}");
                        }
                        live.push_back(span);
                    } else {
                        let used: usize = live.iter().map(|s| s.len).sum();
                        prop_assert!(used + len > capacity / 2 || !live.is_empty(), "refused {len} bytes of an empty ring");
                    }
                } else {
                    ring.free(live.pop_front().expect("not empty"));
                }
            }
            while let Some(span) = live.pop_front() {
                ring.free(span);
            }
            prop_assert_eq!(ring.used, 0);
            prop_assert!(ring.alloc(capacity).is_some());
        }

    }

    #[test]
    fn rolled_back_pieces_return_their_room() {
        let mut ring = Ring::new(1024);
        let a = ring.alloc(600).expect("room");
        let b = ring.alloc(300).expect("room");
        assert_eq!((a.start, b.start), (0, 640));
        ring.free(a);
        let c = ring.alloc(500).expect("room before the oldest piece");
        assert_eq!(
            (c.start, c.consumed),
            (0, 64 + 512),
            "skips the end of the ring"
        );
        assert!(
            ring.alloc(129).is_none(),
            "only 128 bytes left between head and tail"
        );
        ring.unalloc(c);
        ring.unalloc(b);
        assert_eq!(ring.used, 0);
        assert_eq!(ring.alloc(1024).map(|span| span.start), Some(0));
    }
}
