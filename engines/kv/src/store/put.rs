//! Put (Pragh §4.3): copy-on-write where the value is held, reached from
//! the key's home (check-and-forward). A Put at another node is sent to
//! the home as a message; the home runs it if it holds the value, or sends
//! it on to the holder, which replies to the node that first sent it.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use quiver_verbs::NodeRank;

use super::{lock, Session, Store};
use crate::addr::Addr;
use crate::layout::{decode_block, encode_block};
use crate::message::Message;
use crate::update::Update;
use crate::{Error, Result};

/// How a Put executed here ended.
pub(crate) enum PutOutcome {
    /// Committed.
    Done,
    /// The value is held by this node: the Put must run there.
    Forward(u32),
}

/// The replies to this node's forwarded Puts, by request id.
#[derive(Debug, Default)]
pub(super) struct Replies {
    done: Mutex<HashMap<u64, std::result::Result<(), String>>>,
    arrived: Condvar,
}

impl Store {
    /// Waits for the reply to forwarded Put `request`.
    fn await_reply(&self, request: u64, to: u32) -> Result<()> {
        let deadline = Instant::now() + self.node.timeout();
        let mut done = lock(&self.replies.done);
        loop {
            if let Some(result) = done.remove(&request) {
                return result.map_err(Error::Remote);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Stalled(format!(
                    "node {to} did not answer a forwarded put within {:?}",
                    self.node.timeout()
                )));
            }
            done = self
                .replies
                .arrived
                .wait_timeout(done, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Records the reply to forwarded Put `request` (the server calls this).
    pub(crate) fn deliver_reply(&self, request: u64, result: std::result::Result<(), String>) {
        lock(&self.replies.done).insert(request, result);
        self.replies.arrived.notify_all();
    }
}

impl Session<'_> {
    /// Applies `update` to `key`'s list: at its home, or wherever the
    /// value is held, the Put forwarded there (check-and-forward). Returns
    /// once the Put is committed and the memory it replaced invalidated.
    ///
    /// # Errors
    /// As [`Session::get`]; [`Error::InvalidArgument`] for a weight set in
    /// an unweighted graph or not finite, or set on a vertex without edges
    /// here (where the Put ran on another node, [`Error::Remote`] with its
    /// words);
    /// [`Error::TooLarge`] when a migrated value would outgrow 32 MiB;
    /// [`Error::Remote`] for an error where it ran.
    pub fn put(&mut self, key: u32, update: Update) -> Result<()> {
        self.store.check_vertex(key)?;
        if let Some(weight) = update.weight() {
            if !self.store.weighted {
                return Err(Error::invalid(
                    "update",
                    format!("vertex {key}'s edges have no weights: the graph is unweighted"),
                ));
            }
            if !weight.is_finite() {
                return Err(Error::invalid(
                    "weight",
                    format!("{weight} is not a weight: a graph's weights are finite"),
                ));
            }
        }
        self.store.count_access(key);
        let home = self.store.home_node(key);
        let to = if home == self.store.rank {
            match self.execute_put(key, update)? {
                PutOutcome::Done => {
                    self.tally.puts += 1;
                    return Ok(());
                }
                PutOutcome::Forward(holder) => holder,
            }
        } else {
            home
        };
        self.forward(key, update, to)?;
        self.tally.puts += 1;
        Ok(())
    }

    fn forward(&mut self, key: u32, update: Update, to: u32) -> Result<()> {
        let store = self.store;
        store.counts.forwarded_puts.fetch_add(1, Ordering::Relaxed);
        let request = store.next_request.fetch_add(1, Ordering::Relaxed);
        let message = Message::Put {
            key,
            update,
            origin: store.rank,
            request,
        };
        self.send(to, &message)?;
        let cost = store.config.cost;
        self.tally.modelled_ns += 2 * cost.send_ns + cost.atomic_ns;
        store.await_reply(request, to)
    }

    /// Sends `message` to node `to`.
    pub(crate) fn send(&mut self, to: u32, message: &Message) -> Result<()> {
        self.queue
            .send(NodeRank(to), &message.encode())
            .map_err(Error::Verbs)
    }

    /// Runs a Put here if this node holds the value (copy-on-write: the new
    /// list goes to a new block; the old block is invalidated *before* the
    /// new address is published, so no reader can see the new list and a
    /// later reader the old one); else says where it must run.
    pub(crate) fn execute_put(&mut self, key: u32, update: Update) -> Result<PutOutcome> {
        let store = self.store;
        let home = store.home_node(key);
        let started = Instant::now();
        let mut again = false;
        loop {
            if again {
                store.before_retry(key, started)?;
            }
            again = true;
            let location = self.locate(key, true)?;
            let addr = Addr::decode(location.word)
                .ok_or_else(|| Error::Corrupt(format!("vertex {key} has an empty address word")))?;
            if addr.holder(home) != store.rank {
                store.cache.forget(key);
                return Ok(PutOutcome::Forward(addr.holder(home)));
            }
            let old_at = store.byte(store.layout.value(addr.offset()));
            let mut bytes = vec![0; usize::try_from(addr.size() * 8).expect("a block fits memory")];
            store.region.read(old_at, &mut bytes);
            let Some(mut edges) = decode_block(key, addr, &bytes, store.weighted) else {
                store.cache.forget(key);
                continue;
            };
            update.apply(key, &mut edges)?;
            let block = encode_block(key, &edges);
            let words = block.len() as u64 / 8;
            let offset = store.allocate(words)?;
            let new = match Addr::at(home, store.rank, words, offset).and_then(Addr::encode) {
                Ok(word) => word,
                Err(source) => {
                    store.release(offset, words);
                    return Err(Error::TooLarge {
                        vertex: key,
                        source,
                    });
                }
            };
            store
                .region
                .write(store.byte(store.layout.value(offset)), &block);
            // Past the lease the old block may be another value's by now
            // (and what was read of it, too): zero nothing, read again.
            if !store.within_lease(&location) {
                store.release(offset, words);
                store.cache.forget(key);
                continue;
            }
            store.region.store(old_at, 0);
            let previous = self.compare_swap(home, location.slot, location.word, new)?;
            if previous != location.word {
                // A migration took the old block (it copied it before we
                // invalidated it) and owns its reclamation; run again.
                store.release(offset, words);
                store.cache.forget(key);
                continue;
            }
            store.published(key, home, location.slot, new);
            self.tally.modelled_ns += store.config.local_ns;
            let now = store.clock.now_ns();
            lock(&store.reclaim).wait(addr.offset(), addr.size(), now);
            store
                .counts
                .words_retired
                .fetch_add(addr.size(), Ordering::Relaxed);
            return Ok(PutOutcome::Done);
        }
    }
}
