//! Who is in a cluster: its id and its servers, each an id and an address
//! ([`Membership`]), as the cluster file holds them; and the identity each
//! server's data directory keeps ([`Identity`]).
//!
//! Placement hashes server ids, never addresses, so a cluster restarted on
//! other ports finds every vertex where it left it. A data directory
//! records the cluster and the server it belongs to when it is first used;
//! a server started on it with a cluster file that does not list that
//! server of that cluster refuses to start.
//!
//! The cluster file is text, one entry a line (`#` starts a comment):
//!
//! ```text
//! cluster 9f2c61d04e1ab733
//! server s0 127.0.0.1:21873
//! server s1 127.0.0.1:21874
//! ```
//!
//! A file without a `cluster` line is a cluster without an id. A file of
//! bare `host:port` lines, as earlier releases wrote, is read as such a
//! cluster whose servers' ids are their addresses: the placement those
//! releases computed from addresses, exactly. A data directory they wrote
//! (data, no identity) is claimed under such an id on its first start,
//! on any port (`cluster up` moves such a cluster keeping its ids); see
//! [`Identity::claim`].

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use quiver_run::InvalidArgument;

use crate::error::{Error, Result};

/// One server of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its id: what the ring hashes.
    pub id: String,
    /// Where it listens, `host:port`.
    pub addr: String,
}

/// A cluster's id and its servers, in cluster-file order (a server's index
/// is its position here).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Membership {
    /// The cluster's id; empty for a cluster file of bare addresses.
    pub id: String,
    /// Its servers.
    pub servers: Vec<Member>,
    /// The shared secret every request carries (`rpc::TOKEN_HEADER`);
    /// empty for a cluster that takes requests from anyone who reaches
    /// it (a file from before tokens, or written by hand without one).
    pub token: String,
}

/// The file in a data directory naming the server it belongs to.
const IDENTITY_FILE: &str = "quiver-meta-identity";

/// The lock file a running server holds in its data directory.
const LOCK_FILE: &str = "quiver-meta.lock";

impl Membership {
    /// A new cluster of servers at `addrs`: a fresh cluster id (from
    /// `seed`, the time and this process), servers `s0`, `s1`, ..., and a
    /// fresh token.
    pub fn fresh(addrs: &[String], seed: u64) -> Membership {
        let now = crate::clock::wall_ns();
        let stir = format!("{now}/{}/{seed}/{addrs:?}", std::process::id());
        Membership {
            id: format!("{:016x}", crate::place::stable_hash(stir.as_bytes(), seed)),
            servers: addrs
                .iter()
                .enumerate()
                .map(|(i, addr)| Member {
                    id: format!("s{i}"),
                    addr: addr.clone(),
                })
                .collect(),
            token: new_token(),
        }
    }

    /// A cluster without an id whose servers are named by their addresses,
    /// as a file of bare addresses describes.
    pub fn of_addresses(addrs: &[String]) -> Membership {
        Membership {
            id: String::new(),
            servers: addrs
                .iter()
                .map(|addr| Member {
                    id: addr.clone(),
                    addr: addr.clone(),
                })
                .collect(),
            token: String::new(),
        }
    }

    /// The same cluster with its servers at `addrs` (in order), and a
    /// token if it had none.
    pub fn moved_to(&self, addrs: &[String]) -> Membership {
        assert_eq!(addrs.len(), self.servers.len(), "one address a server");
        Membership {
            id: self.id.clone(),
            servers: self
                .servers
                .iter()
                .zip(addrs)
                .map(|(m, addr)| Member {
                    id: m.id.clone(),
                    addr: addr.clone(),
                })
                .collect(),
            token: if self.token.is_empty() {
                new_token()
            } else {
                self.token.clone()
            },
        }
    }

    /// The servers' ids, in order.
    pub fn ids(&self) -> Vec<String> {
        self.servers.iter().map(|m| m.id.clone()).collect()
    }

    /// The servers' addresses, in order.
    pub fn addrs(&self) -> Vec<String> {
        self.servers.iter().map(|m| m.addr.clone()).collect()
    }

