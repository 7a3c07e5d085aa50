//! A cluster of servers on this machine: free ports, child processes that
//! die with their starter, the cluster file written only once every server
//! answered, and a stop that lets them flush; and one server's life in its
//! own process ([`serve`]), from its port bound to its flush on a signal.
//!
//! The caller names the program that runs one server (`quiver meta
//! serve`, which takes `--listen ADDR --cluster FILE --data DIR` after its
//! own arguments); everything else is here. A directory holds the cluster:
//! `cluster` (the [`Membership`] file clients read), `server{i}` (each
//! server's data) and, for quiet servers, `server{i}.log`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use quiver_run::InvalidArgument;
use quiver_verbs::job::Program;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::membership::{DataLock, Membership};
use crate::server::{self, ServerConfig};

/// Servers a local cluster has unless told otherwise.
pub const DEFAULT_SERVERS: usize = 4;

/// How long the servers of a starting cluster have to answer.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long stopped servers have to flush before they are killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The first port [`free_ports`] considers.
const FIRST_PORT: u16 = 10_000;

/// Servers running as child processes of this one. Dropping it kills them
/// (and removes a cluster file still being started); they also die with
/// this process.
#[derive(Debug)]
pub struct LocalCluster {
    children: Vec<Child>,
    file: PathBuf,
    addrs: Vec<String>,
    /// The cluster file the servers were started with, renamed to `file`
    /// once every one of them answered; removed if they did not.
    starting: Option<PathBuf>,
}

