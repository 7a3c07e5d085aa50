//! Who migrates what: the coordinator's approval rule (Pragh §4.4).
//!
//! Every tick each node's monitor reports the remote pairs it read often
//! (from its location cache's counters) and the keys homed on it whose
//! values live elsewhere. The coordinator approves moving a pair's value to
//! the node that read it most when that node's reads beat the value's
//! holder's by the [`Approval`] rule, unless another node read it nearly
//! as often (the two cannot be told apart: a contended pair stays put) or
//! it moved less than `rest` ticks ago (no ping-pong). What a home
//! knows of its own reads of the values it holds is the [`Plan`]'s: none
//! (eager), a candidate's, counted from when the coordinator asked until
//! the next interval's end (deferred), or all of them always (tracked).
//!
//! [`Coordinator::plan`] is a pure function of the reports and its own
//! past decisions; every node runs it on the same gathered reports and so
//! reaches the same plan without a coordinator process.
//!
//! The `shard` baseline plans with [`plan_shards`] instead: the paper's
//! optimal plan over exact per-shard access counts (§5, "tracking every
//! access", its cost not counted).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::layout::Placement;

/// How a home's own reads of the values it holds enter the coordinator's
/// decisions (Pragh §4.4, "eager and deferred migration").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Plan {
    /// The paper's eager plan: a home does not count its reads of the
    /// values it holds, so a pair another node reads often moves at once,
    /// however often its home reads it; the home counts its reads once the
    /// value has moved away, and may take it back (migrate-back).
    Eager,
    /// The paper's deferred plan: a pair that passes the applicant's floor
    /// becomes a candidate; the coordinator asks its home to count its own
    /// reads of it ([`Store::track`](crate::Store::track)) and decides at
    /// the next interval's end (a whole interval later if asked at one),
    /// with every node's counts, the home's scaled to the whole interval.
    /// Slower by up to an interval; in exchange no pair moves away from a
    /// home that reads it as often (the eager plan then needs a second
    /// round to bring such pairs back).
    Deferred,
    /// A home counts every read of every value it holds, all the time: the
    /// deferred plan's statistics without its interval of delay, for a
    /// table of the home's reads beside the location cache (this crate's
    /// default).
    #[default]
    Tracked,
}

impl Plan {
    /// Every plan.
    pub const ALL: [Plan; 3] = [Plan::Eager, Plan::Deferred, Plan::Tracked];

    /// The plan's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Plan::Eager => "eager",
            Plan::Deferred => "deferred",
            Plan::Tracked => "tracked",
        }
    }
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Plan {
    type Err = String;

    fn from_str(s: &str) -> Result<Plan, String> {
        Plan::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown plan {s:?} (eager, deferred or tracked)"))
    }
}

/// When one node's reads of a pair beat another's: an applicant must beat
/// the value's holder to be approved, and a contended pair (its top reader
/// does not beat the second) stays put.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Approval {
    /// The paper's rule (§4.4, 1.5 there): at least this many times the
    /// other's reads.
    Ratio(f64),
    /// Derived from the run's counts (this crate's default). Against the
    /// holder, moving must pay: the applicant's reads exceed the holder's
    /// by at least a migration's one-sided operations (a read made local
    /// saves one remote READ, the move costs its operations once), and by
    /// twice the standard deviation of the difference of two Poisson
    /// counts of the same rate, `2 √(a + b)`, so that two nodes reading a
    /// pair alike do not trade it on chance. Against a rival reader only
    /// the second part applies: moving to either would pay the same.
    PaysBack,
}

impl Approval {
    /// Whether `count` reads beat `other`'s, a move costing `cost` one-sided
    /// operations (0 when nothing moves between the two).
    fn beats(self, count: u32, other: u32, cost: u32) -> bool {
        let (count, other) = (f64::from(count), f64::from(other));
        match self {
            Approval::Ratio(margin) => count >= margin * other,
            Approval::PaysBack => {
                count - other >= f64::from(cost).max(2.0 * (count + other).sqrt())
            }
        }
    }

