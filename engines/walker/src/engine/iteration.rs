//! DrunkardMob's iteration-based baseline: each pass loads every block in
//! order, with no cache across passes, and moves each walk one step.

use std::sync::Arc;

use quiver_walkstate::WalkPools;

use super::budget::Budget;
use super::walks::PooledWalk;
use super::Engine;
use crate::app::WalkApp;
use crate::loaded::Executing;
use crate::Result;

impl<'a, A: WalkApp, W: PooledWalk> Engine<'a, A, W> {
    /// DrunkardMob: pass after pass, every block in order, one step each.
    pub(super) fn iterate(
        &mut self,
        pools: &mut WalkPools<W>,
        state: &mut A::State,
        budget: &Budget,
    ) -> Result<()> {
        for pass in 0..=u64::from(self.spec.length) {
            if pools.total() == 0 {
                break;
            }
            for b in 0..self.blocks.len() {
                let block = self.load(&[b])?.pop().expect("one block read");
                let bytes = block.memory_bytes();
                self.stats.hold(bytes);
                let exec = Executing::new(vec![Arc::clone(&block)]);
                // Only the walks waiting now: those moved back into this
                // block during the pass wait for the next one.
                let mut waiting = pools.count(b);
                while waiting > 0 {
                    let batch = budget
                        .batch_walks
                        .min(usize::try_from(waiting).unwrap_or(usize::MAX));
                    let walks = self.take_batch(pools, &[b], batch)?;
                    waiting -= walks.len() as u64;
                    let (due, later): (Vec<_>, Vec<_>) = walks
                        .into_iter()
                        .partition(|(w, _)| self.word.hop(w.word()) == pass);
                    self.file(pools, later)?;
                    self.advance_and_file(pools, state, &exec, due, true)?;
                }
                self.stats.release(bytes);
                // The next block is read into this one's buffers.
                drop(exec);
                self.spare.recycle(block);
            }
        }
        self.spare.clear();
        assert_eq!(pools.total(), 0, "every walk ends within its length");
        Ok(())
    }
}
