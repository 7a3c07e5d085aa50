//! The host's non-blocking request and response queues (GraphSSD §4.3:
//! "a request queue and response queues"): an application posts
//! GetAdjacencyList requests while earlier ones are on the device and
//! takes their lists as they complete.
//!
//! [`Queues`] keeps at most [`Submit::in_flight`] requests outstanding,
//! each holding its slot in the request queue until its list arrives
//! (Algorithm 1 waits for a free slot before each request), whether it
//! waits on the device or on a page an earlier request is reading. In a
//! [`Window`](Submission::Window) a new request goes in as soon as any one
//! arrives; with [`Batches`](Submission::Batches) the host submits
//! `in_flight` requests and waits for every one of them before it submits
//! the next batch (a barrier). Time is the device's
//! model ([`crate::flash`]): requests are submitted at the host's clock,
//! the time of the last response it took, and every read is issued in
//! time order: a baseline request's `colIdx` reads are issued when its
//! `rowPtr` pages arrive, after every read issued before that moment.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::flash::Nanos;
use crate::source::GraphSource;

/// How the host keeps requests in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Submission {
    /// A sliding window: a request goes in whenever one completes (the
    /// paper's non-blocking queues).
    #[default]
    Window,
    /// Barriered batches: a batch goes in when the last completed.
    Batches,
}

/// Requests in flight and how they are kept there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submit {
    /// Requests outstanding at once, at most (at least 1); in batches,
    /// the requests of a batch.
    pub in_flight: usize,
    /// Window or batches.
    pub submission: Submission,
}

impl Submit {
    /// One barriered batch of `n` requests.
    pub fn batch(n: usize) -> Submit {
        Submit {
            in_flight: n.max(1),
            submission: Submission::Batches,
        }
    }
}

/// What issuing a request's reads led to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Issued {
    /// The list, whole when its last page arrives at `done`.
    Done {
        /// The out-list.
        list: Vec<u32>,
        /// When its last page (or delta page) reached the host.
        done: Nanos,
    },
    /// More reads, which depend on the ones issued: the baseline's
    /// `colIdx` bytes, readable when its `rowPtr` pages arrive at `until`.
    Then {
        /// When the reads issued so far have arrived.
        until: Nanos,
        /// The file's bytes to read next.
        bytes: Range<u64>,
    },
}

/// A request whose list reached the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The caller's tag for the request.
    pub token: usize,
    /// The vertex asked for.
    pub vertex: u32,
    /// Its out-list.
    pub list: Vec<u32>,
    /// When it reached the host.
    pub done: Nanos,
}

/// A request's next moment: its reads arrive at `at`.
#[derive(Debug)]
struct Event {
    at: Nanos,
    seq: u64,
    token: usize,
    vertex: u32,
    state: Issued,
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Event) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Event {
    fn cmp(&self, other: &Event) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A run of requests on `source`, begun at its clock; [`Queues::finish`]
/// moves the clock to the last response and counts the run.
pub struct Queues<'a, S: GraphSource + ?Sized> {
    source: &'a mut S,
    submit: Submit,
    /// The host's clock: when it took the last response.
    now: Nanos,
    start: Nanos,
    /// Requests submitted in the batch being filled (batches only: the
    /// batch is full at `in_flight`, and starts again when all arrived).
    batched: usize,
    /// Requests not yet taken.
    in_flight: usize,
    requests: u64,
    seq: u64,
    events: BinaryHeap<Reverse<Event>>,
}

impl<S: GraphSource + ?Sized> std::fmt::Debug for Queues<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queues")
            .field("submit", &self.submit)
            .field("now", &self.now)
            .field("in_flight", &self.in_flight)
            .field("requests", &self.requests)
            .finish_non_exhaustive()
    }
}

