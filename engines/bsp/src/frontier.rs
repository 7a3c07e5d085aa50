//! Sets of active vertices: a bitmap that workers set concurrently, and a
//! superstep's frontier of the vertices one node owns.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A set of vertices bit by bit, set concurrently.
#[derive(Debug)]
pub struct Bitmap {
    words: Vec<AtomicU64>,
}

impl Bitmap {
    /// An empty set over `n` vertices.
    pub fn new(n: u32) -> Bitmap {
        Bitmap {
            words: (0..(n as usize).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Adds `v`; returns whether it was absent.
    #[inline]
    pub fn insert(&self, v: u32) -> bool {
        let bit = 1u64 << (v % 64);
        self.words[v as usize / 64].fetch_or(bit, Ordering::Relaxed) & bit == 0
    }

    /// Adds `v` to a set no other thread can see; returns whether it was
    /// absent. A plain read and write, where [`Bitmap::insert`]'s atomic
    /// or costs a locked instruction a vertex.
    #[inline]
    fn insert_exclusive(&mut self, v: u32) -> bool {
        let bit = 1u64 << (v % 64);
        let word = self.words[v as usize / 64].get_mut();
        let absent = *word & bit == 0;
        *word |= bit;
        absent
    }

    /// Adds every vertex of `range` to a set no other thread can see, a
    /// word at a time.
    fn insert_range_exclusive(&mut self, range: Range<u32>) {
        if range.is_empty() {
            return;
        }
        let (first, last) = (range.start as usize / 64, (range.end as usize - 1) / 64);
        for (i, word) in self.words[first..=last].iter_mut().enumerate() {
            let mut bits = u64::MAX;
            if i == 0 {
                bits &= u64::MAX << (range.start % 64);
            }
            if first + i == last {
                bits &= u64::MAX >> (63 - (range.end - 1) % 64);
            }
            *word.get_mut() |= bits;
        }
    }

    /// Whether `v` is in the set.
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        self.words[v as usize / 64].load(Ordering::Relaxed) & (1u64 << (v % 64)) != 0
    }

    /// The members within `range`, ascending: a pass over the words, so
    /// O(|range| / 64 + members).
    pub fn members(&self, range: Range<u32>) -> Vec<u32> {
        let mut members = Vec::new();
        if range.is_empty() {
            return members;
        }
        let (first, last) = (range.start as usize / 64, (range.end as usize - 1) / 64);
        for (i, word) in self.words[first..=last].iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            let base = u32::try_from((first + i) * 64).expect("vertex ids fit u32");
            while bits != 0 {
                let v = base + bits.trailing_zeros();
                if range.contains(&v) {
                    members.push(v);
                }
                bits &= bits - 1;
            }
        }
        members
    }

    /// How many members lie within `range`: a popcount over its words.
    pub fn count(&self, range: Range<u32>) -> usize {
        if range.is_empty() {
            return 0;
        }
        let (first, last) = (range.start as usize / 64, (range.end as usize - 1) / 64);
        // The bits of the first and last word that lie within the range.
        let from = u64::MAX << (range.start % 64);
        let to = u64::MAX >> (63 - (range.end - 1) % 64);
        self.words[first..=last]
            .iter()
            .enumerate()
            .map(|(i, word)| {
                let mut bits = word.load(Ordering::Relaxed);
                if i == 0 {
                    bits &= from;
                }
                if first + i == last {
                    bits &= to;
                }
                bits.count_ones() as usize
            })
            .sum()
    }
}

/// Bits for one word of a [`Bitmap`], set by one worker and or-ed into the
/// shared word once, instead of an atomic operation per vertex.
#[derive(Debug, Default)]
pub(crate) struct WordBuffer {
    word: usize,
    bits: u64,
}

impl WordBuffer {
    pub(crate) fn insert(&mut self, into: &Bitmap, v: u32) {
        let word = v as usize / 64;
        if word != self.word {
            self.flush(into);
            self.word = word;
        }
        self.bits |= 1 << (v % 64);
    }

