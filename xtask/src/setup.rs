//! The Debian packages the workspace needs beyond a Rust toolchain, in one
//! list ([`NEEDS`]), and their installation: `cargo xtask demo`, `cargo
//! xtask test` and `.ci/run` (through `cargo xtask setup`) install what is
//! missing with apt-get, through sudo when not root, before they run cargo.
//! Where that cannot be done (no dpkg, no apt-get, no sudo, apt-get fails)
//! they stop with one message naming the packages and the command to run,
//! and exit code 2, instead of a build script's panic.
//!
//! xtask itself needs none of these packages, so it builds on a machine
//! that has only the toolchain.

use std::fmt;
use std::process::{Command, Stdio};

use clap::ValueEnum;

/// What a set of packages is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Purpose {
    /// The default build: the driver, every engine, the tests.
    Build,
    /// The Python package, built by pip (maturin from PyPI) into a venv.
    Python,
    /// quiver-verbs' optional fabrics (`--features mpi`, `--features rdma`).
    Fabrics,
}

/// Every Debian package the workspace needs, by purpose. The only list:
/// `.ci/run` installs it through `cargo xtask setup`.
pub const NEEDS: &[(Purpose, &[&str])] = &[
    // The meta engine links Debian's RocksDB (compiling it takes 15
    // minutes here; see .cargo/config.toml) and generates its bindings with
    // bindgen, which loads libclang.
    (Purpose::Build, &["libclang-dev", "librocksdb-dev"]),
    // `python3 -m venv` on Debian's interpreter needs python3-venv (it
    // brings ensurepip); numpy and pytest come from PyPI into the venv.
    (Purpose::Python, &["python3", "python3-venv"]),
    // Open MPI for the `mpi` fabric (and mpirun for its tests); libibverbs
    // and librdmacm for `rdma`, whose -sys crate builds rdma-core's headers
    // with cmake and finds them with pkg-config.
    (
        Purpose::Fabrics,
        &[
            "libopenmpi-dev",
            "openmpi-bin",
            "libibverbs-dev",
            "librdmacm-dev",
            "cmake",
            "pkg-config",
        ],
    ),
];

/// A machine where the packages cannot be installed from here: the driver
/// of `cargo xtask` exits 2 with this message.
#[derive(Debug)]
pub struct SetupError(pub String);

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

/// The packages for these purposes, in [`NEEDS`]' order.
pub fn packages(purposes: &[Purpose]) -> Vec<&'static str> {
    NEEDS
        .iter()
        .filter(|(purpose, _)| purposes.contains(purpose))
        .flat_map(|(_, names)| names.iter().copied())
        .collect()
}

/// Installs whichever of the packages for `purposes` are missing.
pub fn ensure(purposes: &[Purpose]) -> Result<(), SetupError> {
    if std::env::var_os("QUIVER_SKIP_SETUP").is_some() {
        return Ok(());
    }
    let wanted = packages(purposes);
    let install_line = format!(
        "sudo apt-get update && sudo apt-get install -y --no-install-recommends {}",
        wanted.join(" ")
    );
    if !on_path("dpkg-query") || !on_path("apt-get") {
        return Err(SetupError(format!(
            "this is not a Debian machine (no dpkg-query or apt-get), so the packages Quiver's \
             build needs cannot be checked or installed from here. On Debian they are: {}. \
             Install their equivalents with this system's package manager, then run again \
             with QUIVER_SKIP_SETUP=1",
            wanted.join(" ")
        )));
    }
    let missing: Vec<&str> = wanted.into_iter().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let list = missing.join(" ");
    let elevate: &[&str] = if is_root() {
        &[]
    } else if on_path("sudo") {
        &["sudo"]
    } else {
        return Err(SetupError(format!(
            "Quiver's build needs these Debian packages, which are missing: {list}. \
             This user is not root and there is no sudo; as root, run:\n  \
             apt-get update && apt-get install -y --no-install-recommends {list}"
        )));
    };
    eprintln!("installing the Debian packages Quiver's build needs: {list}");
    let apt = |args: &[&str]| -> Result<(), SetupError> {
        let mut command = Command::new(elevate.first().copied().unwrap_or("apt-get"));
        if !elevate.is_empty() {
            command.arg("apt-get");
        }
        let status = command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status();
        match status {
            Ok(status) if status.success() => Ok(()),
            outcome => Err(SetupError(format!(
                "`{}apt-get {}` failed ({}); Quiver's build needs these Debian packages, which \
                 are missing: {list}. Install them with:\n  {install_line}",
                elevate.iter().map(|e| format!("{e} ")).collect::<String>(),
                args.join(" "),
                match outcome {
                    Ok(status) => status.to_string(),
                    Err(err) => err.to_string(),
                }
            ))),
        }
    };
    apt(&["update", "-qq"])?;
    let mut install = vec!["install", "-y", "-qq", "--no-install-recommends"];
    install.extend(&missing);
    apt(&install)?;
    if let Some(still) = missing.iter().find(|p| !installed(p)) {
        return Err(SetupError(format!(
            "apt-get finished but {still} is still not installed; install it with:\n  \
             {install_line}"
        )));
    }
    Ok(())
}

/// Whether dpkg knows the package as installed.
fn installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| out.status.success() && out.stdout.ends_with(b" installed"))
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_purpose_has_packages_and_none_is_listed_twice() {
        for purpose in Purpose::value_variants() {
            assert!(
                !packages(&[*purpose]).is_empty(),
                "{purpose:?} lists no package"
            );
        }
        let all = packages(Purpose::value_variants());
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            all.len(),
            "a package is listed twice: {all:?}"
        );
    }

    #[test]
    fn ci_installs_the_list_through_xtask() {
        // .ci/run must not carry a second list: it asks xtask.
        let run = std::fs::read_to_string(crate::workspace_root().join(".ci/run"))
            .expect(".ci/run is readable");
        assert!(
            run.contains("cargo xtask setup"),
            ".ci/run does not call cargo xtask setup"
        );
        for package in packages(Purpose::value_variants()) {
            assert!(
                !run.contains(package),
                ".ci/run names {package}: the list lives in xtask/src/setup.rs only"
            );
        }
    }
}