    /// The fewest reads a node reports of a pair, when an applicant needs
    /// `floor`: under a ratio, what could still stop an applicant at the
    /// floor; derived, half the floor (fewer reads than that are taken as
    /// none, so a derived holder check is approximate below it).
    pub fn reported(self, floor: u32) -> u32 {
        let ratio = match self {
            Approval::Ratio(margin) => margin,
            Approval::PaysBack => 2.0,
        };
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let reported = (f64::from(floor) / ratio).floor() as u32;
        reported.max(1)
    }
}

/// One pair's approved move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// The vertex.
    pub key: u32,
    /// The node that will hold its value (it runs the migration).
    pub target: u32,
}

/// The coordinator's memory: where values are and when they last moved.
#[derive(Clone, Debug)]
pub struct Coordinator {
    placement: Placement,
    approval: Approval,
    rest: u64,
    holders: HashMap<u32, u32>,
    moved_at: HashMap<u32, u64>,
    contended: u64,
    shared: u64,
    mostly_remote: u64,
    /// Under the deferred plan, ticks per interval.
    deferred: Option<u64>,
    /// Candidates whose homes count their reads, and the tick they began.
    pending: BTreeMap<u32, u64>,
    /// Keys the last plan asked homes to start counting, and to stop.
    asked: Vec<u32>,
    settled: Vec<u32>,
}

impl Coordinator {
    /// A coordinator for `placement` with the `approval` rule and `rest`
    /// ticks between moves of one pair.
    pub fn new(placement: Placement, approval: Approval, rest: u64) -> Coordinator {
        Coordinator {
            placement,
            approval,
            rest,
            holders: HashMap::new(),
            moved_at: HashMap::new(),
            contended: 0,
            shared: 0,
            mostly_remote: 0,
            deferred: None,
            pending: BTreeMap::new(),
            asked: Vec::new(),
            settled: Vec::new(),
        }
    }

    /// The same coordinator under the deferred plan, with `interval` ticks
    /// per monitoring interval: a pair whose value is at its home moves
    /// only at an interval's end after its home began counting its own
    /// reads of it, which are then scaled to the whole interval.
    #[must_use]
    pub fn deferring(self, interval: u64) -> Coordinator {
        Coordinator {
            deferred: Some(interval.max(1)),
            ..self
        }
    }

    /// Keys whose homes the last [`Coordinator::plan`] asked to start
    /// counting their reads (new candidates), and to stop (decided or
    /// dropped). Every node runs the same plan, so each applies the keys
    /// homed on it.
    pub fn tracking(&self) -> (&[u32], &[u32]) {
        (&self.asked, &self.settled)
    }

    /// Candidates waiting for their homes' counts.
    pub fn candidates(&self) -> usize {
        self.pending.len()
    }

    /// The node holding `key`'s value, as far as the coordinator approved.
    pub fn holder(&self, key: u32) -> u32 {
        self.holders
            .get(&key)
            .copied()
            .unwrap_or_else(|| self.placement.home_node(key))
    }

    /// Applications refused because another node read the pair nearly as
    /// often as the applicant, so far.
    pub fn contended(&self) -> u64 {
        self.contended
    }

    /// Reads in the last plan's reports that no placement of one copy per
    /// pair could make local: for each pair, every read but its most
    /// frequent reader's.
    pub fn shared(&self) -> u64 {
        self.shared
    }

    /// Keys in the last plan's reports that nodes other than their home
    /// read more often than their home did: the keys one copy each would
    /// have to move away from home to make most reads local.
    pub fn mostly_remote(&self) -> u64 {
        self.mostly_remote
    }

    /// Pairs whose values live away from their home.
    pub fn moved(&self) -> usize {
        self.holders.len()
    }