    pub(crate) fn flush(&mut self, into: &Bitmap) {
        if self.bits != 0 {
            into.words[self.word].fetch_or(self.bits, Ordering::Relaxed);
            self.bits = 0;
        }
    }
}

/// The active vertices of a superstep that this node owns: a bitmap for
/// pulling and lookups, and the same vertices as a list for pushing (a
/// frontier of every vertex of its range needs none: [`Frontier::part`]
/// counts them). A superstep's result lists its vertices only when
/// something asks for them:
/// a pull that follows a pull reads the bitmap alone, and listing the
/// half-million vertices a BFS pull on Kronecker 20 activates took about
/// 2.7 ms, a sixth of that superstep.
#[derive(Debug)]
pub struct Frontier {
    bits: Bitmap,
    /// How many vertices are active.
    count: usize,
    /// Where they lie.
    range: Range<u32>,
    /// Them, listed.
    list: OnceLock<Vec<u32>>,
}

impl Frontier {
    /// The frontier holding `vertices` (of a graph of `n`).
    pub fn of(n: u32, vertices: impl IntoIterator<Item = u32>) -> Frontier {
        let mut bits = Bitmap::new(n);
        let list: Vec<u32> = vertices
            .into_iter()
            .filter(|&v| bits.insert_exclusive(v))
            .collect();
        Frontier {
            bits,
            count: list.len(),
            range: 0..n,
            list: OnceLock::from(list),
        }
    }

    /// Every vertex of `range` (of a graph of `n`), never listed: [`Frontier::part`]
    /// counts them off the range (a list of a million vertices is 4 MB).
    pub fn every(n: u32, range: Range<u32>) -> Frontier {
        let mut bits = Bitmap::new(n);
        bits.insert_range_exclusive(range.clone());
        Frontier::of_bits(bits, range)
    }

    /// The members of `bits` within `range`, listed when first asked for.
    pub(crate) fn of_bits(bits: Bitmap, range: Range<u32>) -> Frontier {
        Frontier {
            count: bits.count(range.clone()),
            bits,
            range,
            list: OnceLock::new(),
        }
    }

    /// Number of active vertices here.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Marks `v`, a vertex another node owns, active for a pull's gathers.
    pub(crate) fn mark(&self, v: u32) {
        self.bits.insert(v);
    }

    /// Unmarks every vertex outside `owned` (a frontier used again for
    /// another pull must not keep the last one's marks).
    pub(crate) fn forget_others(&self, owned: Range<u32>) {
        let words = &self.bits.words;
        let (first, last) = (owned.start as usize / 64, owned.end as usize / 64);
        for word in words[..first].iter().chain(words.iter().skip(last + 1)) {
            word.store(0, Ordering::Relaxed);
        }
        // The bits of the boundary words that lie outside `owned`.
        let below = !(u64::MAX << (owned.start % 64));
        let above = u64::MAX << (owned.end % 64);
        if let Some(word) = words.get(first) {
            word.fetch_and(!below, Ordering::Relaxed);
        }
        if let Some(word) = words.get(last) {
            word.fetch_and(!above, Ordering::Relaxed);
        }
    }

    /// Whether no vertex is active here.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether `v` is active.
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        self.bits.contains(v)
    }

    /// The active vertices, in no particular order.
    pub fn vertices(&self) -> &[u32] {
        self.list
            .get_or_init(|| self.bits.members(self.range.clone()))
    }

    /// The active vertices at positions `at` of [`Frontier::vertices`]'
    /// order, counted off the range instead of listed when every vertex
    /// of the range is active (their list would be the range in order).
    pub fn part(&self, at: Range<usize>) -> impl Iterator<Item = u32> + '_ {
        debug_assert!(at.end <= self.count, "positions {at:?} of {}", self.count);
        let every = self.is_every();
        let first = self.range.start;
        let listed = if every {
            &[][..]
        } else {
            &self.vertices()[at.clone()]
        };
        let counted = if every { at } else { 0..0 };
        listed
            .iter()
            .copied()
            .chain(counted.map(move |i| first + vertex(i)))
    }

    /// Lists the vertices now if [`Frontier::part`] will need the list,
    /// so that making it is not the first worker's busy time.
    pub(crate) fn list_for_parts(&self) {
        if !self.is_every() {
            self.vertices();
        }
    }

    /// Whether every vertex of the range is active.
    fn is_every(&self) -> bool {
        self.count == self.range.len()
    }
}

