//! Packing: which lists go in which page, for GraphInitialize and for a
//! rewritten group.

use std::ops::Range;

use quiver_csr::Graph;
use quiver_run::Progress;

use crate::error::Result;
use crate::page::{PageFormat, CONTINUED, CONTINUES, FIXED_FOOTER, TUPLE};

/// One page of a layout before it is written.
#[derive(Debug)]
pub(crate) struct Plan {
    pub vsid: u32,
    pub(super) flags: u32,
    /// Each list's range in the concatenated entries.
    pub(super) lists: Vec<Range<usize>>,
}

/// Pages for consecutive lists of lengths `lens`, the first of vertex
/// `first`, packed greedily (GraphInitialize's rule).
pub(crate) fn plan(
    first: u32,
    lens: impl IntoIterator<Item = usize>,
    format: &PageFormat,
) -> Vec<Plan> {
    let max = format.max_list();
    let mut pages = Vec::new();
    let mut open: Option<(Plan, usize)> = None;
    let mut start = 0;
    for (v, len) in (first..).zip(lens) {
        let end = start + len;
        if len > max {
            pages.extend(open.take().map(|(p, _)| p));
            let mut at = start;
            while end - at > max {
                let flags = CONTINUES | if at > start { CONTINUED } else { 0 };
                pages.push(Plan {
                    vsid: v,
                    flags,
                    lists: one(at..at + max),
                });
                at += max;
            }
            open = Some((
                Plan {
                    vsid: v,
                    flags: CONTINUED,
                    lists: one(at..end),
                },
                end - at,
            ));
        } else {
            match &mut open {
                Some((page, entries)) if format.fits(page.lists.len() + 1, *entries + len) => {
                    page.lists.push(start..end);
                    *entries += len;
                }
                _ => {
                    pages.extend(open.take().map(|(p, _)| p));
                    open = Some((
                        Plan {
                            vsid: v,
                            flags: 0,
                            lists: one(start..end),
                        },
                        len,
                    ));
                }
            }
        }
        start = end;
    }
    pages.extend(open.map(|(p, _)| p));
    pages
}

/// The pages of `plans` over the concatenated lists `entries`.
pub(crate) fn encode_pages(plans: &[Plan], entries: &[u32], format: &PageFormat) -> Vec<Vec<u8>> {
    plans
        .iter()
        .map(|p| {
            let lists: Vec<&[u32]> = p.lists.iter().map(|r| &entries[r.clone()]).collect();
            format.encode(p.vsid, p.flags, &lists)
        })
        .collect()
}

/// The lengths of the lists whose CSR offsets are `offsets`.
pub(crate) fn lens(offsets: &[u64]) -> impl Iterator<Item = usize> + '_ {
    offsets
        .windows(2)
        .map(|w| usize::try_from(w[1] - w[0]).expect("a list's length fits usize"))
}

/// Vertices [`transpose`] turns between asking its progress whether to
/// stop.
const VERTICES_A_CHECK: u32 = 1 << 16;

/// Lists as CSR arrays: offsets, neighbours, weights.
pub(super) type CsrLists = (Vec<u64>, Vec<u32>, Option<Vec<f32>>);

/// A directed graph's in-lists as CSR (offsets, sources, weights): each
/// vertex's in-neighbours in increasing order of source. Stops with
/// [`crate::Error::Cancelled`] when `progress` asks.
pub(super) fn transpose(graph: &Graph, progress: &dyn Progress) -> Result<CsrLists> {
    let n = graph.num_vertices() as usize;
    let (out_offsets, targets, out_weights) = (graph.offsets(), graph.targets(), graph.weights());
    let mut offsets = vec![0u64; n + 1];
    for &t in targets {
        offsets[t as usize + 1] += 1;
    }
    for i in 1..=n {
        offsets[i] += offsets[i - 1];
    }
    let mut fill: Vec<u64> = offsets[..n].to_vec();
    let mut sources = vec![0u32; targets.len()];
    let mut weights = out_weights.map(|w| vec![0f32; w.len()]);
    let index = |x: u64| usize::try_from(x).expect("an offset fits usize");
    for v in 0..graph.num_vertices() {
        if v % VERTICES_A_CHECK == 0 {
            progress.check()?;
        }
        let list = index(out_offsets[v as usize])..index(out_offsets[v as usize + 1]);
        for e in list {
            let t = targets[e] as usize;
            let at = index(fill[t]);
            fill[t] += 1;
            sources[at] = v;
            if let (Some(w), Some(from)) = (&mut weights, out_weights) {
                w[at] = from[e];
            }
        }
    }
    Ok((offsets, sources, weights))
}

/// Graph pages (neighbour and weight pages, of both directions on a
/// directed graph) GraphInitialize writes for `graph` under `format`.
pub(crate) fn pages_needed(
    graph: &Graph,
    format: &PageFormat,
    progress: &dyn Progress,
) -> Result<u64> {
    let mut pages = plan(0, lens(graph.offsets()), format).len() as u64;
    if !graph.is_undirected() {
        pages += plan(0, lens(&transpose(graph, progress)?.0), format).len() as u64;
    }
    Ok(pages * if graph.is_weighted() { 2 } else { 1 })
}

