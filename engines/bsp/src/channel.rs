//! How a node's workers exchange message blocks with the other nodes':
//! the trait RGraph's rings and the two-sided baseline implement, and what
//! a superstep's traffic cost.

use crate::Result;

/// How a node's workers exchange message blocks with the other nodes'
/// (RGraph's rings, or the two-sided baseline). `deliver` takes the
/// messages that arrive for this node's masters, whenever a worker polls.
pub(crate) trait Channel: Send + Sync + std::fmt::Debug {
    /// Queues a message for `dst` on node `to` from `worker`.
    fn send(
        &self,
        worker: usize,
        to: usize,
        dst: u32,
        value: u64,
        deliver: &dyn Fn(u32, u64),
    ) -> Result<()>;

    /// Processes what has arrived for `worker`, without waiting.
    fn poll(&self, worker: usize, deliver: &dyn Fn(u32, u64)) -> Result<()>;

    /// Ends `worker`'s superstep: flushes it and waits for every peer's end.
    fn finish(&self, worker: usize, deliver: &dyn Fn(u32, u64)) -> Result<()>;

    /// After every worker finished (before the barrier): the superstep's
    /// traffic, and the channel ready for the next one.
    fn end_superstep(&self) -> Traffic;

    /// Bytes of message buffers this node holds.
    fn bytes(&self) -> u64;
}

/// What a superstep's traffic cost this node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Messages (units) sent.
    pub messages: u64,
    /// Bytes of message blocks sent (headers and padding included; credits
    /// are not messages).
    pub bytes: u64,
    /// Operations posted: WRITEs or SENDs of blocks, pads and END markers,
    /// and the credits written back.
    pub writes: u64,
}

impl std::ops::AddAssign for Traffic {
    fn add_assign(&mut self, other: Traffic) {
        self.messages += other.messages;
        self.bytes += other.bytes;
        self.writes += other.writes;
    }
}
