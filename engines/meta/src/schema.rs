//! What may be stored: vertex types with their static attributes, and
//! relations with their reverse (paper §2.1, Table 1).
//!
//! The default schema is the paper's: users, jobs and processes
//! (executions), files and directories (data objects), and the relations
//! `run`, `exe`, `read`, `write`, `has`, `contains`, each with its reverse
//! `wasXXBy` edge, which the server writes with the forward edge at the
//! same timestamp. A schema file (JSON, `quiver meta serve --schema`) adds
//! user-defined types and relations. An attribute a type declares is
//! static and sorts first in the vertex's keys; any other is user-defined.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::key::Section;
use crate::rpc;

/// Vertex types and relations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// Each vertex type and its static (declared) attributes.
    pub types: BTreeMap<String, Vec<String>>,
    /// Each relation and its reverse relation, if it has one. A reverse is
    /// a relation too, whose reverse is the forward one.
    pub relations: BTreeMap<String, Option<String>>,
}

impl Default for Schema {
    fn default() -> Schema {
        let types = [
            ("user", &["uid", "name", "group"][..]),
            ("job", &["jobid", "exe", "nprocs", "start", "end"][..]),
            ("process", &["rank", "host", "pid"][..]),
            ("file", &["mode", "size", "ctime", "mtime", "owner"][..]),
            ("directory", &["mode", "ctime", "owner"][..]),
        ];
        let mut schema = Schema {
            types: types
                .iter()
                .map(|(t, attrs)| (t.to_string(), attrs.iter().map(|a| a.to_string()).collect()))
                .collect(),
            relations: BTreeMap::new(),
        };
        for (forward, reverse) in [
            ("run", "wasRunBy"),
            ("exe", "exedBy"),
            ("read", "wasReadBy"),
            ("write", "wasWrittenBy"),
            ("has", "belongsTo"),
            ("contains", "belongs"),
        ] {
            schema.add_relation(forward, Some(reverse));
        }
        schema
    }
}

impl Schema {
    /// Adds relation `name`, and its reverse with it.
    pub fn add_relation(&mut self, name: &str, reverse: Option<&str>) {
        self.relations
            .insert(name.to_string(), reverse.map(str::to_string));
        if let Some(r) = reverse {
            self.relations.insert(r.to_string(), Some(name.to_string()));
        }
    }

    /// The default schema with a file's types and relations added: JSON
    /// `{"types": {"workflow": ["name"]}, "relations": {"loginTogether": null}}`.
    pub fn with_additions(json: &str) -> Result<Schema, serde_json::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Additions {
            #[serde(default)]
            types: BTreeMap<String, Vec<String>>,
            #[serde(default)]
            relations: BTreeMap<String, Option<String>>,
        }
        let additions: Additions = serde_json::from_str(json)?;
        let mut schema = Schema::default();
        schema.types.extend(additions.types);
        for (name, reverse) in &additions.relations {
            schema.add_relation(name, reverse.as_deref());
        }
        Ok(schema)
    }

    /// Whether `attr` is a static attribute of `vtype`.
    pub fn is_static(&self, vtype: &str, attr: &str) -> bool {
        self.types
            .get(vtype)
            .is_some_and(|a| a.iter().any(|x| x == attr))
    }

    /// The section `vtype`'s attribute `attr` is stored in: static when
    /// the type declares it, user otherwise.
    pub fn section(&self, vtype: &str, attr: &str) -> Section {
        if self.is_static(vtype, attr) {
            Section::Static
        } else {
            Section::User
        }
    }

    /// The reverse of edge `e` (`read` gives `wasReadBy`), stamped `ts`, if
    /// its relation has one.
    pub fn reverse(&self, e: &rpc::EdgePut, ts: u64) -> Option<rpc::EdgePut> {
        let reverse = self.relation(&e.etype)??;
        Some(rpc::EdgePut {
            src: e.dst.clone(),
            etype: reverse.to_string(),
            dst: e.src.clone(),
            props: e.props.clone(),
            node: 0,
            remove: e.remove,
            ts,
        })
    }

    /// Whether `vtype` is a known vertex type.
    pub fn has_type(&self, vtype: &str) -> bool {
        self.types.contains_key(vtype)
    }

    /// `Some(reverse)` for a known relation (`None` inside when it has no
    /// reverse); `None` for an unknown one.
    pub fn relation(&self, name: &str) -> Option<Option<&str>> {
        self.relations.get(name).map(Option::as_deref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_relations_pair_up_and_additions_extend_the_default() {
        let s = Schema::with_additions(r#"{"types": {"workflow": ["name"]}, "relations": {"partOf": "hasPart", "loginTogether": null}}"#).unwrap();
        for (name, reverse) in &s.relations {
            if let Some(r) = reverse {
                assert_eq!(s.relation(r), Some(Some(name.as_str())), "{name} <-> {r}");
            }
        }
        assert_eq!(s.relation("wasWrittenBy"), Some(Some("write")));
        assert_eq!(s.relation("loginTogether"), Some(None));
        assert_eq!(s.relation("likes"), None);
        assert!(
            s.is_static("workflow", "name")
                && s.is_static("file", "mode")
                && !s.is_static("file", "tag")
        );
        assert!(Schema::with_additions(r#"{"typo": {}}"#).is_err());
    }
}
