//! A node's death, as the survivors see it (Pragh's "Fault tolerance"):
//! the leak scan, which finds the blocks of this node's value region that
//! no address word names and no reclaim list holds, and recovery, which
//! puts back the values a migration left unreachable when its target died
//! between its CAS and its retirement, and reclaims every other orphan.
//!
//! The paper leaves values to the store's durable copy: the keys homed on
//! the dead node, and the values it held, are reloaded from it. This store
//! keeps none, so those are reported lost ([`Store::lost`]); recovery
//! saves every value a survivor still holds.

use serde::{Deserialize, Serialize};

use super::session::used_slots;
use super::{lock, Session, Store};
use crate::addr::Addr;
use crate::layout::{block_header, block_words};
use crate::Result;

/// Bytes of a key region read at once by the leak scan.
const SCAN_READ_BYTES: usize = 1 << 20;

/// A run of this node's value region that is allocated, named by no live
/// node's address word and waiting in no reclaim list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Orphan {
    /// Its first word in the value region.
    pub offset: u64,
    /// Its words.
    pub words: u64,
    /// The key its header names, valid or invalidated; `None` where the
    /// words do not hold a block.
    pub key: Option<u32>,
}

/// What one survivor's [`Store::recover`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recovery {
    /// Keys whose home named the dead node and whose value this node still
    /// held whole (a migration to the dead node had published its copy and
    /// not yet retired the old block): the home names this block again.
    pub relinked: Vec<u32>,
    /// Orphaned blocks invalidated and entered for reclamation: values of
    /// keys homed on the dead node, and anything else nothing named.
    pub reclaimed: u64,
    /// Words of those blocks.
    pub reclaimed_words: u64,
    /// Location-cache entries dropped: those naming the dead node, or a
    /// key homed on it.
    pub forgotten: u64,
}

impl Store {
    /// The leak scan: every run of this node's value region that is
    /// allocated but named by no address word of a node outside `dead`
    /// (read whole, one READ a megabyte) and waiting in no reclaim list.
    /// Runs are split into the blocks they hold, each with the key its
    /// header names.
    ///
    /// Only meaningful with no Put or migration in flight on any node:
    /// between a migration's CAS and its ring entry, the block it moved
    /// away is named by nothing (the paper's recovery suspends the
    /// workloads first).
    ///
    /// # Errors
    /// Verbs errors reading a key region.
    pub fn orphans(&self, dead: &[u32]) -> Result<Vec<Orphan>> {
        let mut known = self.named_blocks(dead)?;
        known.extend(self.waiting_blocks());
        known.sort_unstable();
        let mut orphans = Vec::new();
        let mut named = known.iter().peekable();
        for (start, words) in lock(&self.alloc).used_runs() {
            let end = start + words;
            let mut at = start;
            while at < end {
                let next = named.peek().map_or(end, |&&(offset, _)| offset.min(end));
                if next > at {
                    self.split_blocks(at, next, &mut orphans);
                    at = next;
                } else if let Some(&(offset, words)) = named.next() {
                    at = at.max(offset + words);
                }
            }
        }
        Ok(orphans)
    }

    /// Recovery on a survivor once node `dead` died, with the workloads
    /// paused on every survivor (see [`Store::orphans`]): drops the
    /// location-cache entries that name the dead node or a key homed on
    /// it, then takes every orphaned block of this node's value region.
    /// A block whose key is homed on a survivor that names the dead node
    /// as the value's holder is the value a migration left behind: its
    /// size word is restored (it may have been invalidated just before the
    /// target died) and the home's word CASed back to it. Every other
    /// orphan is invalidated and waits out the reclaim lease like a
    /// replaced block (an address cached before the death may still name
    /// it). Every survivor calls it; once all have, [`Store::lost`] lists
    /// the values the dead node took with it.
    ///
    /// # Errors
    /// Verbs errors reading or swapping a survivor's address word.
    pub fn recover(&self, dead: u32) -> Result<Recovery> {
        let forgotten = self.cache.forget_if(|key, word| {
            let home = self.home_node(key);
            home == dead || Addr::decode(word).is_some_and(|addr| addr.holder(home) == dead)
        });
        let mut recovery = Recovery {
            forgotten,
            ..Recovery::default()
        };
        let mut session = self.session();
        for orphan in self.orphans(&[dead])? {
            if let Some(key) = orphan.key {
                if self.relink(&mut session, &orphan, key, dead)? {
                    recovery.relinked.push(key);
                    continue;
                }
            }
            self.region
                .store(self.byte(self.layout.value(orphan.offset)), 0);
            lock(&self.reclaim).wait(orphan.offset, orphan.words, self.clock.now_ns());
            recovery.reclaimed += 1;
            recovery.reclaimed_words += orphan.words;
        }
        Ok(recovery)
    }

