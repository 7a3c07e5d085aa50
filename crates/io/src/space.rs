//! Free space on a filesystem, for a command that refuses up front what
//! would not fit.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Bytes an unprivileged process may still write on the filesystem that
/// holds `path` (an existing file or directory): `statvfs`'s `f_bavail`
/// blocks of `f_frsize` bytes.
///
/// # Errors
/// The `statvfs` call's, such as `NotFound` for a path that does not exist.
pub fn available_bytes(path: &Path) -> io::Result<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated string that lives across the
    // call, and `stat` is writable memory of the struct's size and
    // alignment, which statvfs only writes.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the whole struct.
    let stat = unsafe { stat.assume_init() };
    // Both are u64 on 64-bit Linux, narrower elsewhere.
    #[allow(clippy::useless_conversion)]
    Ok(u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize)))
}

#[cfg(test)]
mod tests {
    use super::available_bytes;

    #[test]
    fn a_directory_has_room_and_a_missing_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(available_bytes(dir.path()).unwrap() > 0);
        let missing = available_bytes(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }
}