    /// Parses a cluster file's text.
    ///
    /// # Errors
    /// A message naming the line that is not `cluster ID`, `server ID
    /// HOST:PORT` or (the old form, alone) `HOST:PORT`, a server or an
    /// address listed twice, or a file with no server.
    pub fn parse(text: &str) -> std::result::Result<Membership, String> {
        let mut membership = Membership::default();
        let (mut bare, mut named) = (false, false);
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = || format!("line {}", n + 1);
            match words.as_slice() {
                [] => {}
                ["cluster", id] if membership.id.is_empty() => membership.id = (*id).to_string(),
                ["cluster", _] => return Err(format!("{}: a second cluster line", at())),
                ["token", token] if membership.token.is_empty() => {
                    membership.token = (*token).to_string();
                }
                ["token", _] => return Err(format!("{}: a second token line", at())),
                ["server", id, addr] => {
                    check_addr(addr).map_err(|e| format!("{}: {e}", at()))?;
                    named = true;
                    membership.servers.push(Member {
                        id: (*id).to_string(),
                        addr: (*addr).to_string(),
                    });
                }
                [addr] => {
                    check_addr(addr).map_err(|e| format!("{}: {e}", at()))?;
                    bare = true;
                    membership.servers.push(Member {
                        id: (*addr).to_string(),
                        addr: (*addr).to_string(),
                    });
                }
                _ => {
                    return Err(format!(
                        "{}: {line:?} is not `cluster ID`, `token SECRET`, `server ID HOST:PORT` or `HOST:PORT`",
                        at()
                    ))
                }
            }
        }
        if bare && (named || !membership.id.is_empty()) {
            return Err(
                "mixes bare addresses (the old form) with `cluster` and `server` lines".into(),
            );
        }
        if membership.servers.is_empty() {
            return Err("names no server".into());
        }
        for (i, m) in membership.servers.iter().enumerate() {
            if let Some(other) = membership.servers[..i].iter().find(|o| o.id == m.id) {
                return Err(format!(
                    "lists server {} twice ({} and {})",
                    m.id, other.addr, m.addr
                ));
            }
            if membership.servers[..i].iter().any(|o| o.addr == m.addr) {
                return Err(format!("lists the address {} twice", m.addr));
            }
        }
        Ok(membership)
    }

    /// The cluster file's text.
    pub fn to_text(&self) -> String {
        let mut text = String::from(
            "# A quiver meta cluster: its id, its token (a secret: whoever has this file may use the cluster), then each server's id and address.\n",
        );
        if !self.token.is_empty() {
            let _ = writeln!(text, "token {}", self.token);
        }
        if self.id.is_empty() && self.servers.iter().all(|m| m.id == m.addr) {
            for m in &self.servers {
                let _ = writeln!(text, "{}", m.addr);
            }
            return text;
        }
        if !self.id.is_empty() {
            let _ = writeln!(text, "cluster {}", self.id);
        }
        for m in &self.servers {
            let _ = writeln!(text, "server {} {}", m.id, m.addr);
        }
        text
    }

    /// Reads a cluster file.
    ///
    /// # Errors
    /// [`Error::Cluster`] naming the file when it cannot be read;
    /// [`Error::Invalid`] saying what is wrong when it is no cluster file.
    pub fn read(path: &Path) -> Result<Membership> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::Cluster(format!("reading the cluster file {}: {e}", path.display()))
        })?;
        Membership::parse(&text).map_err(|e| {
            InvalidArgument::new(
                "cluster",
                format!("the cluster file {}: {e}", path.display()),
            )
            .into()
        })
    }

    /// Writes the cluster file at `path`: to a temporary name beside it,
    /// synced, then renamed, so no reader sees half a file. It holds the
    /// token, so only its owner may read it (mode 0600).
    ///
    /// # Errors
    /// [`Error::Cluster`] naming the file.
    pub fn write(&self, path: &Path) -> Result<()> {
        let temp = path.with_extension("tmp");
        let fail = |e: std::io::Error| Error::Cluster(format!("writing {}: {e}", path.display()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)
            .map_err(fail)?;
        file.write_all(self.to_text().as_bytes()).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        std::fs::rename(&temp, path).map_err(fail)
    }

    /// The cluster and the index of the server that listens at `listen`
    /// with its data in `data`: by the cluster file at `file`, or without
    /// one a cluster of this one server, the one its data belongs to or a
    /// new one (with no token: a lone server takes anyone's requests).
    ///
    /// # Errors
    /// The file's, or [`Membership::index_of`]'s.
    pub fn of_server(
        file: Option<&Path>,
        data: &Path,
        listen: &str,
    ) -> Result<(Membership, usize)> {
        let Some(file) = file else {
            let cluster = match Identity::read(data)? {
                Some(identity) => Membership {
                    id: identity.cluster,
                    servers: vec![Member {
                        id: identity.server,
                        addr: listen.to_string(),
                    }],
                    token: String::new(),
                },
                None => Membership {
                    token: String::new(),
                    ..Membership::fresh(&[listen.to_string()], 0)
                },
            };
            return Ok((cluster, 0));
        };
        let cluster = Membership::read(file)?;
        let index = cluster.index_of(data, listen).map_err(|e| match e {
            Error::Invalid(invalid) => InvalidArgument::new(
                "cluster",
                format!("the cluster file {}: {}", file.display(), invalid.reason),
            )
            .into(),
            e => e,
        })?;
        Ok((cluster, index))
    }

    /// The server listening at `listen` with its data in `data`: by the
    /// identity `data` keeps if it has one (whose listed address must be
    /// `listen`), else by its address.
    ///
    /// # Errors
    /// [`Error::Invalid`] saying why the server does not belong here.
    pub fn index_of(&self, data: &Path, listen: &str) -> Result<usize> {
        if let Some(identity) = Identity::read(data)? {
            let listed = self.servers.iter().position(|m| m.id == identity.server);
            let Some(i) = listed.filter(|_| identity.cluster == self.id) else {
                return Err(refused(format!(
                    "{} belongs to server {} of cluster {}, which this cluster file does not list",
                    data.display(),
                    identity.server,
                    identity.shown_cluster()
                )));
            };
            if self.servers[i].addr != listen {
                return Err(refused(format!(
                    "the cluster file lists server {} (whose data is {}) at {}, not {listen}",
                    identity.server,
                    data.display(),
                    self.servers[i].addr
                )));
            }
            return Ok(i);
        }
        self.servers
            .iter()
            .position(|m| m.addr == listen)
            .ok_or_else(|| refused(format!("{listen} is not an address the cluster file lists")))
    }
}