    /// Makes `key`'s home name the orphaned block if the home is not
    /// `dead` and names `dead` as the value's holder: restores the
    /// block's size word, then CASes the home's word. Returns whether it
    /// won.
    fn relink(
        &self,
        session: &mut Session<'_>,
        orphan: &Orphan,
        key: u32,
        dead: u32,
    ) -> Result<bool> {
        let home = self.home_node(key);
        if home == dead {
            return Ok(false);
        }
        let location = session.locate(key, false)?;
        if Addr::decode(location.word).is_none_or(|addr| addr.holder(home) != dead) {
            return Ok(false);
        }
        let Ok(mine) =
            Addr::at(home, self.rank, orphan.words, orphan.offset).and_then(Addr::encode)
        else {
            return Ok(false);
        };
        self.region
            .store(self.byte(self.layout.value(orphan.offset)), orphan.words);
        if session.compare_swap(home, location.slot, location.word, mine)? != location.word {
            return Ok(false);
        }
        self.published(key, home, location.slot, mine);
        Ok(true)
    }

    /// The keys homed here whose address word names node `dead` as the
    /// value's holder: once every survivor has run [`Store::recover`],
    /// the values that went with it (a Get of one fails, naming the node).
    pub fn lost(&self, dead: u32) -> Vec<u32> {
        let mut bytes = vec![0; self.byte(self.layout.key_bytes())];
        self.region.read(0, &mut bytes);
        used_slots(&bytes)
            .filter(|&(_, key, word)| {
                self.home_node(key) == self.rank
                    && Addr::decode(word).is_some_and(|addr| addr.holder(self.rank) == dead)
            })
            .map(|(_, key, _)| key)
            .collect()
    }

    /// The blocks of this node's value region that the key regions of the
    /// nodes outside `dead` name: (offset, words) each.
    fn named_blocks(&self, dead: &[u32]) -> Result<Vec<(u64, u64)>> {
        let mut named = Vec::new();
        let mut session = self.session();
        let key_bytes = self.layout.key_bytes();
        for node in (0..self.node.size()).filter(|node| !dead.contains(node)) {
            let mut offset = 0;
            while offset < key_bytes {
                let len = SCAN_READ_BYTES.min(self.byte(key_bytes - offset));
                let bytes = if node == self.rank {
                    let mut bytes = vec![0; len];
                    self.region.read(self.byte(offset), &mut bytes);
                    bytes
                } else {
                    session.read(node, offset, len)?
                };
                named.extend(
                    used_slots(&bytes)
                        .filter_map(|(_, _, word)| Addr::decode(word))
                        .filter(|addr| addr.holder(node) == self.rank)
                        .map(|addr| (addr.offset(), addr.size())),
                );
                offset += len as u64;
            }
        }
        Ok(named)
    }

