//! The 64-bit address word of Pragh's Fig. 5: where a key's value lives.
//!
//! The most significant bit is the type. A *local* word (type 0) names a
//! block in the value region of the key's home: 29 bits of size and 34 of
//! offset. A *remote* word (type 1) names a block on another machine, the
//! value's holder after a migration: 22 bits of size, 7 of machine id and 34
//! of offset. Sizes and offsets count 8-byte words, so a local value may
//! reach 4 GiB, a migrated one 32 MiB, a value region 128 GiB, a job 128
//! machines. Layout, from the top bit down:
//!
//! ```text
//! local:  0 | size:29 | offset:34
//! remote: 1 | size:22 | machine:7 | offset:34
//! ```
//!
//! Encoding refuses a field that does not fit, never truncates it. The word
//! 0 means "no value" and is never produced, since every block holds at
//! least its size word (size >= 1).

use std::fmt;

/// Bits of the offset field (both types).
pub const OFFSET_BITS: u32 = 34;
/// Bits of the size field of a local word.
pub const LOCAL_SIZE_BITS: u32 = 29;
/// Bits of the size field of a remote word.
pub const REMOTE_SIZE_BITS: u32 = 22;
/// Bits of the machine field of a remote word.
pub const MACHINE_BITS: u32 = 7;

const TYPE_BIT: u64 = 1 << 63;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// Where a value lives: decoded form of the address word.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Addr {
    /// In the value region of the key's home.
    Local {
        /// Block length in 8-byte words, size word included.
        size: u64,
        /// Block start in 8-byte words from the value region's start.
        offset: u64,
    },
    /// In the value region of machine `machine` (a migrated value).
    Remote {
        /// Block length in 8-byte words, size word included.
        size: u64,
        /// The holder's rank.
        machine: u32,
        /// Block start in 8-byte words from the holder's value region.
        offset: u64,
    },
}

/// A field that does not fit its bits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value} does not fit the address word's {bits} bits (largest {max})")]
pub struct DoesNotFit {
    /// `size`, `machine` or `offset`.
    pub field: &'static str,
    /// The value given.
    pub value: u64,
    /// The field's width.
    pub bits: u32,
    /// The largest value it holds.
    pub max: u64,
}

fn check(field: &'static str, value: u64, bits: u32) -> Result<u64, DoesNotFit> {
    let max = (1u64 << bits) - 1;
    if value > max {
        return Err(DoesNotFit {
            field,
            value,
            bits,
            max,
        });
    }
    Ok(value)
}

impl Addr {
    /// The block's length in 8-byte words.
    pub fn size(self) -> u64 {
        match self {
            Addr::Local { size, .. } | Addr::Remote { size, .. } => size,
        }
    }

    /// The block's start in 8-byte words within its holder's value region.
    pub fn offset(self) -> u64 {
        match self {
            Addr::Local { offset, .. } | Addr::Remote { offset, .. } => offset,
        }
    }

    /// The machine holding the value, given the key's home.
    pub fn holder(self, home: u32) -> u32 {
        match self {
            Addr::Local { .. } => home,
            Addr::Remote { machine, .. } => machine,
        }
    }

    /// The word for a block of `size` words at `offset` on `holder`, for a
    /// key whose home is `home`: local-type when the two are the same.
    ///
    /// # Errors
    /// [`DoesNotFit`] naming the field.
    pub fn at(home: u32, holder: u32, size: u64, offset: u64) -> Result<Addr, DoesNotFit> {
        let addr = if holder == home {
            Addr::Local { size, offset }
        } else {
            Addr::Remote {
                size,
                machine: holder,
                offset,
            }
        };
        addr.encode()?;
        Ok(addr)
    }

