//! GTravel: the traversal language (paper §4.2), as a Rust builder and as
//! a text form for the command line.
//!
//! ```text
//! v("/out/r.h5").e(wasWrittenBy).v().e(read).repeat(2).return_fp()
//! v("alice").e(run).v().va(type = "job").rtm().e(write).v().va(mode in ("0644", "0600"))
//! ```
//!
//! - `v(ids…)` starts from vertices; `v()` after an `e()` moves to the
//!   edges' destinations (it may be left out).
//! - `e(type)` follows out-edges of one relation.
//! - `va(…)` and `ea(…)` filter the current vertices or the last hop's
//!   edges; conditions are `key = "x"`, `key in ("x", "y")`, `key range
//!   ("lo", "hi")` (lo ≤ value < hi, compared as bytes), and several in one
//!   call must all hold (the paper has no OR). The key `type` tests a
//!   vertex's type.
//! - `rtm()` returns the current step's vertices too; the last step's are
//!   always returned.
//! - `repeat(n)` runs everything before it `n` times in all. The paper's
//!   `repeat()` has no bound; cycles and revisits are legal, so here the
//!   count is required.
//! - `return_fp()` returns whole paths instead of end vertices.
//!
//! A vertex reached at two steps is visited at both (no visited set across
//! steps); within a step each vertex is visited once, or once per path
//! when paths are returned.

use std::collections::BTreeMap;

use quiver_run::InvalidArgument;
use serde::Serialize;

use crate::client::TravelAnswer;
use crate::rpc;

/// What a filter asks of one attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Test {
    /// Equal to this value.
    Eq(Vec<u8>),
    /// Equal to one of these.
    In(Vec<Vec<u8>>),
    /// `lo <= value < hi`, as bytes.
    Range(Vec<u8>, Vec<u8>),
}

/// One condition on an attribute; a missing attribute fails it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// The attribute (or `type`, for a vertex's type).
    pub key: String,
    /// The condition.
    pub test: Test,
}

impl Filter {
    /// `key = value`.
    pub fn eq(key: &str, value: impl Into<Vec<u8>>) -> Filter {
        Filter {
            key: key.to_string(),
            test: Test::Eq(value.into()),
        }
    }

    /// Whether `value` (the attribute's, if present) passes.
    pub fn accepts(&self, value: Option<&[u8]>) -> bool {
        let Some(v) = value else { return false };
        match &self.test {
            Test::Eq(x) => v == x.as_slice(),
            Test::In(xs) => xs.iter().any(|x| v == x.as_slice()),
            Test::Range(lo, hi) => lo.as_slice() <= v && v < hi.as_slice(),
        }
    }

    /// The wire form.
    pub fn to_rpc(&self) -> rpc::Filter {
        use rpc::filter::Test as T;
        rpc::Filter {
            key: self.key.clone(),
            test: Some(match &self.test {
                Test::Eq(x) => T::Eq(x.clone()),
                Test::In(xs) => T::Any(rpc::Values { values: xs.clone() }),
                Test::Range(lo, hi) => T::Range(rpc::Range {
                    lo: lo.clone(),
                    hi: hi.clone(),
                }),
            }),
        }
    }

    /// From the wire; `None` if it names no test.
    pub fn from_rpc(f: &rpc::Filter) -> Option<Filter> {
        use rpc::filter::Test as T;
        let test = match f.test.as_ref()? {
            T::Eq(x) => Test::Eq(x.clone()),
            T::Any(v) => Test::In(v.values.clone()),
            T::Range(r) => Test::Range(r.lo.clone(), r.hi.clone()),
        };
        Some(Filter {
            key: f.key.clone(),
            test,
        })
    }
}

/// Whether a vertex of type `vtype` with `attrs` passes every filter.
pub fn vertex_passes(filters: &[Filter], vtype: &str, attrs: &BTreeMap<String, Vec<u8>>) -> bool {
    filters.iter().all(|f| {
        let value = if f.key == "type" {
            Some(vtype.as_bytes())
        } else {
            attrs.get(&f.key).map(Vec::as_slice)
        };
        f.accepts(value)
    })
}

