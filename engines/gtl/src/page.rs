//! The GTL page format (GraphSSD §3.2, Fig. 4 and 6): entries from the
//! front, a footer at the back.
//!
//! ```text
//! | e_0 e_1 ... e_{E-1} | free | <v_0,o_0> ... <v_{N-1},o_{N-1}> <End,o_N> | flags | edges | vsid | N |
//!   u32 entries (LE)              N+1 tuples of two u32 (LE)                 four u32 (LE), the page's end
//! ```
//!
//! Entries are neighbour ids, or `f32` weights as their bits in weight
//! pages (the same layout, as the paper). Offsets count entries from 0;
//! `End` (vertex id `u32::MAX`) holds the exclusive end of the last list,
//! so list `i` is `o_i..o_{i+1}`. The tuples' vertices are `vsid..vsid+N`,
//! consecutive (a vertex without neighbours still has its tuple). `flags`
//! marks a list that spans pages: [`CONTINUED`] says the first list
//! continues one begun on the previous page of the same vertex, and
//! [`CONTINUES`] says the last list goes on in the next. `edges` is `E`.
//! A page is filled only up to its budget, `page_bytes` less the slack.

use quiver_run::InvalidArgument;

use crate::error::{Error, Result};

/// Flag: the page's first list continues from the vertex's previous page.
pub const CONTINUED: u32 = 1;
/// Flag: the page's last list continues on the vertex's next page.
pub const CONTINUES: u32 = 2;
/// The vertex id of the End tuple.
pub const END: u32 = u32::MAX;
/// Bytes of the fixed footer fields (flags, edges, vsid, N).
pub const FIXED_FOOTER: usize = 16;
/// Bytes of one `<vertex, offset>` tuple.
pub const TUPLE: usize = 8;
/// Bytes of one entry.
pub const ENTRY: usize = 4;

/// The page size and fill budget of a GTL layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageFormat {
    page_bytes: usize,
    budget: usize,
}

impl PageFormat {
    /// Pages of `page_bytes` filled to at most `page_bytes - floor(page_bytes * slack)`;
    /// `slack` must be in `[0, 1)` and leave room for a list of one entry.
    pub fn new(page_bytes: usize, slack: f64) -> Result<PageFormat, InvalidArgument> {
        if !(0.0..1.0).contains(&slack) {
            return Err(InvalidArgument::new(
                "slack",
                format!("must be in [0, 1), got {slack}"),
            ));
        }
        // A fraction of a page size below 2^20 converts exactly enough.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let slack_bytes = (page_bytes as f64 * slack).floor() as usize;
        let format = PageFormat {
            page_bytes,
            budget: page_bytes - slack_bytes,
        };
        if format.max_list() == 0 {
            return Err(InvalidArgument::new(
                "slack",
                format!("{slack} leaves no room for one neighbour in a page of {page_bytes} bytes"),
            ));
        }
        Ok(format)
    }

    /// Bytes of a page.
    pub fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    /// Bytes a page may be filled to.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes a page of `vertices` tuples and `entries` entries takes.
    pub fn used(vertices: usize, entries: usize) -> usize {
        entries * ENTRY + (vertices + 1) * TUPLE + FIXED_FOOTER
    }

    /// Whether `vertices` lists of `entries` entries in all fit the budget.
    pub fn fits(&self, vertices: usize, entries: usize) -> bool {
        Self::used(vertices, entries) <= self.budget
    }

    /// The longest list a page holds alone; longer lists span pages.
    pub fn max_list(&self) -> usize {
        self.budget.saturating_sub(Self::used(1, 0)) / ENTRY
    }

    /// The page of lists `lists` for vertices `vsid..`, with `flags`.
    /// Panics if they do not fit the page: the packer checks with [`fits`](Self::fits).
    pub fn encode(&self, vsid: u32, flags: u32, lists: &[&[u32]]) -> Vec<u8> {
        let entries: usize = lists.iter().map(|l| l.len()).sum();
        assert!(
            Self::used(lists.len(), entries) <= self.page_bytes,
            "{} lists of {entries} entries overflow a page of {} bytes",
            lists.len(),
            self.page_bytes
        );
        let mut page = vec![0u8; self.page_bytes];
        let mut at = 0;
        let footer = self.page_bytes - FIXED_FOOTER - (lists.len() + 1) * TUPLE;
        let mut tuple = footer;
        let mut offset = 0u32;
        let put = |page: &mut [u8], pos: usize, value: u32| {
            page[pos..pos + 4].copy_from_slice(&value.to_le_bytes());
        };
        for (i, list) in lists.iter().enumerate() {
            // The tuples' vertices are consecutive ids, which fit u32.
            let vertex = vsid + u32::try_from(i).expect("a page holds fewer than 2^32 lists");
            put(&mut page, tuple, vertex);
            put(&mut page, tuple + 4, offset);
            tuple += TUPLE;
            for &e in *list {
                put(&mut page, at, e);
                at += ENTRY;
            }
            offset += u32::try_from(list.len()).expect("a page holds fewer than 2^32 entries");
        }
        put(&mut page, tuple, END);
        put(&mut page, tuple + 4, offset);
        let end = self.page_bytes;
        put(&mut page, end - 16, flags);
        put(&mut page, end - 12, offset);
        put(&mut page, end - 8, vsid);
        put(
            &mut page,
            end - 4,
            u32::try_from(lists.len()).expect("fits u32"),
        );
        page
    }
}

/// A decoded page: its footer, and its entries by list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// The first vertex with a list in the page.
    pub vsid: u32,
    /// [`CONTINUED`] and [`CONTINUES`].
    pub flags: u32,
    /// `N + 1` offsets, the last the End tuple's.
    pub offsets: Vec<u32>,
    /// The page's `E` entries.
    pub entries: Vec<u32>,
}