    /// The moves approved at `tick` from every node's report (by rank: the
    /// pairs it read and how often since the interval began). An applicant
    /// needs at least `at_least` reads; a migration costs `cost` one-sided
    /// operations (the [`Approval::PaysBack`] rule weighs it).
    pub fn plan(
        &mut self,
        tick: u64,
        reports: &[Vec<(u32, u32)>],
        at_least: u32,
        cost: u32,
    ) -> Vec<Move> {
        let mut reads: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
        for (node, report) in reports.iter().enumerate() {
            let node = u32::try_from(node).expect("ranks fit u32");
            for &(key, count) in report {
                reads.entry(key).or_default().push((node, count));
            }
        }
        let mut moves = Vec::new();
        self.shared = 0;
        self.mostly_remote = 0;
        self.asked.clear();
        self.settled.clear();
        let decides = self
            .deferred
            .is_some_and(|interval| tick.is_multiple_of(interval));
        for (key, mut readers) in reads {
            readers.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            self.shared += readers[1..].iter().map(|r| u64::from(r.1)).sum::<u64>();
            let home = self.placement.home_node(key);
            let (at_home, away) = readers.iter().fold((0u64, 0u64), |(h, a), &(node, n)| {
                if node == home {
                    (h + u64::from(n), a)
                } else {
                    (h, a + u64::from(n))
                }
            });
            if away > at_home {
                self.mostly_remote += 1;
            }
            let (applicant, count) = readers[0];
            let holder = self.holder(key);
            if applicant == holder || count < at_least {
                continue;
            }
            let holder_reads = readers
                .iter()
                .find(|(node, _)| *node == holder)
                .map_or(0, |r| r.1);
            let rival = readers
                .iter()
                .skip(1)
                .find(|(node, _)| *node != holder)
                .map_or(0, |r| r.1);
            let rested = self
                .moved_at
                .get(&key)
                .is_none_or(|&at| tick >= at + self.rest);
            if rival > 0 && !self.approval.beats(count, rival, 0) {
                self.contended += 1;
                continue;
            }
            let mut holder_reads = holder_reads;
            if let Some(interval) = self.deferred {
                if holder == self.placement.home_node(key) {
                    match self.pending.get(&key) {
                        // A pair that moved lately waits until it may move
                        // again before its home is asked.
                        None if !rested => continue,
                        None => {
                            self.pending.insert(key, tick);
                            self.asked.push(key);
                            continue;
                        }
                        // (The sweep below keeps `tick - since` within an
                        // interval, and a key is seen once a plan.)
                        Some(&since) if !decides || tick == since => continue,
                        Some(&since) => {
                            // The home counted from `since`, the readers
                            // the whole interval: its rate is scaled up.
                            #[allow(clippy::cast_precision_loss)]
                            let scale = interval as f64 / (tick - since).min(interval) as f64;
                            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                            {
                                holder_reads = (f64::from(holder_reads) * scale).round() as u32;
                            }
                            self.pending.remove(&key);
                            self.settled.push(key);
                        }
                    }
                }
            }
            if rested && self.approval.beats(count, holder_reads, cost) {
                if applicant == home {
                    self.holders.remove(&key);
                } else {
                    self.holders.insert(key, applicant);
                }
                self.moved_at.insert(key, tick);
                moves.push(Move {
                    key,
                    target: applicant,
                });
            }
        }
        if decides {
            // Candidates whose interval ended and that no longer pass are
            // dropped.
            let settled = &mut self.settled;
            self.pending.retain(|&key, &mut since| {
                let waits = since == tick;
                if !waits {
                    settled.push(key);
                }
                waits
            });
        }
        moves
    }
}

/// One shard's move in a shard plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardMove {
    /// The shard.
    pub shard: u32,
    /// Its node now.
    pub from: u32,
    /// The node that will hold it (it copies the shard).
    pub to: u32,
}

