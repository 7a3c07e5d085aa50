//! Checks on a write before anything is stored.

use tonic::Status;

use super::{invalid, node_from, printable, Shared};
use crate::clock::MAX_SKEW_NS;
use crate::error::Result;
use crate::rpc::MAX_ID_BYTES;
use crate::rpc::{self, op};
use crate::travel::MAX_HOPS;
use crate::tree::SplitState;

impl Shared {
    pub(super) fn check_session(&self, ts: u64) -> Result<(), Status> {
        let now = self.clock.read_time(0);
        if ts > now + MAX_SKEW_NS {
            return Err(invalid(format!(
                "timestamp {ts} is {:.3} s in this server's future",
                (ts - now) as f64 / 1e9
            )));
        }
        Ok(())
    }

    /// The time a read happens at: `as_of`, or now (0), after checking
    /// neither it nor the session's timestamp is in the future.
    pub(super) fn read_time(&self, as_of: u64, session: u64) -> Result<u64, Status> {
        self.check_session(session)?;
        self.check_session(as_of)?;
        Ok(if as_of == 0 {
            self.clock.read_time(session)
        } else {
            as_of
        })
    }

    pub(super) fn check_name(&self, what: &str, name: &[u8]) -> Result<(), Status> {
        if name.is_empty() || name.len() > MAX_ID_BYTES {
            return Err(invalid(format!(
                "{what} must have 1 to {MAX_ID_BYTES} bytes, not {}",
                name.len()
            )));
        }
        Ok(())
    }

    pub(super) fn check_values<'a>(
        &self,
        what: &str,
        values: impl IntoIterator<Item = (&'a String, &'a Vec<u8>)>,
    ) -> Result<(), Status> {
        for (k, v) in values {
            self.check_name(&format!("{what} name"), k.as_bytes())?;
            if v.len() > self.config.max_value_bytes {
                return Err(invalid(format!(
                    "{what} {k:?} has {} bytes; the limit is {}",
                    v.len(),
                    self.config.max_value_bytes
                )));
            }
        }
        Ok(())
    }

    /// Checks every op before any is applied.
    pub(super) fn validate(&self, req: &rpc::WriteRequest) -> Result<(), Status> {
        self.check_session(req.session_ts)?;
        for op in &req.ops {
            if req.reverse && !matches!(&op.op, Some(op::Op::Edge(e)) if e.ts != 0) {
                return Err(invalid(
                    "a reverse-edge delivery holds only edges, each with its timestamp",
                ));
            }
            match op.op.as_ref() {
                None => return Err(invalid("an op names no operation")),
                Some(op::Op::Vertex(v)) => {
                    self.check_name("vertex id", &v.id)?;
                    if !self.config.schema.has_type(&v.vtype) {
                        return Err(invalid(format!("unknown vertex type {:?}", v.vtype)));
                    }
                    self.check_values("attribute", &v.attrs)?;
                    self.check_home(&v.id)?;
                }
                Some(op::Op::DeleteVertex(v)) => {
                    self.check_name("vertex id", &v.id)?;
                    self.check_home(&v.id)?;
                }
                Some(op::Op::Edge(e)) => {
                    if !req.reverse && e.ts != 0 {
                        return Err(invalid(
                            "an edge a client writes carries no timestamp: the server stamps it",
                        ));
                    }
                    self.check_session(e.ts)?;
                    self.check_name("source id", &e.src)?;
                    self.check_name("destination id", &e.dst)?;
                    if self.config.schema.relation(&e.etype).is_none() {
                        return Err(invalid(format!("unknown relation {:?}", e.etype)));
                    }
                    self.check_values("property", &e.props)?;
                    node_from(e.node)?;
                    if !self.config.partitioner.splits() {
                        let (server, _) =
                            self.placement.edge(&e.src, &e.dst, SplitState::default());
                        if server != self.me() {
                            return Err(Status::failed_precondition(format!(
                                "edge {} -> {} belongs on server {server}",
                                printable(&e.src),
                                printable(&e.dst)
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Refuses a traversal hop along a relation the schema does not have
    /// (it would match no edge and answer nothing).
    pub(super) fn check_hops<'a>(
        &self,
        hops: impl IntoIterator<Item = &'a Option<rpc::Hop>>,
    ) -> Result<(), Status> {
        for hop in hops.into_iter().flatten() {
            if self.config.schema.relation(&hop.etype).is_none() {
                return Err(invalid(format!(
                    "a traversal follows unknown relation {:?}",
                    hop.etype
                )));
            }
        }
        Ok(())
    }

    pub(super) fn check_home(&self, id: &[u8]) -> Result<(), Status> {
        let home = self.placement.home(id);
        if home != self.me() {
            return Err(Status::failed_precondition(format!(
                "vertex {} lives on server {home}",
                printable(id)
            )));
        }
        Ok(())
    }
}

/// A traversal step from the wire: one a traversal reaches
/// (`0..=MAX_HOPS`), so the next step's number exists too.
pub(super) fn check_step(step: u32) -> Result<(), Status> {
    if usize::try_from(step).is_ok_and(|s| s <= MAX_HOPS) {
        Ok(())
    } else {
        Err(invalid(format!(
            "step {step} is beyond a traversal's {MAX_HOPS} steps"
        )))
    }
}