impl<'a, S: GraphSource + ?Sized> Queues<'a, S> {
    /// Empty queues on `source`, at its clock.
    pub fn new(source: &'a mut S, submit: Submit) -> Queues<'a, S> {
        let now = source.now();
        Queues {
            source,
            submit: Submit {
                in_flight: submit.in_flight.max(1),
                ..submit
            },
            now,
            start: now,
            batched: 0,
            in_flight: 0,
            requests: 0,
            seq: 0,
            events: BinaryHeap::new(),
        }
    }

    /// Whether a request must wait for an arrival before it can go in.
    pub fn is_full(&self) -> bool {
        match self.submit.submission {
            Submission::Window => self.in_flight >= self.submit.in_flight,
            Submission::Batches => self.batched >= self.submit.in_flight,
        }
    }

    /// Whether no request is in flight.
    pub fn is_idle(&self) -> bool {
        self.in_flight == 0
    }

    /// Submits the request for `vertex`'s list, tagged `token`, at the
    /// host's clock. Call only when not [`is_full`](Queues::is_full).
    pub fn request(&mut self, token: usize, vertex: u32) -> Result<()> {
        debug_assert!(!self.is_full(), "a request into full queues");
        let state = self.source.issue(vertex, self.now)?;
        self.in_flight += 1;
        self.requests += 1;
        self.batched += 1;
        self.push(token, vertex, state);
        Ok(())
    }

    fn push(&mut self, token: usize, vertex: u32, state: Issued) {
        let at = match &state {
            Issued::Done { done, .. } => *done,
            Issued::Then { until, .. } => *until,
        };
        self.seq += 1;
        self.events.push(Reverse(Event {
            at,
            seq: self.seq,
            token,
            vertex,
            state,
        }));
    }

    /// The next request to complete, the host's clock moved to it; `None`
    /// when nothing is in flight. Reads that depend on earlier ones are
    /// issued on the way, in time order.
    pub fn take(&mut self) -> Result<Option<Arrival>> {
        while let Some(Reverse(event)) = self.events.pop() {
            match event.state {
                Issued::Then { until, bytes } => {
                    let state = self.source.issue_next(bytes, until)?;
                    self.push(event.token, event.vertex, state);
                }
                Issued::Done { list, done } => {
                    self.now = self.now.max(done);
                    self.in_flight -= 1;
                    if self.in_flight == 0 {
                        self.batched = 0;
                    }
                    return Ok(Some(Arrival {
                        token: event.token,
                        vertex: event.vertex,
                        list,
                        done,
                    }));
                }
            }
        }
        Ok(None)
    }

    /// Waits for every request in flight, dropping their lists, moves the
    /// source's clock to the last response and counts the run.
    pub fn finish(mut self) -> Result<()> {
        while self.take()?.is_some() {}
        self.source.finish(self.start, self.now, self.requests);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Config, Ssd};
    use crate::source::SourceCounters;

    /// A device where a request for vertex `v` takes `v + 1` us, in two
    /// steps for odd `v` (like the baseline's rowPtr, then colIdx); from
    /// 200 it waits 5 us for a page another request is reading. It
    /// records every moment it is asked to issue reads at.
    struct Fake {
        ssd: Ssd,
        now: Nanos,
        issued_at: Vec<Nanos>,
        open: Vec<Nanos>,
        runs: Vec<(Nanos, Nanos, u64)>,
    }

    impl GraphSource for Fake {
        fn vertices(&self) -> u32 {
            u32::MAX
        }

        fn issue(&mut self, v: u32, at: Nanos) -> Result<Issued> {
            self.issued_at.push(at);
            self.open.push(at);
            let took = u64::from(v + 1) * 1000;
            Ok(if v >= 200 {
                Issued::Done {
                    list: vec![v],
                    done: at + 5000,
                }
            } else if v % 2 == 1 {
                Issued::Then {
                    until: at + took / 2,
                    bytes: u64::from(v)..u64::from(v) + 1,
                }
            } else {
                Issued::Done {
                    list: vec![v],
                    done: at + took,
                }
            })
        }

        fn issue_next(&mut self, bytes: Range<u64>, at: Nanos) -> Result<Issued> {
            self.issued_at.push(at);
            let v = u32::try_from(bytes.start).unwrap();
            Ok(Issued::Done {
                list: vec![v],
                done: at + u64::from(v + 1) * 500,
            })
        }

        fn now(&self) -> Nanos {
            self.now
        }

        fn finish(&mut self, start: Nanos, end: Nanos, requests: u64) {
            self.now = end;
            self.runs.push((start, end, requests));
        }

        fn counters(&self) -> SourceCounters {
            SourceCounters::default()
        }

        fn cache_bytes(&self) -> u64 {
            0
        }

        fn ssd(&self) -> &Ssd {
            &self.ssd
        }
    }

    fn fake() -> Fake {
        Fake {
            ssd: Ssd::new(&Config::default()).unwrap(),
            now: 5,
            issued_at: Vec::new(),
            open: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// Sends `vertices` through queues of `submit`, always refilling;
    /// returns the arrivals in the order taken.
    fn stream(source: &mut Fake, vertices: &[u32], submit: Submit) -> Vec<Arrival> {
        let mut queues = Queues::new(source, submit);
        let (mut sent, mut taken) = (0, Vec::new());
        loop {
            while !queues.is_full() && sent < vertices.len() {
                queues.request(sent, vertices[sent]).unwrap();
                sent += 1;
            }
            match queues.take().unwrap() {
                Some(a) => taken.push(a),
                None => break,
            }
        }
        queues.finish().unwrap();
        taken
    }

    #[test]
    fn a_window_keeps_its_requests_in_flight_and_issues_in_time_order() {
        let vertices: Vec<u32> = (0..40).map(|i| (i * 7) % 13).collect();
        for in_flight in [1, 2, 5, 100] {
            let mut source = fake();
            let taken = stream(
                &mut source,
                &vertices,
                Submit {
                    in_flight,
                    submission: Submission::Window,
                },
            );
            assert_eq!(taken.len(), vertices.len());
            assert!(
                source.issued_at.windows(2).all(|w| w[0] <= w[1]),
                "{in_flight}: reads issued in time order: {:?}",
                source.issued_at
            );
            assert!(
                taken.windows(2).all(|w| w[0].done <= w[1].done),
                "taken as they arrive"
            );
            // At every request's start, fewer than in_flight others are
            // between their start and their arrival.
            let spans: Vec<(Nanos, Nanos)> = taken
                .iter()
                .map(|a| (source.open[a.token], a.done))
                .collect();
            for &(start, _) in &spans {
                let busy = spans
                    .iter()
                    .filter(|&&(s, d)| s <= start && start < d)
                    .count();
                assert!(
                    busy <= in_flight,
                    "{in_flight}: {busy} in flight at {start}"
                );
            }
            let end = taken.iter().map(|a| a.done).max().unwrap();
            assert_eq!(source.runs, vec![(5, end, 40)]);
            if in_flight == 1 {
                let alone: u64 = vertices.iter().map(|&v| u64::from(v + 1) * 1000).sum();
                assert_eq!(end - 5, alone, "one at a time: the sum of the latencies");
            }
        }
    }

    #[test]
    fn a_request_holds_its_slot_until_its_list_arrives_whatever_it_waits_on() {
        let mut source = fake();
        let window = Submit {
            in_flight: 1,
            submission: Submission::Window,
        };
        // 200 waits 5 us on a page another request reads: the next waits too.
        stream(&mut source, &[200, 200, 0], window);
        assert_eq!(source.open, [5, 5 + 5000, 5 + 10_000]);
    }

    #[test]
    fn a_batch_waits_for_its_last_request() {
        let mut source = fake();
        let vertices = [12, 0, 0, 0, 1, 1];
        let taken = stream(&mut source, &vertices, Submit::batch(3));
        // The first batch (12, 0, 0) ends at 13 us; the second starts there.
        let first_end = 5 + 13_000;
        assert!(source.open[..3].iter().all(|&t| t == 5));
        assert!(
            source.open[3..].iter().all(|&t| t == first_end),
            "{:?}",
            source.open
        );
        assert_eq!(taken.last().unwrap().done, first_end + 2000);
        // A window of 3 starts the fourth request when the first 0 arrives.
        let mut window = fake();
        stream(
            &mut window,
            &vertices,
            Submit {
                in_flight: 3,
                submission: Submission::Window,
            },
        );
        assert_eq!(window.open[3], 5 + 1000);
    }
}