/// Whether an edge with `props` passes every filter.
pub fn edge_passes(filters: &[Filter], props: &BTreeMap<String, Vec<u8>>) -> bool {
    filters
        .iter()
        .all(|f| f.accepts(props.get(&f.key).map(Vec::as_slice)))
}

/// The vertices of one step: filters, and whether they are returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Level {
    /// `va` conditions.
    pub filters: Vec<Filter>,
    /// `rtm()`.
    pub mark: bool,
}

/// One hop: the relation followed and `ea` conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The relation.
    pub etype: String,
    /// `ea` conditions.
    pub filters: Vec<Filter>,
}

impl Hop {
    /// The wire form.
    pub fn to_rpc(&self) -> rpc::Hop {
        rpc::Hop {
            etype: self.etype.clone(),
            edge_filters: self.filters.iter().map(Filter::to_rpc).collect(),
        }
    }
}

/// A traversal: start vertices, then `levels.len() - 1` hops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Travel {
    /// Where it starts.
    pub start: Vec<Vec<u8>>,
    /// One per step; `levels.len() == hops.len() + 1`.
    pub levels: Vec<Level>,
    /// The hops between steps.
    pub hops: Vec<Hop>,
    /// `return_fp()`.
    pub paths: bool,
    error: Option<String>,
}

/// The entry point of the builder: `GTravel::v(["/a"]).e("read")…`.
#[derive(Debug)]
pub struct GTravel;

impl GTravel {
    /// A traversal starting at `ids`.
    pub fn v<I, T>(ids: I) -> Travel
    where
        I: IntoIterator<Item = T>,
        T: Into<Vec<u8>>,
    {
        Travel {
            start: ids.into_iter().map(Into::into).collect(),
            levels: vec![Level::default()],
            hops: Vec::new(),
            paths: false,
            error: None,
        }
    }
}

/// The most steps a traversal may take, after `repeat`.
pub const MAX_HOPS: usize = 64;

impl Travel {
    fn fail(mut self, message: String) -> Travel {
        self.error.get_or_insert(message);
        self
    }

    /// Follows out-edges of `etype`.
    pub fn e(mut self, etype: &str) -> Travel {
        self.hops.push(Hop {
            etype: etype.to_string(),
            filters: Vec::new(),
        });
        self.levels.push(Level::default());
        self
    }

    /// Moves to the destinations of the last `e()` (implied; kept for the
    /// paper's spelling).
    pub fn v(self) -> Travel {
        if self.hops.is_empty() {
            return self.fail("v() without ids comes after an e()".into());
        }
        self
    }

    /// Filters the current vertices.
    pub fn va(mut self, filter: Filter) -> Travel {
        self.levels
            .last_mut()
            .expect("levels are never empty")
            .filters
            .push(filter);
        self
    }

    /// Filters the last hop's edges.
    pub fn ea(mut self, filter: Filter) -> Travel {
        match self.hops.last_mut() {
            Some(hop) => {
                hop.filters.push(filter);
                self
            }
            None => self.fail("ea() comes after an e()".into()),
        }
    }

    /// Returns the current step's vertices too.
    pub fn rtm(mut self) -> Travel {
        self.levels.last_mut().expect("levels are never empty").mark = true;
        self
    }

    /// Runs every hop so far `times` times in all.
    pub fn repeat(mut self, times: usize) -> Travel {
        if times == 0 {
            return self.fail("repeat(n) needs n >= 1".into());
        }
        if self.hops.is_empty() {
            return self.fail("repeat() comes after an e()".into());
        }
        if self.hops.len().saturating_mul(times) > MAX_HOPS {
            let hops = self.hops.len();
            return self.fail(format!(
                "{hops} hops repeated {times} times is more than {MAX_HOPS} steps"
            ));
        }
        let (hops, levels) = (self.hops.clone(), self.levels[1..].to_vec());
        for _ in 1..times {
            self.hops.extend(hops.iter().cloned());
            self.levels.extend(levels.iter().cloned());
        }
        self
    }

