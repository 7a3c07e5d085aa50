//! The one two-sided path: Puts forwarded to a key's home or to its
//! value's holder (check-and-forward, Pragh §4.3), and their replies.
//!
//! Each node runs one server thread that keeps receives posted. A Put that
//! arrives runs here if this node holds the value; if the value moved on,
//! the request travels on to its holder unchanged, so the reply always goes
//! straight back to the node that first sent it and no server ever waits
//! for another.

use quiver_verbs::{Completion, Op, Output, Verb, WorkRequest};

use crate::message::{Message, CAPACITY};
use crate::store::{PutOutcome, Store};
use crate::{Error, Result};

/// Receives kept posted by a server.
const RECEIVES: usize = 16;

fn receive() -> WorkRequest {
    WorkRequest::new(0, Op::Recv { capacity: CAPACITY })
}

impl Store {
    /// Serves Puts forwarded to this node, and the replies to its own,
    /// until [`Session::stop_server`](crate::Session::stop_server) is
    /// called on it (this node sends itself a stop message); run it on a
    /// thread of its own while the node takes part in Puts.
    ///
    /// # Errors
    /// A corrupt message, or verbs errors other than an idle timeout (lost
    /// nodes).
    pub fn serve(&self) -> Result<()> {
        let store = self;
        let mut session = store.session();
        session
            .queue()
            .post((0..RECEIVES).map(|_| receive()))
            .map_err(Error::Verbs)?;
        let mut completions: Vec<Completion> = Vec::new();
        loop {
            completions.clear();
            match session.queue().wait(&mut completions, 1, RECEIVES) {
                Ok(_) => {}
                Err(quiver_verbs::Error::Timeout { .. }) => continue,
                Err(e) => return Err(Error::Verbs(e)),
            }
            for completion in completions.drain(..) {
                let verb = completion.verb;
                let (Verb::Recv, Output::Message(bytes)) =
                    (verb, completion.output().map_err(Error::Verbs)?)
                else {
                    continue;
                };
                session.queue().post([receive()]).map_err(Error::Verbs)?;
                match Message::decode(&bytes)? {
                    Message::Stop => return Ok(()),
                    Message::Reply { request, result } => store.deliver_reply(request, result),
                    Message::Put {
                        key,
                        update,
                        origin,
                        request,
                    } => {
                        let result = match session.execute_put(key, update) {
                            Ok(PutOutcome::Done) => Ok(()),
                            Ok(PutOutcome::Forward(holder)) => {
                                let message = Message::Put {
                                    key,
                                    update,
                                    origin,
                                    request,
                                };
                                session.send(holder, &message)?;
                                continue;
                            }
                            Err(e) => Err(quiver_run::chain(&e)),
                        };
                        if origin == store.rank() {
                            store.deliver_reply(request, result);
                        } else {
                            session.send(origin, &Message::Reply { request, result })?;
                        }
                    }
                }
            }
        }
    }
}