/// An index below |V| as a vertex id.
#[inline]
pub(crate) fn vertex(i: usize) -> u32 {
    u32::try_from(i).expect("vertex indices are below |V|, which fits u32")
}

#[cfg(test)]
mod tests {
    use super::{Bitmap, Frontier};

    #[test]
    fn forgetting_others_keeps_exactly_the_owned_marks() {
        let n = 300;
        for (start, end) in [
            (0, 300),
            (5, 65),
            (64, 128),
            (63, 64),
            (70, 70),
            (128, 300),
            (1, 299),
        ] {
            let frontier = Frontier::of(n, (start..end).step_by(3));
            for v in 0..n {
                frontier.mark(v);
            }
            frontier.forget_others(start..end);
            let kept: Vec<u32> = (0..n).filter(|&v| frontier.contains(v)).collect();
            assert_eq!(kept, (start..end).collect::<Vec<_>>(), "{start}..{end}");
        }
    }

    /// A frontier of every vertex of a range holds exactly that range,
    /// whichever words its ends fall in.
    #[test]
    fn every_holds_exactly_its_range() {
        let n = 300;
        for start in (0..=n).step_by(7).chain([63, 64, 65, 128, 299]) {
            for end in (start..=n).step_by(5).chain([start, 64, 128, 191, 192, n]) {
                if end < start {
                    continue;
                }
                let frontier = Frontier::every(n, start..end);
                let held: Vec<u32> = (0..n).filter(|&v| frontier.contains(v)).collect();
                assert_eq!(held, (start..end).collect::<Vec<_>>(), "{start}..{end}");
                assert_eq!(frontier.len(), (end - start) as usize, "{start}..{end}");
            }
        }
    }

    /// Every frontier's parts, over any split of its positions, are its
    /// listed vertices in order: counted off the range for a frontier of
    /// every vertex of it, read from the list otherwise.
    #[test]
    fn parts_are_the_listed_vertices() {
        let n = 300;
        for (start, end) in [(0, 300), (5, 65), (64, 128), (70, 70), (1, 299)] {
            let every = Frontier::every(n, start..end);
            let bits = Bitmap::new(n);
            for v in (start..end).step_by(7) {
                bits.insert(v);
            }
            let some = Frontier::of_bits(bits, start..end);
            for frontier in [every, some, Frontier::of(n, (start..end).rev().step_by(5))] {
                let listed = frontier.vertices().to_vec();
                assert_eq!(listed.len(), frontier.len(), "{start}..{end}");
                for cut in [0, listed.len().min(1), listed.len() / 2, listed.len()] {
                    let parts: Vec<u32> = frontier
                        .part(0..cut)
                        .chain(frontier.part(cut..listed.len()))
                        .collect();
                    assert_eq!(parts, listed, "{start}..{end} cut at {cut}");
                }
            }
        }
        let every = Frontier::every(n, 5..65);
        assert!((0..n).all(|v| every.contains(v) == (5..65).contains(&v)));
    }

    #[test]
    fn members_and_their_count_are_the_set_bits_within_the_range() {
        let bits = Bitmap::new(300);
        let set = [0, 5, 63, 64, 65, 127, 128, 200, 255, 299];
        for v in set {
            assert!(bits.insert(v));
        }
        for (start, end) in [
            (0, 300),
            (5, 65),
            (64, 64),
            (66, 127),
            (128, 300),
            (1, 299),
            (63, 65),
            (64, 128),
            (5, 6),
        ] {
            let expected: Vec<u32> = set
                .iter()
                .copied()
                .filter(|v| (start..end).contains(v))
                .collect();
            assert_eq!(bits.members(start..end), expected, "{start}..{end}");
            assert_eq!(bits.count(start..end), expected.len(), "{start}..{end}");
        }
    }
}
