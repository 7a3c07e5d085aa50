//! The messages of the one two-sided path: a Put forwarded to a key's
//! home or its value's holder, its reply, and a server's stop. The store
//! sends them ([`crate::store`]) and the server receives them
//! ([`crate::server`]); both take them from here, so neither imports the
//! other for them.

use crate::update::Update;
use crate::{Error, Result};

/// Largest message: a reply's error text is cut to fit.
pub(crate) const CAPACITY: usize = 1024;

/// A message between servers.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Message {
    /// Run this Put; reply to `origin` with `request`.
    Put {
        key: u32,
        update: Update,
        origin: u32,
        request: u64,
    },
    /// The outcome of the sender's Put `request`.
    Reply {
        request: u64,
        result: std::result::Result<(), String>,
    },
    /// Stop serving (a node sends it to itself).
    Stop,
}

impl Message {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(32);
        match self {
            Message::Put {
                key,
                update,
                origin,
                request,
            } => {
                let (kind, index, target) = match *update {
                    Update::AddEdge(target) => (0u32, 0, target),
                    Update::SetEdge { index, target } => (1, index, target),
                    Update::AddWeightedEdge { target, weight } => (2, weight.to_bits(), target),
                    Update::SetWeight { index, weight } => (3, index, weight.to_bits()),
                };
                bytes.push(1);
                bytes.extend(key.to_le_bytes());
                bytes.extend(kind.to_le_bytes());
                bytes.extend(index.to_le_bytes());
                bytes.extend(target.to_le_bytes());
                bytes.extend(origin.to_le_bytes());
                bytes.extend(request.to_le_bytes());
            }
            Message::Reply { request, result } => {
                bytes.push(2);
                bytes.extend(request.to_le_bytes());
                if let Err(text) = result {
                    let mut end = text.len().min(CAPACITY - bytes.len());
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    bytes.extend(&text.as_bytes()[..end]);
                }
            }
            Message::Stop => bytes.push(3),
        }
        bytes
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Message> {
        let corrupt =
            || Error::Corrupt(format!("a message of {} bytes: {bytes:02x?}", bytes.len()));
        let u32_at = |at: usize| {
            bytes
                .get(at..at + 4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
                .ok_or_else(corrupt)
        };
        let u64_at = |at: usize| {
            bytes
                .get(at..at + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                .ok_or_else(corrupt)
        };
        match bytes.first() {
            Some(1) if bytes.len() == 29 => Ok(Message::Put {
                key: u32_at(1)?,
                update: match (u32_at(5)?, u32_at(9)?, u32_at(13)?) {
                    (0, _, target) => Update::AddEdge(target),
                    (1, index, target) => Update::SetEdge { index, target },
                    (2, weight, target) => Update::AddWeightedEdge {
                        target,
                        weight: f32::from_bits(weight),
                    },
                    (3, index, weight) => Update::SetWeight {
                        index,
                        weight: f32::from_bits(weight),
                    },
                    _ => return Err(corrupt()),
                },
                origin: u32_at(17)?,
                request: u64_at(21)?,
            }),
            Some(2) => {
                let request = u64_at(1)?;
                let text = &bytes[9..];
                Ok(Message::Reply {
                    request,
                    result: if text.is_empty() {
                        Ok(())
                    } else {
                        Err(String::from_utf8_lossy(text).into_owned())
                    },
                })
            }
            Some(3) if bytes.len() == 1 => Ok(Message::Stop),
            _ => Err(corrupt()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_garbage_is_refused() {
        let messages = [
            Message::Put {
                key: 7,
                update: Update::AddEdge(9),
                origin: 3,
                request: u64::MAX,
            },
            Message::Put {
                key: 1,
                update: Update::SetEdge {
                    index: 4,
                    target: 2,
                },
                origin: 0,
                request: 0,
            },
            Message::Put {
                key: 2,
                update: Update::AddWeightedEdge {
                    target: 11,
                    weight: -0.25,
                },
                origin: 1,
                request: 8,
            },
            Message::Put {
                key: 3,
                update: Update::SetWeight {
                    index: 12,
                    weight: 7.5,
                },
                origin: 2,
                request: 9,
            },
            Message::Reply {
                request: 5,
                result: Ok(()),
            },
            Message::Reply {
                request: 6,
                result: Err("vertex 9: too large".into()),
            },
            Message::Stop,
        ];
        for message in messages {
            assert_eq!(Message::decode(&message.encode()).unwrap(), message);
        }
        assert!(Message::decode(&[]).is_err());
        assert!(Message::decode(&[1, 2, 3]).is_err());
        assert!(Message::decode(&[9]).is_err());
    }
}
