//! Falling back from O_DIRECT and from io_uring, and saying why.

use std::path::Path;

use quiver_io::{AlignedBuf, Backend, BackendChoice, Error, ReadFile, ReadOptions};

use crate::{open, uring_available, Fixture};

#[test]
fn procfs_refuses_o_direct_and_we_fall_back() {
    // procfs has no direct I/O: open(O_DIRECT) fails with EINVAL.
    let path = Path::new("/proc/version");
    if !path.exists() {
        eprintln!("skipped: no /proc/version");
        return;
    }
    let f = open(path, BackendChoice::Pread, true, 4);
    assert!(!f.is_direct());
    let reason = f.fallback_reason().expect("a reason for not being direct");
    assert!(reason.contains("O_DIRECT refused"), "{reason}");
}

#[test]
fn tmpfs_is_direct_or_says_why() {
    // Before Linux 6.6 tmpfs refused O_DIRECT; since then it accepts it.
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipped: no /dev/shm");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let path = dir.path().join("data.bin");
    let data = crate::random_bytes(5 * 4096 + 7, 31);
    std::fs::write(&path, &data).unwrap();
    let f = open(&path, BackendChoice::Auto, true, 4);
    match f.fallback_reason() {
        None => {
            assert!(f.is_direct());
            eprintln!("tmpfs accepts O_DIRECT here");
        }
        Some(r) if r.contains("O_DIRECT") => {
            assert!(!f.is_direct());
            eprintln!("tmpfs fell back: {r}");
        }
        Some(r) => assert!(r.contains("io_uring"), "{r}"),
    }
    let mut buf = AlignedBuf::zeroed(data.len());
    f.read_at(0, &mut buf).unwrap();
    assert!(buf[..] == data[..]);
}

#[test]
fn auto_falls_back_to_pread_when_io_uring_setup_fails() {
    // More entries than the kernel allows (32768) makes io_uring_setup fail
    // with EINVAL, standing in for EPERM under seccomp or ENOSYS.
    let fx = Fixture::new(8192, 32);
    let opts = ReadOptions {
        backend: BackendChoice::Auto,
        direct: false,
        queue_depth: 1 << 20,
    };
    let f = ReadFile::open(&fx.path, &opts).unwrap();
    assert_eq!(f.backend(), Backend::Pread);
    let reason = f.fallback_reason().unwrap();
    assert!(reason.contains("io_uring unavailable"), "{reason}");
    let mut buf = vec![0; 8192];
    f.read_at(0, &mut buf).unwrap();
    assert_eq!(buf, fx.data);

    let opts = ReadOptions {
        backend: BackendChoice::Uring,
        ..opts
    };
    let e = ReadFile::open(&fx.path, &opts).unwrap_err();
    assert!(
        matches!(
            e,
            Error::UringSetup {
                queue_depth: 1_048_576,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn auto_and_explicit_uring_agree_about_this_machine() {
    let fx = Fixture::new(8192, 33);
    let explicit = ReadFile::open(
        &fx.path,
        &ReadOptions {
            backend: BackendChoice::Uring,
            ..ReadOptions::default()
        },
    );
    if uring_available(&fx.path) {
        let f = explicit.unwrap();
        assert_eq!(f.backend(), Backend::Uring);
        let auto = open(&fx.path, BackendChoice::Auto, true, 64);
        assert_eq!(auto.backend(), Backend::Uring);
        assert!(auto
            .fallback_reason()
            .is_none_or(|r| !r.contains("io_uring")));
    } else {
        let e = explicit.unwrap_err();
        assert!(matches!(e, Error::UringSetup { .. }), "{e:?}");
    }
}