/// A new secret: 128 bits from the system's random source, in hex. Falls
/// back to the time and this process where there is none (no token is
/// then better than none, if weak).
fn new_token() -> String {
    let mut bytes = [0u8; 16];
    let random = File::open("/dev/urandom").and_then(|mut f| {
        use std::io::Read as _;
        f.read_exact(&mut bytes)
    });
    if random.is_err() {
        let stir = format!("{}/{}", crate::clock::wall_ns(), std::process::id());
        let h = crate::place::stable_hash(stir.as_bytes(), 7);
        bytes[..8].copy_from_slice(&h.to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A server started with a cluster file that does not list it.
fn refused(reason: String) -> Error {
    InvalidArgument::new("cluster", reason).into()
}

fn check_addr(addr: &str) -> std::result::Result<(), String> {
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(()),
        _ => Err(format!("{addr:?} is not host:port")),
    }
}

/// What a data directory records of its server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The cluster's id (empty: a cluster file of bare addresses).
    pub cluster: String,
    /// The server's id.
    pub server: String,
}

impl Identity {
    /// The identity `data` keeps, if any.
    ///
    /// # Errors
    /// [`Error::Cluster`] when the file is there but unreadable or garbled.
    pub fn read(data: &Path) -> Result<Option<Identity>> {
        let path = data.join(IDENTITY_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::Cluster(format!("reading {}: {e}", path.display()))),
        };
        let mut lines = text.lines();
        match (lines.next(), lines.next(), lines.next()) {
            (Some(cluster), Some(server), None) => {
                let (Some(cluster), Some(server)) = (
                    cluster.strip_prefix("cluster "),
                    server.strip_prefix("server "),
                ) else {
                    return Err(garbled(&path));
                };
                Ok(Some(Identity {
                    cluster: cluster.trim().to_string(),
                    server: server.trim().to_string(),
                }))
            }
            _ => Err(garbled(&path)),
        }
    }

    /// Records that `data` belongs to server `index` of `membership`, or
    /// checks that it does. A directory with data but no identity (written
    /// before servers had ids, when placement followed addresses) is
    /// claimed only by a cluster without an id, whose server ids are the
    /// addresses of its original file of bare addresses.
    ///
    /// # Errors
    /// [`Error::Cluster`] naming the directory, the server it belongs to
    /// and the one it was started as.
    pub fn claim(membership: &Membership, index: usize, data: &Path) -> Result<Identity> {
        let member = &membership.servers[index];
        let wanted = Identity {
            cluster: membership.id.clone(),
            server: member.id.clone(),
        };
        if let Some(found) = Identity::read(data)? {
            if found != wanted {
                return Err(Error::Cluster(format!(
                    "{} belongs to server {} of cluster {}; it was started as server {} of cluster {}",
                    data.display(),
                    found.server,
                    found.shown_cluster(),
                    wanted.server,
                    wanted.shown_cluster()
                )));
            }
            return Ok(found);
        }
        // Data from before ids was placed by the addresses of its cluster
        // file, which a file of bare addresses names its servers by (and
        // `cluster up` keeps, on any ports); a cluster with an id has other
        // ids, under which that data would be lost.
        if data.join("CURRENT").exists() && !membership.id.is_empty() {
            return Err(Error::Cluster(format!(
                "{} holds data from before servers had ids, when where a vertex lives followed \
                 the servers' addresses; start it with its original cluster file (bare \
                 addresses, which name its servers as they were; `cluster up` keeps them on \
                 any ports)",
                data.display()
            )));
        }
        std::fs::create_dir_all(data)
            .map_err(|e| Error::Cluster(format!("creating {}: {e}", data.display())))?;
        let text = format!("cluster {}\nserver {}\n", wanted.cluster, wanted.server);
        let path = data.join(IDENTITY_FILE);
        std::fs::write(&path, text)
            .map_err(|e| Error::Cluster(format!("writing {}: {e}", path.display())))?;
        Ok(wanted)
    }

    fn shown_cluster(&self) -> &str {
        shown(&self.cluster)
    }
}