    /// Returns whole paths.
    pub fn return_fp(mut self) -> Travel {
        self.paths = true;
        self
    }

    /// Checks the traversal makes sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        if let Some(e) = &self.error {
            return Err(InvalidArgument::new("travel", e.clone()));
        }
        if self.start.is_empty() {
            return Err(InvalidArgument::new(
                "travel",
                "v(...) names no start vertex",
            ));
        }
        if self.hops.len() > MAX_HOPS {
            return Err(InvalidArgument::new(
                "travel",
                format!("more than {MAX_HOPS} steps"),
            ));
        }
        Ok(())
    }

    /// Parses the text form (see the module docs).
    pub fn parse(text: &str) -> Result<Travel, InvalidArgument> {
        Parser { text, pos: 0 }.travel()
    }
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> InvalidArgument {
        InvalidArgument::new(
            "travel",
            format!("{what} at column {} of {:?}", self.pos + 1, self.text),
        )
    }

    fn skip_space(&mut self) {
        while self.rest().starts_with(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), InvalidArgument> {
        if self.eat(token) {
            Ok(())
        } else {
            Err(self.error(&format!("expected `{token}`")))
        }
    }

    fn word(&mut self) -> Option<&str> {
        self.skip_space();
        let len = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(self.rest().len());
        (len > 0).then(|| {
            let w = &self.text[self.pos..self.pos + len];
            self.pos += len;
            w
        })
    }

    fn string(&mut self) -> Result<Vec<u8>, InvalidArgument> {
        self.skip_space();
        if !self.eat("\"") {
            return Err(self.error("expected a quoted string"));
        }
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out.into_bytes());
                }
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => out.push(e),
                    _ => return Err(self.error("only \\\" and \\\\ are escapes")),
                },
                c => out.push(c),
            }
        }
        Err(self.error("unterminated string"))
    }

    fn name(&mut self) -> Result<String, InvalidArgument> {
        self.skip_space();
        if self.rest().starts_with('"') {
            String::from_utf8(self.string()?).map_err(|_| self.error("names are text"))
        } else {
            self.word()
                .map(str::to_string)
                .ok_or_else(|| self.error("expected a name"))
        }
    }

    fn strings(&mut self) -> Result<Vec<Vec<u8>>, InvalidArgument> {
        let mut out = Vec::new();
        self.skip_space();
        if self.rest().starts_with(')') {
            return Ok(out);
        }
        loop {
            out.push(self.string()?);
            if !self.eat(",") {
                return Ok(out);
            }
        }
    }

    fn filters(&mut self) -> Result<Vec<Filter>, InvalidArgument> {
        let mut out = Vec::new();
        loop {
            let key = self.name()?;
            let test = if self.eat("=") {
                Test::Eq(self.string()?)
            } else {
                match self.word() {
                    Some("in") => {
                        self.expect("(")?;
                        let values = self.strings()?;
                        self.expect(")")?;
                        Test::In(values)
                    }
                    Some("range") => {
                        self.expect("(")?;
                        let lo = self.string()?;
                        self.expect(",")?;
                        let hi = self.string()?;
                        self.expect(")")?;
                        Test::Range(lo, hi)
                    }
                    _ => return Err(self.error("expected `=`, `in` or `range`")),
                }
            };
            out.push(Filter { key, test });
            if !self.eat(",") {
                return Ok(out);
            }
        }
    }

    fn travel(mut self) -> Result<Travel, InvalidArgument> {
        if self.word() != Some("v") {
            return Err(self.error("a traversal starts with v(\"id\", ...)"));
        }
        self.expect("(")?;
        let mut travel = GTravel::v(self.strings()?);
        self.expect(")")?;
        while self.eat(".") {
            let Some(call) = self.word().map(str::to_string) else {
                return Err(self.error("expected a step"));
            };
            let has_args = self.eat("(");
            travel = match call.as_str() {
                "v" => travel.v(),
                "e" if has_args => travel.e(&self.name()?),
                "va" if has_args => self.filters()?.into_iter().fold(travel, Travel::va),
                "ea" if has_args => self.filters()?.into_iter().fold(travel, Travel::ea),
                "rtm" => travel.rtm(),
                "return_fp" => travel.return_fp(),
                "repeat" if has_args => {
                    let n = self
                        .word()
                        .and_then(|w| w.parse().ok())
                        .ok_or_else(|| self.error("repeat(n) takes a count"))?;
                    travel.repeat(n)
                }
                "e" | "va" | "ea" | "repeat" => {
                    return Err(self.error(&format!("{call} takes arguments")))
                }
                _ => {
                    return Err(self.error(&format!(
                        "unknown step `{call}` (v, e, va, ea, rtm, repeat, return_fp)"
                    )))
                }
            };
            if has_args {
                self.expect(")")?;
            }
        }
        self.skip_space();
        if !self.rest().is_empty() {
            return Err(self.error("unexpected text"));
        }
        travel.validate()?;
        Ok(travel)
    }
}