impl LocalCluster {
    /// Starts `n` servers with data under `dir`, each running `server`
    /// with `--listen ADDR --cluster FILE --data DIR` appended, and waits until each has answered as the server
    /// the cluster file names. The data's cluster comes back on its own
    /// ids at new ports; a new directory gets a new cluster. `base_port` 0
    /// takes free ports, another the `n` ports from it.
    ///
    /// Everything is checked before anything is written: no data
    /// directory in use, the same number of servers as the data holds,
    /// free ports. On any failure the existing cluster file is left as it
    /// was and the servers started are stopped. `quiet` servers write
    /// their messages to `server{i}.log` under `dir`, not to stderr.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a request that cannot work (no servers, the
    /// wrong count for the data, ports out of range); [`Error::Cluster`]
    /// for a directory in use, a port taken, or a server that exits or
    /// does not answer.
    pub async fn spawn(
        n: usize,
        dir: &Path,
        base_port: u16,
        quiet: bool,
        server: &Program,
    ) -> Result<(LocalCluster, Client)> {
        if n == 0 {
            return Err(InvalidArgument::new("servers", "must be at least 1").into());
        }
        let file = dir.join("cluster");
        let data = |i: usize| dir.join(format!("server{i}"));
        let log = |i: usize| dir.join(format!("server{i}.log"));
        let existing = if file.exists() {
            Some(Membership::read(&file)?)
        } else {
            None
        };
        if let Some(existing) = &existing {
            let k = existing.servers.len();
            if k != n {
                return Err(InvalidArgument::new(
                    "servers",
                    format!(
                        "{} holds a cluster of {k} servers (see {}); start it with {k} servers",
                        dir.display(),
                        file.display()
                    ),
                )
                .into());
            }
        } else if let Some(i) = (0..n).find(|&i| data(i).join("CURRENT").exists()) {
            return Err(Error::Cluster(format!(
                "{} holds a server's data but there is no cluster file {} naming its cluster",
                data(i).display(),
                file.display()
            )));
        }
        if let Some(i) = (0..n).find(|&i| DataLock::in_use(&data(i))) {
            return Err(Error::Cluster(format!(
                "a cluster is already up on {}: server {i}'s data directory {} is in use (its cluster file: {}); stop it first",
                dir.display(),
                data(i).display(),
                file.display()
            )));
        }
        let ports = if base_port == 0 {
            free_ports(n)?
        } else {
            ports_from(base_port, n)?
        };
        let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let membership = match &existing {
            Some(existing) => existing.moved_to(&addrs),
            None => Membership::fresh(&addrs, u64::from(base_port)),
        };
        let io = |what: String| move |e: std::io::Error| Error::Cluster(format!("{what}: {e}"));
        std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
        let starting = dir.join("cluster.starting");
        membership.write(&starting)?;
        let mut cluster = LocalCluster {
            children: Vec::new(),
            file: file.clone(),
            addrs: addrs.clone(),
            starting: Some(starting.clone()),
        };
        for (i, addr) in addrs.iter().enumerate() {
            let data = data(i);
            let mut cmd = Command::new(&server.path);
            cmd.args(&server.args)
                .arg("--listen")
                .arg(addr)
                .arg("--cluster")
                .arg(&starting)
                .arg("--data")
                .arg(&data);
            if quiet {
                let file = std::fs::File::create(log(i))
                    .map_err(io(format!("creating {}", log(i).display())))?;
                cmd.stderr(file);
            }
            quiver_verbs::cluster::die_with_parent(&mut cmd);
            let child = cmd
                .spawn()
                .map_err(io(format!("starting server {i}: {cmd:?}")))?;
            cluster.children.push(child);
        }
        let deadline = Instant::now() + START_TIMEOUT;
        let client = loop {
            if let Some((i, status)) = cluster.exited()? {
                let said = if quiet {
                    let text = std::fs::read_to_string(log(i)).unwrap_or_default();
                    format!("it said: {}", text.trim())
                } else {
                    "its error is above".into()
                };
                return Err(Error::Cluster(format!(
                    "server {i} ({}) exited at start with {status}; {said}",
                    addrs[i]
                )));
            }
            match Client::connect(&membership).await {
                Ok(client) => break client,
                Err(e) if Instant::now() > deadline => {
                    return Err(Error::Cluster(format!(
                        "the cluster's servers did not all answer within {} s: {}",
                        START_TIMEOUT.as_secs(),
                        quiver_run::chain(&e)
                    )));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        std::fs::rename(&starting, &file).map_err(io(format!("writing {}", file.display())))?;
        cluster.starting = None;
        Ok((cluster, client))
    }

    /// The cluster file clients read.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The servers' addresses, in cluster-file order.
    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    /// The first server that has exited, and how.
    ///
    /// # Errors
    /// [`Error::Cluster`] if its status cannot be read.
    pub fn exited(&mut self) -> Result<Option<(usize, ExitStatus)>> {
        for (i, child) in self.children.iter_mut().enumerate() {
            let status = child
                .try_wait()
                .map_err(|e| Error::Cluster(format!("checking server {i}: {e}")))?;
            if let Some(status) = status {
                return Ok(Some((i, status)));
            }
        }
        Ok(None)
    }

    /// Runs until Ctrl-C or SIGTERM, then stops the servers ([`stop`]).
    /// A server that exits first stops the others, and the cluster fails
    /// naming it.
    ///
    /// [`stop`]: LocalCluster::stop
    ///
    /// # Errors
    /// [`Error::Cluster`] for a server that exited, or signals that cannot
    /// be listened for.
    pub async fn run_until_signal(&mut self) -> Result<()> {
        let mut watch = tokio::time::interval(Duration::from_millis(500));
        let stop = stop_signal();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                signalled = &mut stop => {
                    signalled.map_err(|e| Error::Cluster(format!("listening for signals: {e}")))?;
                    break;
                }
                _ = watch.tick() => {
                    if let Some((i, status)) = self.exited()? {
                        self.stop();
                        return Err(Error::Cluster(format!(
                            "server {i} ({}) exited with {status}; stopped the others",
                            self.addrs[i]
                        )));
                    }
                }
            }
        }
        self.stop();
        Ok(())
    }

    /// Asks every server still running to stop (SIGTERM: they finish
    /// requests and flush) and waits up to 10 s before killing what is
    /// left.
    pub fn stop(&mut self) {
        for child in &mut self.children {
            if !matches!(child.try_wait(), Ok(None)) {
                continue;
            }
            // Best effort: `kill` is how a safe program sends SIGTERM.
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .stderr(std::process::Stdio::null())
                .status();
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        for child in &mut self.children {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if let Some(starting) = &self.starting {
            let _ = std::fs::remove_file(starting);
        }
    }
}

/// Runs one server in this process until Ctrl-C or SIGTERM: opens its
/// store (replaying its log) before it binds `listen`, so a server that
/// listens is ready; tells `started` the address it serves on; on the
/// signal it finishes requests and flushes.
///
/// # Errors
/// What opening the store or serving returns; [`Error::Serve`] if the
/// address cannot be bound or signals cannot be listened for.
pub async fn serve(
    config: ServerConfig,
    listen: SocketAddr,
    started: impl FnOnce(SocketAddr),
) -> Result<()> {
    let serve_error = |e: std::io::Error| Error::Serve {
        addr: listen.to_string(),
        source: Box::new(e),
    };
    let opened = server::open(config)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(serve_error)?;
    let running = opened.serve(listener).await?;
    started(running.addr);
    stop_signal().await.map_err(serve_error)?;
    running.shutdown().await
}

/// Waits for Ctrl-C or SIGTERM.
async fn stop_signal() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r,
        _ = term.recv() => Ok(()),
    }
}

/// The `n` ports from `base`, each free on 127.0.0.1 now.
fn ports_from(base: u16, n: usize) -> Result<Vec<u16>> {
    let ports: Vec<u16> = (0..n)
        .map(|i| {
            let port = u16::try_from(i).ok().and_then(|i| base.checked_add(i));
            port.ok_or_else(|| {
                InvalidArgument::new(
                    "base_port",
                    format!("{base} leaves no room for {n} servers"),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    match ports.iter().find(|&&port| !is_free(port)) {
        Some(port) => Err(Error::Cluster(format!(
            "port {port} on 127.0.0.1 is in use; choose another base port, or 0 for free ports"
        ))),
        None => Ok(ports),
    }
}

fn is_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// `n` ports on 127.0.0.1, free now, for servers about to start: below the
/// kernel's range for outgoing connections' local ports
/// (`ip_local_port_range`), from a place that differs between runs. A port
/// the kernel calls free (a bind to port 0) lies in that range, and a
/// 32-server cluster's own connections took one between the probe and its
/// server's bind ("Address already in use").
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let outgoing = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let span = outgoing.saturating_sub(FIRST_PORT);
    let stir = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.subsec_nanos())
        ^ std::process::id().wrapping_mul(2_654_435_761);
    let start = u16::try_from(stir % u32::from(span.max(1))).expect("below a u16");
    let ports: Vec<u16> = (0..span)
        .map(|k| FIRST_PORT + (start + k) % span)
        .filter(|&port| is_free(port))
        .take(n)
        .collect();
    if ports.len() < n {
        return Err(InvalidArgument::new(
            "servers",
            format!(
                "found {} free ports of the {n} wanted between {FIRST_PORT} and {outgoing} (where outgoing connections' ports begin); name a base port",
                ports.len()
            ),
        )
        .into());
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ports from a base are refused past 65535 and when one is taken.
    #[test]
    fn ports_from_a_base_must_fit_and_be_free() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = ports_from(port, 1).unwrap_err();
        assert!(err.to_string().contains("in use"), "{err}");
        let err = ports_from(65_535, 2).unwrap_err();
        assert!(quiver_run::is_invalid_argument(&err), "{err}");
        assert_eq!(free_ports(3).unwrap().len(), 3);
    }
}