    /// Splits the orphaned run of words `start..end` into the blocks it
    /// holds (a valid or invalidated size word, then the key and count its
    /// words fit), and the rest, if any, into one orphan with no key.
    fn split_blocks(&self, start: u64, end: u64, orphans: &mut Vec<Orphan>) {
        let load = |at: u64| self.region.load(self.byte(self.layout.value(at)));
        let mut at = start;
        while at < end {
            let block = (at + 1 < end).then(|| {
                let (key, count) = block_header(load(at + 1));
                (key, block_words(count, self.weighted))
            });
            match block {
                Some((key, words))
                    if key < self.vertices
                        && at + words <= end
                        && (load(at) == words || load(at) == 0) =>
                {
                    orphans.push(Orphan {
                        offset: at,
                        words,
                        key: Some(key),
                    });
                    at += words;
                }
                _ => {
                    orphans.push(Orphan {
                        offset: at,
                        words: end - at,
                        key: None,
                    });
                    at = end;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use quiver_csr::testing::karate;
    use quiver_verbs::loopback;

    use super::*;
    use crate::{Clock, StoreConfig};

    /// The node that dies.
    const DEAD: u32 = 3;

    /// Node 3 dies in the middle of two migrations: one of a value homed
    /// and held on node 0, between its CAS and its invalidation, and one
    /// of a value node 2 had taken from its home, node 1, between the
    /// invalidation and the ring entry. Before it died it completed a
    /// migration of another value of node 0's (which goes with it), and
    /// node 1 had taken a value homed on node 3 (which goes with its key).
    /// The leak scan finds exactly the three orphaned blocks; recovery
    /// puts the two half-migrated values back, readable from every
    /// survivor; once the leases have run out every survivor's value room
    /// holds exactly the values its survivors' homes name.
    #[test]
    fn a_node_killed_between_cas_and_retirement_loses_no_value_and_leaks_nothing() {
        let graph = karate(true);
        let config = StoreConfig {
            cache_lease: Duration::from_nanos(50),
            reclaim_lease: Duration::from_nanos(100),
            value_headroom: 1 << 16,
            ..StoreConfig::default()
        };
        let clock = Clock::manual();
        let graph = &graph;
        loopback::run(&loopback::Config::new(4), |node| {
            let store = Store::open(&node, graph, &config, clock.clone()).unwrap();
            let placement = store.placement();
            let homed_on = |rank: u32| {
                (0..graph.num_vertices())
                    .filter(move |&v| placement.home_node(v) == rank && graph.degree(v) > 0)
            };
            let mut on_0 = homed_on(0);
            let (half_published, completed) = (on_0.next().unwrap(), on_0.next().unwrap());
            let half_retired = homed_on(1).next().unwrap();
            let homeless = homed_on(DEAD).next().unwrap();
            let mut session = store.session();
            match store.rank() {
                1 => assert!(session.migrate(homeless).unwrap() > 0),
                2 => assert!(session.migrate(half_retired).unwrap() > 0),
                _ => {}
            }
            node.barrier().unwrap();
            if store.rank() == DEAD {
                session.migrate(completed).unwrap();
                session
                    .publish(half_published)
                    .unwrap()
                    .expect("held on node 0");
                let published = session
                    .publish(half_retired)
                    .unwrap()
                    .expect("held on node 2");
                let invalidation = session.invalidation(published.source, published.addr, 0);
                session.post_all(vec![invalidation]).unwrap();
                // Its memory goes with it: later operations on it fail.
                drop(session);
                drop(store);
                // Its node still meets the survivors' six barriers, which
                // stand in for the failure detector that tells them.
                for _ in 0..6 {
                    node.barrier().unwrap();
                }
                return;
            }
            node.barrier().unwrap();
            let want = |v: u32| graph.neighbors(v).to_vec();
            assert!(
                session.get(half_published, u64::MAX).is_err(),
                "its value is on the dead node"
            );
            let expected = match store.rank() {
                0 => vec![half_published],
                1 => vec![homeless],
                _ => vec![half_retired],
            };
            let found: Vec<_> = store
                .orphans(&[DEAD])
                .unwrap()
                .iter()
                .map(|o| o.key)
                .collect();
            assert_eq!(found, expected.iter().map(|&k| Some(k)).collect::<Vec<_>>());
            node.barrier().unwrap();
            let recovery = store.recover(DEAD).unwrap();
            let relinked = match store.rank() {
                1 => vec![],
                _ => expected,
            };
            assert_eq!(recovery.relinked, relinked);
            assert_eq!(recovery.reclaimed, u64::from(store.rank() == 1));
            node.barrier().unwrap();
            assert_eq!(
                store.lost(DEAD),
                if store.rank() == 0 {
                    vec![completed]
                } else {
                    vec![]
                }
            );
            assert!(session.get(completed, u64::MAX).is_err());
            let alive = (0..graph.num_vertices())
                .filter(|&v| placement.home_node(v) != DEAD && v != completed);
            for v in alive.clone() {
                assert_eq!(session.get(v, u64::MAX).unwrap().ids, want(v), "vertex {v}");
            }
            assert_eq!(store.orphans(&[DEAD]).unwrap(), vec![]);
            node.barrier().unwrap();
            if store.rank() == 0 {
                clock.advance(101);
            }
            node.barrier().unwrap();
            store.reclaim();
            let held: u64 = alive
                .map(|v| (placement.home_node(v), session.address(v).unwrap()))
                .filter(|&(home, addr)| addr.holder(home) == store.rank())
                .map(|(_, addr)| addr.size())
                .sum();
            assert_eq!(store.used_words(), held);
            node.barrier().unwrap();
        })
        .unwrap();
    }
}
