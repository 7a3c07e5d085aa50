//! The Python package's tests, against the package as users install it:
//! `python3 -m venv` makes a venv under the target directory, `pip install
//! ./bindings/python pytest` builds the wheel there (maturin from PyPI, in
//! the workspace's target directory, so the dependencies the driver's
//! release build compiled are reused) and installs it with numpy, and the
//! venv's pytest runs `bindings/python/tests` with the driver in
//! `QUIVER_BIN` for the tests that compare with it.

use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};

use crate::{cargo, run_status, target_dir};

/// Builds and installs the wheel into the venv, then runs pytest in it.
pub fn test(root: &Path) -> Result<ExitCode> {
    let target = target_dir(root)?;
    let venv = target.join("python-venv");
    let python = venv.join("bin/python");
    if !python.is_file() {
        let interpreter = std::env::var_os("PYTHON").unwrap_or_else(|| "python3".into());
        let mut command = Command::new(&interpreter);
        command.args(["-m", "venv"]).arg(&venv);
        let code = run_status(command, "python3 -m venv")?;
        if code != ExitCode::SUCCESS {
            return Ok(code);
        }
    }
    eprintln!(
        "xtask: pip install ./bindings/python pytest (into {})",
        venv.display()
    );
    let mut install = Command::new(&python);
    install.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "./bindings/python",
        "pytest",
    ]);
    // maturin builds in the workspace's target directory (cargo's own
    // choice); naming it keeps that true when pip runs the build elsewhere.
    install.env("CARGO_TARGET_DIR", &target);
    let code = run_status(install, "pip install ./bindings/python")?;
    if code != ExitCode::SUCCESS {
        return Ok(code);
    }
    // The driver the tests compare with: the debug build `cargo test` made.
    let mut build = cargo();
    build.args(["build", "--package", "quiver", "--quiet"]);
    let code = run_status(build, "cargo build --package quiver")?;
    if code != ExitCode::SUCCESS {
        return Ok(code);
    }
    let driver = target.join("debug/quiver");
    let mut pytest = Command::new(&python);
    pytest
        .args(["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"])
        .arg(root.join("bindings/python/tests"))
        .env("QUIVER_BIN", &driver)
        // The installed package, not the source tree's python/quiver.
        .env_remove("PYTHONPATH");
    run_status(pytest, "pytest bindings/python/tests").context("testing the installed wheel")
}