/// A cluster id as messages show it.
pub(crate) fn shown(id: &str) -> &str {
    if id.is_empty() {
        "(no id: bare addresses)"
    } else {
        id
    }
}

fn garbled(path: &Path) -> Error {
    Error::Cluster(format!(
        "{} is not a server identity (`cluster ID` and `server ID` lines)",
        path.display()
    ))
}

/// A data directory held by its running server: the lock is released when
/// this is dropped (or the process ends).
#[derive(Debug)]
pub struct DataLock {
    _file: File,
}

impl DataLock {
    /// Takes `data`'s lock, creating the directory if need be.
    ///
    /// # Errors
    /// [`Error::Cluster`] when another server holds it.
    pub fn take(data: &Path) -> Result<DataLock> {
        std::fs::create_dir_all(data)
            .map_err(|e| Error::Cluster(format!("creating {}: {e}", data.display())))?;
        let path = lock_path(data);
        let file = File::create(&path)
            .map_err(|e| Error::Cluster(format!("opening {}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(DataLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Cluster(format!(
                "{} is in use by a running server",
                data.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(Error::Cluster(format!("locking {}: {e}", path.display())))
            }
        }
    }

    /// Whether a running server holds `data` (without taking it).
    pub fn in_use(data: &Path) -> bool {
        File::open(lock_path(data))
            .is_ok_and(|file| matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)))
    }
}