    /// The 64-bit word.
    ///
    /// # Errors
    /// [`DoesNotFit`] naming the field that is too large; a size of 0 is
    /// refused too (it would be the invalidated block's size word).
    pub fn encode(self) -> Result<u64, DoesNotFit> {
        if self.size() == 0 {
            return Err(DoesNotFit {
                field: "size",
                value: 0,
                bits: 0,
                max: 0,
            });
        }
        match self {
            Addr::Local { size, offset } => {
                let size = check("size", size, LOCAL_SIZE_BITS)?;
                let offset = check("offset", offset, OFFSET_BITS)?;
                Ok(size << OFFSET_BITS | offset)
            }
            Addr::Remote {
                size,
                machine,
                offset,
            } => {
                let size = check("size", size, REMOTE_SIZE_BITS)?;
                let machine = check("machine", u64::from(machine), MACHINE_BITS)?;
                let offset = check("offset", offset, OFFSET_BITS)?;
                Ok(TYPE_BIT
                    | size << (OFFSET_BITS + MACHINE_BITS)
                    | machine << OFFSET_BITS
                    | offset)
            }
        }
    }

    /// The address a word names; `None` for 0 (no value).
    pub fn decode(word: u64) -> Option<Addr> {
        if word == 0 {
            return None;
        }
        let offset = word & OFFSET_MASK;
        Some(if word & TYPE_BIT == 0 {
            Addr::Local {
                size: word >> OFFSET_BITS,
                offset,
            }
        } else {
            Addr::Remote {
                size: (word & !TYPE_BIT) >> (OFFSET_BITS + MACHINE_BITS),
                machine: u32::try_from((word >> OFFSET_BITS) & ((1 << MACHINE_BITS) - 1))
                    .expect("7 bits fit u32"),
                offset,
            }
        })
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Local { size, offset } => write!(f, "local {size} words at {offset}"),
            Addr::Remote {
                size,
                machine,
                offset,
            } => write!(f, "{size} words at {offset} on node {machine}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_local_word_round_trips(size in 1u64..1 << 29, offset in 0u64..1 << 34) {
            let addr = Addr::Local { size, offset };
            let word = addr.encode().unwrap();
            prop_assert_eq!(word >> 63, 0);
            prop_assert_eq!(Addr::decode(word), Some(addr));
        }

        #[test]
        fn every_remote_word_round_trips(
            size in 1u64..1 << 22,
            machine in 0u32..128,
            offset in 0u64..1 << 34,
        ) {
            let addr = Addr::Remote { size, machine, offset };
            let word = addr.encode().unwrap();
            prop_assert_eq!(word >> 63, 1);
            prop_assert_eq!(Addr::decode(word), Some(addr));
        }

        #[test]
        fn fields_out_of_range_are_refused(over in 0u64..1 << 20) {
            let local_size = Addr::Local { size: (1 << 29) + over, offset: 0 };
            prop_assert_eq!(local_size.encode().unwrap_err().field, "size");
            let offset = Addr::Local { size: 1, offset: (1 << 34) + over };
            prop_assert_eq!(offset.encode().unwrap_err().field, "offset");
            let remote_size = Addr::Remote { size: (1 << 22) + over, machine: 0, offset: 0 };
            prop_assert_eq!(remote_size.encode().unwrap_err().field, "size");
            let machine = u32::try_from(128 + over).unwrap();
            let remote_machine = Addr::Remote { size: 1, machine, offset: 0 };
            prop_assert_eq!(remote_machine.encode().unwrap_err().field, "machine");
        }
    }

    #[test]
    fn the_extremes_fit_and_zero_is_no_value() {
        let largest = Addr::Remote {
            size: (1 << 22) - 1,
            machine: 127,
            offset: (1 << 34) - 1,
        };
        assert_eq!(largest.encode().unwrap(), u64::MAX);
        assert_eq!(Addr::decode(0), None);
        assert!(Addr::Local { size: 0, offset: 9 }.encode().is_err());
        // A local size too large to migrate: the 32 MiB limit of remote words.
        let big = 1 << 22;
        assert!(Addr::at(0, 0, big, 0).is_ok());
        assert_eq!(Addr::at(0, 1, big, 0).unwrap_err().field, "size");
    }
}