/// The optimal shard plan: every shard goes to the node that accessed it
/// most (`accesses[node][shard]`), which makes the most accesses local that
/// any placement of whole shards can; a shard stays where it is (`homes`)
/// unless another node accessed it strictly more.
pub fn plan_shards(homes: &[u32], accesses: &[Vec<u32>]) -> Vec<ShardMove> {
    let mut moves = Vec::new();
    for (shard, &home) in homes.iter().enumerate() {
        let count = |node: usize| accesses[node].get(shard).copied().unwrap_or(0);
        let best = (0..accesses.len())
            .max_by_key(|&node| (count(node), node == home as usize))
            .and_then(|node| u32::try_from(node).ok());
        if let Some(to) = best.filter(|&to| count(to as usize) > count(home as usize)) {
            moves.push(ShardMove {
                shard: u32::try_from(shard).expect("shards fit u32"),
                from: home,
                to,
            });
        }
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against brute force over every placement of 3 shards on 3 nodes:
        /// the plan's local accesses are the most any placement reaches, and
        /// it moves only shards whose node was not among their best.
        #[test]
        fn the_shard_plan_makes_the_most_accesses_local(
            homes in proptest::collection::vec(0u32..3, 3),
            accesses in proptest::collection::vec(proptest::collection::vec(0u32..5, 3), 3),
        ) {
            let local = |placement: &[u32]| -> u32 {
                placement.iter().enumerate().map(|(s, &n)| accesses[n as usize][s]).sum()
            };
            let mut planned = homes.clone();
            for m in plan_shards(&homes, &accesses) {
                prop_assert_eq!(planned[m.shard as usize], m.from);
                prop_assert!(accesses[m.to as usize][m.shard as usize] > accesses[m.from as usize][m.shard as usize]);
                planned[m.shard as usize] = m.to;
            }
            let best = (0..27u32)
                .map(|i| local(&[i % 3, i / 3 % 3, i / 9]))
                .max()
                .unwrap();
            prop_assert_eq!(local(&planned), best);
        }
    }

    fn coordinator() -> (Coordinator, u32, u32) {
        let placement = Placement::new(1000, 4);
        let key = 17;
        let home = placement.home_node(key);
        (
            Coordinator::new(placement, Approval::Ratio(1.5), 2),
            key,
            home,
        )
    }

    fn report(nodes: usize, entries: &[(u32, u32, u32)]) -> Vec<Vec<(u32, u32)>> {
        let mut reports = vec![Vec::new(); nodes];
        for &(node, key, count) in entries {
            reports[node as usize].push((key, count));
        }
        reports
    }

    #[test]
    fn the_reader_gets_the_value_only_with_the_margin_and_the_home_can_take_it_back() {
        let (mut c, key, home) = coordinator();
        let a = (home + 1) % 4;
        let b = (home + 2) % 4;
        // Below the applicant's floor: nothing.
        assert!(c.plan(0, &report(4, &[(a, key, 9)]), 10, 5).is_empty());
        let moves = c.plan(0, &report(4, &[(a, key, 10)]), 10, 5);
        assert_eq!(moves, vec![Move { key, target: a }]);
        assert_eq!(c.holder(key), a);
        assert_eq!(c.moved(), 1);
        // Resting: b reads far more, but the pair just moved.
        assert!(c
            .plan(1, &report(4, &[(b, key, 100), (a, key, 10)]), 10, 5)
            .is_empty());
        // b needs 1.5x a's reads: 14 < 15 is refused, 15 passes.
        assert!(c
            .plan(2, &report(4, &[(b, key, 14), (a, key, 10)]), 10, 5)
            .is_empty());
        assert_eq!(
            c.plan(2, &report(4, &[(b, key, 15), (a, key, 10)]), 10, 5),
            vec![Move { key, target: b }]
        );
        // The home reads it most now: it migrates back.
        assert_eq!(
            c.plan(4, &report(4, &[(home, key, 50)]), 10, 5),
            vec![Move { key, target: home }]
        );
        assert_eq!(c.moved(), 0);
    }

    #[test]
    fn deferred_candidates_wait_for_their_homes_counts_until_the_interval_ends() {
        let (c, key, home) = coordinator();
        let mut c = c.deferring(4);
        let a = (home + 1) % 4;
        let other = key + 1;
        let other_home = c.placement.home_node(other);
        let b = (other_home + 1) % 4;
        // Tick 1: both pass the floor; their homes are asked to count.
        let both = report(4, &[(a, key, 20), (b, other, 20)]);
        assert!(c.plan(1, &both, 10, 5).is_empty());
        assert_eq!(c.tracking(), (&[key, other][..], &[][..]));
        assert_eq!(c.candidates(), 2);
        // Ticks 2 and 3 end no interval.
        assert!(c.plan(3, &both, 10, 5).is_empty());
        assert_eq!(c.tracking(), (&[][..], &[][..]));
        // Tick 4 ends the interval: decided with the homes' counts of 3
        // ticks, scaled to 4. `key`'s home read it 9 times, as if 12: 20
        // reads pass 1.5x that; `other`'s home read it 11 times, as if
        // 14.7: 20 fall short of 1.5x (without the scaling they would
        // pass), so that value stays.
        let counted = report(
            4,
            &[
                (a, key, 20),
                (home, key, 9),
                (b, other, 20),
                (other_home, other, 11),
            ],
        );
        assert_eq!(c.plan(4, &counted, 10, 5), vec![Move { key, target: a }]);
        assert_eq!(c.tracking(), (&[][..], &[key, other][..]));
        assert_eq!(
            (c.candidates(), c.holder(key), c.holder(other)),
            (0, a, other_home)
        );
        // Asked at an interval's end (tick 8), a candidate waits a whole
        // interval; one that no longer passes then is dropped.
        assert!(c.plan(8, &report(4, &[(b, other, 20)]), 10, 5).is_empty());
        assert_eq!(c.tracking(), (&[other][..], &[][..]));
        assert!(c.plan(12, &report(4, &[(b, other, 3)]), 10, 5).is_empty());
        assert_eq!(c.tracking(), (&[][..], &[other][..]));
        assert_eq!(c.candidates(), 0);
        // A moved value's holder counts its reads already: no waiting.
        let b_key = (home + 2) % 4;
        assert_eq!(
            c.plan(13, &report(4, &[(b_key, key, 40), (a, key, 5)]), 10, 5),
            vec![Move { key, target: b_key }]
        );
    }

    #[test]
    fn a_deferred_pair_back_home_is_not_a_candidate_until_rested() {
        let (c, key, home) = coordinator();
        let mut c = c.deferring(4);
        let a = (home + 1) % 4;
        assert!(c.plan(1, &report(4, &[(a, key, 20)]), 10, 5).is_empty());
        assert_eq!(
            c.plan(4, &report(4, &[(a, key, 20)]), 10, 5),
            vec![Move { key, target: a }]
        );
        // Away from home the holder's reads are known: back at once.
        assert_eq!(
            c.plan(6, &report(4, &[(home, key, 50)]), 10, 5),
            vec![Move { key, target: home }]
        );
        // Resting (rest 2): not asked about at tick 7, asked at tick 8.
        assert!(c.plan(7, &report(4, &[(a, key, 20)]), 10, 5).is_empty());
        assert_eq!(c.tracking(), (&[][..], &[][..]));
        assert!(c.plan(8, &report(4, &[(a, key, 20)]), 10, 5).is_empty());
        assert_eq!(c.tracking(), (&[key][..], &[][..]));
    }

    #[test]
    fn plans_read_back_their_names_and_unknown_ones_are_named() {
        for plan in Plan::ALL {
            assert_eq!(plan.to_string().parse::<Plan>(), Ok(plan));
        }
        let err = "lazy".parse::<Plan>().unwrap_err();
        assert!(err.contains("unknown plan \"lazy\""), "{err}");
    }

    #[test]
    fn a_contended_pair_stays_put() {
        let (mut c, key, home) = coordinator();
        let a = (home + 1) % 4;
        let b = (home + 2) % 4;
        assert!(c
            .plan(0, &report(4, &[(a, key, 100), (b, key, 70)]), 10, 5)
            .is_empty());
        assert_eq!(c.holder(key), home);
        // Equal reads: still contended (ties go to the lower rank, then fail the margin).
        assert!(c
            .plan(1, &report(4, &[(a, key, 50), (b, key, 50)]), 10, 5)
            .is_empty());
        assert_eq!(
            c.plan(2, &report(4, &[(a, key, 100), (b, key, 66)]), 10, 5),
            vec![Move { key, target: a }]
        );
    }

    #[test]
    fn a_derived_approval_moves_a_pair_when_the_move_pays_and_the_reads_differ_past_chance() {
        let placement = Placement::new(1000, 4);
        let key = 17;
        let home = placement.home_node(key);
        let (a, b) = ((home + 1) % 4, (home + 2) % 4);
        let mut c = Coordinator::new(placement, Approval::PaysBack, 2);
        // Alone, a reader needs as many reads as the move costs.
        assert!(c.plan(0, &report(4, &[(a, key, 5)]), 1, 6).is_empty());
        assert_eq!(
            c.plan(0, &report(4, &[(a, key, 6)]), 1, 6),
            vec![Move { key, target: a }]
        );
        // Against the holder a (100 reads): 120 is within chance
        // (20 < 2 √220 = 29.7), 140 is not (40 ≥ 2 √240 = 31.0).
        assert!(c
            .plan(2, &report(4, &[(b, key, 120), (a, key, 100)]), 1, 6)
            .is_empty());
        assert_eq!(
            c.plan(2, &report(4, &[(b, key, 140), (a, key, 100)]), 1, 6),
            vec![Move { key, target: b }]
        );
        // Against a rival, chance alone: 100 and 85 cannot be told apart
        // (15 < 2 √185 = 27.2), 100 and 70 can (30 ≥ 2 √170 = 26.1).
        let other = key + 1;
        let other_home = c.placement.home_node(other);
        let (x, y) = ((other_home + 1) % 4, (other_home + 2) % 4);
        assert!(c
            .plan(4, &report(4, &[(x, other, 100), (y, other, 85)]), 1, 6)
            .is_empty());
        assert_eq!(c.contended(), 1);
        assert_eq!(
            c.plan(4, &report(4, &[(x, other, 100), (y, other, 70)]), 1, 6),
            vec![Move {
                key: other,
                target: x
            }]
        );
    }

    /// Two nodes reading a pair at the same rate: their counts differ by
    /// chance, and the derived rule lets the pair change hands on at most
    /// a few percent of intervals at any rate, where a fixed 1.5x trades
    /// it often at low rates and never lets a real 1.3x difference win at
    /// high ones.
    #[test]
    fn a_derived_approval_ignores_chance_at_every_rate_and_sees_real_differences() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Poisson};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let traded = |rate: f64, factor: f64, approval: Approval, rng: &mut rand_pcg::Pcg64| {
            let (faster, slower) = (
                Poisson::new(rate * factor).unwrap(),
                Poisson::new(rate).unwrap(),
            );
            let draws = 4_000;
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let won = (0..draws)
                .filter(|_| {
                    let (a, b) = (faster.sample(rng) as u32, slower.sample(rng) as u32);
                    a >= 5 && approval.beats(a, b, 5)
                })
                .count();
            #[allow(clippy::cast_precision_loss)]
            let share = won as f64 / f64::from(draws);
            share
        };
        for rate in [10.0, 100.0, 1_000.0, 10_000.0] {
            let chance = traded(rate, 1.0, Approval::PaysBack, &mut rng);
            assert!(chance < 0.05, "equal readers at {rate}: traded {chance}");
        }
        // The paper's 1.5x at 10 reads an interval trades equal readers
        // often; the derived rule finds a 1.3x reader at 1,000.
        assert!(traded(10.0, 1.0, Approval::Ratio(1.5), &mut rng) > 0.1);
        assert!(traded(1_000.0, 1.3, Approval::PaysBack, &mut rng) > 0.99);
        assert!(traded(1_000.0, 1.3, Approval::Ratio(1.5), &mut rng) < 0.01);
    }
}