/// What `quiver meta query --json` prints: a traversal in its text form,
/// and its answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct QueryReport {
    /// The traversal, as given.
    pub travel: String,
    /// Its answer.
    #[serde(flatten)]
    pub answer: TravelAnswer,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_form_builds_what_the_builder_does() {
        let text = r#"v("/out/r.h5", "a\"b").e(wasWrittenBy).v().va(type = "job", nprocs in ("8", "16")).rtm().e("read").ea(offset range ("0", "9")).repeat(2).return_fp()"#;
        let built = GTravel::v(["/out/r.h5", "a\"b"])
            .e("wasWrittenBy")
            .v()
            .va(Filter::eq("type", "job"))
            .va(Filter {
                key: "nprocs".into(),
                test: Test::In(vec![b"8".to_vec(), b"16".to_vec()]),
            })
            .rtm()
            .e("read")
            .ea(Filter {
                key: "offset".into(),
                test: Test::Range(b"0".to_vec(), b"9".to_vec()),
            })
            .repeat(2)
            .return_fp();
        assert_eq!(Travel::parse(text).unwrap(), built);
        assert_eq!(built.hops.len(), 4);
        assert_eq!(built.levels.len(), 5);
        assert!(built.levels[1].mark && built.levels[3].mark && !built.levels[2].mark);
    }

    #[test]
    fn bad_text_names_what_and_where() {
        for (text, want) in [
            ("e(read)", "starts with v("),
            ("v(\"a\").e()", "expected a name"),
            ("v(\"a\").walk()", "unknown step `walk`"),
            ("v(\"a\").ea(x = \"1\")", "ea() comes after an e()"),
            ("v(\"a\").e(read).repeat(0)", "n >= 1"),
            (
                "v(\"a\").e(read).va(x > \"1\")",
                "expected `=`, `in` or `range`",
            ),
            ("v()", "names no start vertex"),
            ("v(\"a) ", "unterminated"),
            ("v(\"a\").e(read).repeat(65)", "more than 64 steps"),
        ] {
            let err = Travel::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn filters_and_together_and_a_missing_attribute_fails() {
        let attrs = BTreeMap::from([("size".to_string(), b"100".to_vec())]);
        let f = [
            Filter::eq("type", "file"),
            Filter {
                key: "size".into(),
                test: Test::Range(b"1".to_vec(), b"2".to_vec()),
            },
        ];
        assert!(vertex_passes(&f, "file", &attrs));
        assert!(!vertex_passes(&f, "job", &attrs));
        assert!(!vertex_passes(&[Filter::eq("mode", "x")], "file", &attrs));
        for f in &f {
            assert_eq!(Filter::from_rpc(&f.to_rpc()).as_ref(), Some(f));
        }
    }
}