/// Pages of `format` that `entry_bytes` of neighbours and `vertices`
/// tuples fill if lists may split anywhere: [`Layout::tight_pages`].
pub(super) fn tight_pages(format: &PageFormat, entry_bytes: u64, vertices: u32) -> u64 {
    let usable = (format.budget() - FIXED_FOOTER - TUPLE) as u64;
    (entry_bytes + u64::from(vertices) * TUPLE as u64).div_ceil(usable)
}

/// Pages for a rewritten group's lists: one page if they fit, else two
/// split where their used bytes are most equal (both must fit and no list
/// may be longer than a page holds), else [`plan`]'s greedy packing.
pub(super) fn plan_rewrite(first: u32, lens: &[usize], format: &PageFormat) -> Vec<Plan> {
    let total: usize = lens.iter().sum();
    let page = |vsid: u32, lens: &[usize], offset: usize| Plan {
        vsid,
        flags: 0,
        lists: lens
            .iter()
            .scan(offset, |at, &len| {
                *at += len;
                Some(*at - len..*at)
            })
            .collect(),
    };
    let max = format.max_list();
    if lens.iter().all(|&l| l <= max) {
        if format.fits(lens.len(), total) {
            return vec![page(first, lens, 0)];
        }
        let mut left = 0;
        let mut best: Option<(usize, usize)> = None;
        for k in 1..lens.len() {
            left += lens[k - 1];
            let (a, b) = (
                PageFormat::used(k, left),
                PageFormat::used(lens.len() - k, total - left),
            );
            if format.fits(k, left)
                && format.fits(lens.len() - k, total - left)
                && best.is_none_or(|(_, d)| a.abs_diff(b) < d)
            {
                best = Some((k, a.abs_diff(b)));
            }
        }
        if let Some((k, _)) = best {
            let left: usize = lens[..k].iter().sum();
            let second = first + u32::try_from(k).expect("a group has fewer than 2^32 lists");
            return vec![page(first, &lens[..k], 0), page(second, &lens[k..], left)];
        }
    }
    plan(first, lens.iter().copied(), format)
}

/// A page's list of ranges holding `range` alone.
fn one(range: Range<usize>) -> Vec<Range<usize>> {
    std::iter::once(range).collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn an_overflowing_page_splits_where_free_space_is_most_equal() {
        let format = PageFormat::new(64, 0.0).unwrap();
        // used(n, e) = 4e + 8(n + 1) + 16; a 64-byte page holds 3 lists of
        // 2 (4*6 + 32 + 16 = 72 > 64) only as 2 + 1.
        let plans = plan_rewrite(10, &[2, 2, 2], &format);
        let shape: Vec<(u32, Vec<Range<usize>>)> =
            plans.iter().map(|p| (p.vsid, p.lists.clone())).collect();
        assert_eq!(shape, [(10, one(0..2)), (11, vec![2..4, 4..6])]);
        assert_eq!(plan_rewrite(3, &[1, 1], &format).len(), 1, "fits one page");
        let dense = plan_rewrite(0, &[20, 1], &format);
        assert!(dense.len() > 2 && dense[0].flags & CONTINUES != 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A rewritten group of lists no longer than a page holds goes to
        /// one page if it fits; else to two, split where their used bytes
        /// differ least of all the splits whose halves fit (every split
        /// tried here); else to greedy pages. Every list lands whole, in
        /// order, on a page that fits it, under its own vertex id.
        #[test]
        fn a_rewrite_splits_where_used_bytes_are_most_equal(
            lens in prop::collection::vec(0usize..=8, 1..14),
            first in 0u32..1000,
        ) {
            let format = PageFormat::new(64, 0.0).unwrap();
            // 8 entries is the longest list a 64-byte page holds alone.
            prop_assert_eq!(format.max_list(), 8);
            let plans = plan_rewrite(first, &lens, &format);
            let mut at = (first, 0);
            for plan in &plans {
                prop_assert_eq!(plan.flags, 0);
                prop_assert_eq!(plan.vsid, at.0);
                let entries = plan.lists.iter().map(ExactSizeIterator::len).sum();
                prop_assert!(format.fits(plan.lists.len(), entries));
                for range in &plan.lists {
                    prop_assert_eq!(range.start, at.1);
                    at = (at.0 + 1, range.end);
                }
            }
            let lists = u32::try_from(lens.len()).unwrap();
            prop_assert_eq!(at, (first + lists, lens.iter().sum()));
            let total: usize = lens.iter().sum();
            let imbalance = |k: usize| {
                let left: usize = lens[..k].iter().sum();
                let halves = [(k, left), (lens.len() - k, total - left)];
                halves
                    .iter()
                    .all(|&(n, e)| format.fits(n, e))
                    .then(|| PageFormat::used(k, left).abs_diff(PageFormat::used(lens.len() - k, total - left)))
            };
            let best = (1..lens.len()).filter_map(imbalance).min();
            if format.fits(lens.len(), total) {
                prop_assert_eq!(plans.len(), 1);
            } else if let Some(best) = best {
                prop_assert_eq!(plans.len(), 2);
                prop_assert_eq!(imbalance(plans[0].lists.len()), Some(best));
            } else {
                prop_assert!(plans.len() > 2);
            }
        }
    }
}
