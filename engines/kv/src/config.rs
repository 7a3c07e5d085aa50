//! What a benchmark run is asked to do ([`Config`]): the policy, the
//! workload's mix, skew and scope, the run's length and its monitoring
//! periods, and the store. The defaults are written here once
//! ([`Config::default`]) and checked apart from running
//! ([`Config::validate`]).

use std::str::FromStr;
use std::time::Duration;

use quiver_run::InvalidArgument;
use serde::{Deserialize, Serialize};

use crate::policy::Approval;
use crate::store::StoreConfig;

/// Nodes of a benchmark or serve job when its caller names none: the
/// paper's cluster of 8 machines.
pub const NODES: u32 = 8;

/// Where values may live and how nodes find them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Policy {
    /// No migration and no location cache: every remote Get reads the key
    /// and then the value.
    #[serde(rename = "orig")]
    Orig,
    /// Shard-based migration: whole shards of keys and values (100 per
    /// node) move to the node that accessed them most, as the paper's
    /// baseline; no location cache (the shard map says where every key is).
    #[serde(rename = "shard")]
    Shard,
    /// The location cache only.
    #[serde(rename = "cache")]
    Cache,
    /// Split live migration, key lookups uncached (the cache only counts).
    #[serde(rename = "split")]
    Split,
    /// Split live migration with the location cache (Pragh).
    #[serde(rename = "split+cache")]
    SplitCache,
    /// The whole workload on one node, every access local; throughput is
    /// multiplied by the node count (the paper's upper bound).
    #[serde(rename = "ideal")]
    Ideal,
}

impl Policy {
    /// Every policy, in the benchmark's order.
    pub const ALL: [Policy; 6] = [
        Policy::Orig,
        Policy::Shard,
        Policy::Cache,
        Policy::Split,
        Policy::SplitCache,
        Policy::Ideal,
    ];

    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Orig => "orig",
            Policy::Shard => "shard",
            Policy::Cache => "cache",
            Policy::Split => "split",
            Policy::SplitCache => "split+cache",
            Policy::Ideal => "ideal",
        }
    }

    /// Whether values migrate one by one (split live migration).
    pub fn migrates(self) -> bool {
        matches!(self, Policy::Split | Policy::SplitCache)
    }

    /// Whether the location cache answers lookups.
    pub fn serves_cache(self) -> bool {
        matches!(self, Policy::Cache | Policy::SplitCache)
    }

    /// Nodes the job runs on when the user asked for `nodes`.
    pub fn job_nodes(self, nodes: u32) -> u32 {
        if self == Policy::Ideal {
            1
        } else {
            nodes
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Policy, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
                format!("unknown policy {s:?}; one of {}", names.join(", "))
            })
    }
}

/// The share of operations that are queries (the rest are Puts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mix {
    /// Percent of operations that are two-hop queries.
    pub queries: u32,
}

impl FromStr for Mix {
    type Err = String;

    /// `GETS/PUTS` in percent, adding up to 100: `95/5`, `50/50`.
    fn from_str(s: &str) -> std::result::Result<Mix, String> {
        let bad = || format!("mix {s:?} is not GETS/PUTS in percent adding up to 100, like 95/5");
        let (gets, puts) = s.split_once('/').ok_or_else(bad)?;
        let gets: u32 = gets.trim().parse().map_err(|_| bad())?;
        let puts: u32 = puts.trim().parse().map_err(|_| bad())?;
        if gets + puts != 100 {
            return Err(bad());
        }
        Ok(Mix { queries: gets })
    }
}

impl std::fmt::Display for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.queries, 100 - self.queries)
    }
}

/// A benchmark run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Migration and caching.
    pub policy: Policy,
    /// Queries and Puts.
    pub mix: Mix,
    /// Zipf exponent of the start vertices (0: uniform).
    pub zipf: f64,
    /// Start vertices to draw from.
    pub scope: u32,
    /// Neighbours read per hop.
    pub neighbours: u64,
    /// Neighbours a start vertex has at least (1 or more).
    pub min_degree: u64,
    /// How long the workers run.
    pub duration: Duration,
    /// Worker threads per node (0: one per core).
    pub threads: usize,
    /// Period of the time series and of instant monitor reports.
    pub tick: Duration,
    /// Period of the monitor's full reports.
    pub interval: Duration,
    /// Reads per second of one remote pair that the monitor reports at
    /// once, without waiting for the interval's end, over the reads counted
    /// since the interval began. `None` (the default): derived by the run,
    /// as many reads as a migration costs one-sided operations (measured so
    /// far; 5, the protocol's bound, before the first), so a pair reported
    /// pays its move back at the rate it was read.
    pub instant_rate: Option<u32>,
    /// Reads per second of one remote pair that a full report includes.
    /// `None` (the default): derived by the run like the instant floor, as
    /// many reads over the interval as a migration costs one-sided
    /// operations, so a pair reported pays its move back within the next
    /// interval at the rate it was read (the paper's 1 read/s is 10 reads
    /// an interval, about twice what a move costs).
    pub report_rate: Option<u32>,
    /// How many times as often as its holder an applicant must read a pair
    /// ([`Approval::Ratio`], the paper's 1.5). `None` (the default): derived
    /// from the counts ([`Approval::PaysBack`]).
    pub margin: Option<f64>,
    /// Move the scope to the next disjoint range of starts this often.
    pub shift_every: Option<Duration>,
    /// Seed of the workers' choices.
    pub seed: u64,
    /// The store (its cache serving is set by the policy).
    pub store: StoreConfig,
}