impl Page {
    /// Decodes `bytes`, checking the footer (`ppn` names the page in errors).
    pub fn decode(bytes: &[u8], ppn: u64) -> Result<Page> {
        let corrupt = |reason: String| Error::CorruptPage { ppn, reason };
        let len = bytes.len();
        if len < FIXED_FOOTER + TUPLE {
            return Err(corrupt(format!("{len} bytes hold no footer")));
        }
        let get = |pos: usize| u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes"));
        let (flags, edges, vsid, n) = (get(len - 16), get(len - 12), get(len - 8), get(len - 4));
        let n = n as usize;
        let entries = edges as usize;
        if flags & !(CONTINUED | CONTINUES) != 0 {
            return Err(corrupt(format!("unknown flags {flags:#x}")));
        }
        if n == 0 || PageFormat::used(n, entries) > len {
            return Err(corrupt(format!(
                "{n} lists of {entries} entries do not fit"
            )));
        }
        let footer = len - FIXED_FOOTER - (n + 1) * TUPLE;
        let mut offsets = Vec::with_capacity(n + 1);
        for i in 0..=n {
            let vertex = get(footer + i * TUPLE);
            let want = if i == n {
                END
            } else {
                vsid.checked_add(u32::try_from(i).expect("fits u32"))
                    .ok_or_else(|| corrupt("vertex ids overflow u32".into()))?
            };
            if vertex != want {
                return Err(corrupt(format!(
                    "tuple {i} names vertex {vertex}, not {want}"
                )));
            }
            let offset = get(footer + i * TUPLE + 4);
            if offsets.last().is_some_and(|&last| offset < last) {
                return Err(corrupt(format!("offset {offset} of tuple {i} decreases")));
            }
            offsets.push(offset);
        }
        if offsets[0] != 0 || offsets[n] != edges {
            return Err(corrupt("offsets do not span the entries".into()));
        }
        let entries = (0..entries).map(|i| get(i * ENTRY)).collect();
        Ok(Page {
            vsid,
            flags,
            offsets,
            entries,
        })
    }

    /// Vertices with a list in the page.
    pub fn vertices(&self) -> u32 {
        // N + 1 offsets with N below 2^32 (decoded from a u32).
        u32::try_from(self.offsets.len() - 1).expect("N fits u32")
    }

    /// The list of `vertex` in this page, if the page holds one.
    pub fn list(&self, vertex: u32) -> Option<&[u32]> {
        let i = vertex.checked_sub(self.vsid)? as usize;
        if i + 1 >= self.offsets.len() {
            return None;
        }
        Some(&self.entries[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn arb_lists() -> impl Strategy<Value = (u32, u32, Vec<Vec<u32>>)> {
        (
            0u32..1000,
            0u32..4,
            prop::collection::vec(prop::collection::vec(any::<u32>(), 0..12), 1..10),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn pages_round_trip((vsid, flags, lists) in arb_lists(), slack in 0.0f64..0.2) {
            let format = PageFormat::new(1024, slack).unwrap();
            let refs: Vec<&[u32]> = lists.iter().map(Vec::as_slice).collect();
            let bytes = format.encode(vsid, flags, &refs);
            prop_assert_eq!(bytes.len(), 1024);
            let page = Page::decode(&bytes, 7).unwrap();
            prop_assert_eq!(page.vsid, vsid);
            prop_assert_eq!(page.flags, flags);
            prop_assert_eq!(page.vertices() as usize, lists.len());
            prop_assert!(page.offsets.windows(2).all(|w| w[0] <= w[1]));
            let total: usize = lists.iter().map(Vec::len).sum();
            prop_assert_eq!(page.entries.len(), total);
            for (i, list) in lists.iter().enumerate() {
                prop_assert_eq!(page.list(vsid + u32::try_from(i).unwrap()).unwrap(), list.as_slice());
            }
            prop_assert!(page.list(vsid + u32::try_from(lists.len()).unwrap()).is_none());
        }
    }

    #[test]
    fn footer_sits_at_the_end_and_data_at_the_front() {
        let format = PageFormat::new(64, 0.0).unwrap();
        let bytes = format.encode(5, CONTINUES, &[&[9, 8], &[]]);
        assert_eq!(&bytes[..8], &[9, 0, 0, 0, 8, 0, 0, 0]);
        assert_eq!(&bytes[60..], &2u32.to_le_bytes(), "N");
        assert_eq!(&bytes[56..60], &5u32.to_le_bytes(), "vsid");
        assert_eq!(&bytes[52..56], &2u32.to_le_bytes(), "edges");
        assert_eq!(&bytes[48..52], &CONTINUES.to_le_bytes(), "flags");
        // Tuples <5,0> <6,2> <End,2> end where the fixed footer begins.
        assert_eq!(&bytes[40..48], &[0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0]);
        assert_eq!(format.max_list(), (64 - 32) / 4);
    }

    #[test]
    fn a_broken_footer_is_an_error() {
        let format = PageFormat::new(64, 0.0).unwrap();
        let mut bytes = format.encode(5, 0, &[&[1]]);
        bytes[60] = 200;
        assert!(matches!(
            Page::decode(&bytes, 3),
            Err(Error::CorruptPage { ppn: 3, .. })
        ));
    }
}

#[cfg(test)]
mod slack_tests {
    use super::PageFormat;

    #[test]
    fn slack_must_leave_room_for_one_neighbour() {
        assert!(PageFormat::new(64, 0.4).is_ok());
        let e = PageFormat::new(64, 0.49).unwrap_err();
        assert_eq!(e.parameter, "slack");
        assert!(PageFormat::new(16384, 1.0).is_err());
    }
}