fn lock_path(data: &Path) -> PathBuf {
    data.join(LOCK_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(ports: &[u16]) -> Vec<String> {
        ports.iter().map(|p| format!("127.0.0.1:{p}")).collect()
    }

    #[test]
    fn a_cluster_file_round_trips_and_old_files_read_as_address_ids() {
        let fresh = Membership::fresh(&addrs(&[7001, 7002]), 1);
        assert_eq!(fresh.ids(), ["s0", "s1"]);
        assert_eq!(fresh.id.len(), 16);
        assert_eq!(Membership::parse(&fresh.to_text()).unwrap(), fresh);
        let old = Membership::parse("127.0.0.1:7001\n# a comment\n\n127.0.0.1:7002\n").unwrap();
        assert_eq!(old, Membership::of_addresses(&addrs(&[7001, 7002])));
        assert_eq!(Membership::parse(&old.to_text()).unwrap(), old);
        let moved = old.moved_to(&addrs(&[9001, 9002]));
        assert_eq!(moved.ids(), old.ids());
        assert_eq!(Membership::parse(&moved.to_text()).unwrap(), moved);
    }

    /// A new cluster has a 128-bit token of its own, a moved one keeps
    /// its token, one without gets one when it moves, and the file that
    /// holds it is its owner's alone.
    #[test]
    fn a_cluster_has_a_secret_token_in_a_private_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let one = Membership::fresh(&addrs(&[7001]), 1);
        let two = Membership::fresh(&addrs(&[7001]), 1);
        assert_eq!(one.token.len(), 32);
        assert!(one.token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(one.token, two.token);
        assert_eq!(one.moved_to(&addrs(&[8001])).token, one.token);
        let old = Membership::of_addresses(&addrs(&[7001]));
        assert!(old.token.is_empty());
        let moved = old.moved_to(&addrs(&[8001]));
        assert_eq!(moved.token.len(), 32);
        assert_eq!(Membership::parse(&moved.to_text()).unwrap(), moved);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cluster");
        one.write(&file).unwrap();
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Membership::read(&file).unwrap(), one);
    }

    #[test]
    fn bad_cluster_files_say_what_is_wrong() {
        for (text, says) in [
            ("", "names no server"),
            (
                "cluster a\ncluster b\nserver s0 h:1\n",
                "line 2: a second cluster line",
            ),
            ("server s0 h:1\nserver s0 h:2\n", "lists server s0 twice"),
            (
                "server s0 h:1\nserver s1 h:1\n",
                "lists the address h:1 twice",
            ),
            (
                "server s0 nowhere\n",
                "line 1: \"nowhere\" is not host:port",
            ),
            ("h:1\nserver s1 h:2\n", "mixes bare addresses"),
            ("server s0 h:1 extra\n", "line 1:"),
            (
                "token a\ntoken b\nserver s0 h:1\n",
                "line 2: a second token line",
            ),
        ] {
            let err = Membership::parse(text).unwrap_err();
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_data_directory_belongs_to_one_server_of_one_cluster() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("s0");
        let one = Membership::fresh(&addrs(&[7001, 7002]), 1);
        let other = Membership::fresh(&addrs(&[7001, 7002]), 2);
        assert_ne!(one.id, other.id);
        Identity::claim(&one, 0, &data).unwrap();
        // Again, and on other ports: the same server.
        Identity::claim(&one.moved_to(&addrs(&[8001, 8002])), 0, &data).unwrap();
        let moved = one.moved_to(&addrs(&[8001, 8002]));
        assert_eq!(moved.index_of(&data, "127.0.0.1:8001").unwrap(), 0);
        let err = moved.index_of(&data, "127.0.0.1:8002").unwrap_err();
        let err = quiver_run::chain(&err);
        assert!(err.contains("lists server s0"), "{err}");
        // Another server's, another cluster's.
        let err = Identity::claim(&one, 1, &data).unwrap_err().to_string();
        assert!(err.contains("belongs to server s0"), "{err}");
        let err = Identity::claim(&other, 0, &data).unwrap_err().to_string();
        assert!(err.contains(&one.id) && err.contains(&other.id), "{err}");
        let err = other.index_of(&data, "127.0.0.1:7001").unwrap_err();
        let err = quiver_run::chain(&err);
        assert!(err.contains("does not list"), "{err}");
    }

    #[test]
    fn old_data_is_claimed_only_under_its_address() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("old");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("CURRENT"), "MANIFEST-000001\n").unwrap();
        let fresh = Membership::fresh(&addrs(&[7001]), 1);
        let err = Identity::claim(&fresh, 0, &data).unwrap_err().to_string();
        assert!(err.contains("from before servers had ids"), "{err}");
        // Its original file's cluster, moved to another port as `cluster
        // up` moves it: claimed under the address it was written under.
        let old = Membership::of_addresses(&addrs(&[7001]));
        let moved = old.moved_to(&addrs(&[9001]));
        let claimed = Identity::claim(&moved, 0, &data).unwrap();
        assert_eq!(claimed.server, "127.0.0.1:7001");
        // From then on it moves with its id, and no other cluster has it.
        Identity::claim(&old.moved_to(&addrs(&[9002])), 0, &data).unwrap();
        let err = Identity::claim(&fresh, 0, &data).unwrap_err().to_string();
        assert!(err.contains("belongs to server 127.0.0.1:7001"), "{err}");
    }

    #[test]
    fn a_data_directory_has_one_running_server() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!DataLock::in_use(dir.path()));
        let lock = DataLock::take(dir.path()).unwrap();
        assert!(DataLock::in_use(dir.path()));
        let err = DataLock::take(dir.path()).unwrap_err().to_string();
        assert!(err.contains("in use by a running server"), "{err}");
        drop(lock);
        assert!(!DataLock::in_use(dir.path()));
    }
}