impl Default for Config {
    /// The paper's defaults: split+cache, 95/5, Zipf 0.99 over 2^10
    /// starts, 100 neighbours per hop, reports every 10 s; a 30 s run with
    /// one worker per node. The report floors and the approval are the
    /// run's own (see `instant_rate`, `report_rate` and
    /// [`Approval::PaysBack`]): the paper's 100 reads/s left most of a new
    /// hot set remote until the interval's end, and its 1.5x is too loose
    /// for pairs read a few times an interval and too strict for pairs
    /// read thousands of times.
    fn default() -> Self {
        Self {
            policy: Policy::SplitCache,
            mix: Mix { queries: 95 },
            zipf: 0.99,
            scope: 1 << 10,
            neighbours: 100,
            min_degree: 1,
            duration: Duration::from_secs(30),
            threads: 1,
            tick: Duration::from_secs(1),
            interval: Duration::from_secs(10),
            instant_rate: None,
            report_rate: None,
            margin: None,
            shift_every: None,
            seed: 1,
            store: StoreConfig::default(),
        }
    }
}

impl Config {
    /// The coordinator's approval rule: the `margin`, or derived.
    pub fn approval(&self) -> Approval {
        self.margin.map_or(Approval::PaysBack, Approval::Ratio)
    }

    /// Worker threads per node: `threads`, or one per core for 0.
    pub fn workers(&self) -> usize {
        quiver_run::worker_threads(self.threads)
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// An [`InvalidArgument`] naming the first that makes no sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        let invalid = |name: &'static str, reason: String| Err(InvalidArgument::new(name, reason));
        let positive = |name: &'static str, d: Duration| {
            if d.is_zero() {
                invalid(name, "must be longer than 0".into())
            } else {
                Ok(())
            }
        };
        positive("duration", self.duration)?;
        positive("tick", self.tick)?;
        positive("interval", self.interval)?;
        if !self
            .interval
            .as_nanos()
            .is_multiple_of(self.tick.as_nanos())
        {
            return invalid(
                "interval",
                format!(
                    "{:?} is not a whole number of ticks ({:?})",
                    self.interval, self.tick
                ),
            );
        }
        if let Some(every) = self.shift_every {
            positive("shift_every", every)?;
        }
        if self.mix.queries > 100 {
            return invalid("mix", "queries are at most 100%".into());
        }
        if !self.zipf.is_finite() || self.zipf < 0.0 {
            return invalid("zipf", "the exponent must be 0 or more".into());
        }
        if self.scope == 0 {
            return invalid("scope", "needs at least one start vertex".into());
        }
        if let Some(margin) = self.margin {
            if margin.is_nan() || margin < 1.0 {
                return invalid(
                    "margin",
                    "an applicant must read a pair at least as often as its holder (1 or more)"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// The store's configuration under the policy: the location cache
    /// serves lookups under `cache` and `split+cache`, and shards move
    /// under `shard`.
    pub(crate) fn store_config(&self) -> StoreConfig {
        StoreConfig {
            serve_cache: self.policy.serves_cache(),
            shards_move: self.policy == Policy::Shard,
            ..self.store.clone()
        }
    }

    /// Ticks in a monitoring interval.
    pub(crate) fn ticks_per_interval(&self) -> u64 {
        u64::try_from(self.interval.as_nanos() / self.tick.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Ticks of the run: its duration in ticks, the last one cut short.
    pub(crate) fn ticks(&self) -> u64 {
        u64::try_from(self.duration.as_nanos().div_ceil(self.tick.as_nanos())).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every parameter that makes no sense is named by its library name,
    /// the first one when several do.
    #[test]
    fn validate_names_the_parameter_that_makes_no_sense() {
        let ok = Config::default();
        assert_eq!(ok.validate(), Ok(()));
        let bad = [
            (
                "duration",
                Config {
                    duration: Duration::ZERO,
                    ..ok.clone()
                },
            ),
            (
                "tick",
                Config {
                    tick: Duration::ZERO,
                    ..ok.clone()
                },
            ),
            (
                "interval",
                Config {
                    interval: Duration::ZERO,
                    ..ok.clone()
                },
            ),
            (
                "interval",
                Config {
                    interval: Duration::from_millis(1_500),
                    ..ok.clone()
                },
            ),
            (
                "shift_every",
                Config {
                    shift_every: Some(Duration::ZERO),
                    ..ok.clone()
                },
            ),
            (
                "mix",
                Config {
                    mix: Mix { queries: 101 },
                    ..ok.clone()
                },
            ),
            (
                "zipf",
                Config {
                    zipf: f64::NAN,
                    ..ok.clone()
                },
            ),
            (
                "zipf",
                Config {
                    zipf: -0.5,
                    ..ok.clone()
                },
            ),
            (
                "scope",
                Config {
                    scope: 0,
                    ..ok.clone()
                },
            ),
            (
                "margin",
                Config {
                    margin: Some(0.99),
                    ..ok.clone()
                },
            ),
            (
                "duration",
                Config {
                    duration: Duration::ZERO,
                    scope: 0,
                    ..ok.clone()
                },
            ),
        ];
        for (parameter, config) in bad {
            let err = config.validate().unwrap_err();
            assert_eq!(err.parameter, parameter, "{err}");
            assert!(
                err.to_string().starts_with(&format!("{parameter}: ")),
                "{err}"
            );
        }
    }
}
