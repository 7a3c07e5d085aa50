//! Where a command's output goes (`-o PATH`), decided once from what the
//! path is, so that no output ever damages what it points to:
//!
//! - a new path, or a regular file: written under a temporary name in the
//!   same directory and renamed over it by [`Output::commit`] (a symlink is
//!   followed: the file it names is replaced, the link stays);
//! - a FIFO, a character device (`/dev/null`), or `-` (standard output):
//!   written in place, streaming, for [`Shape::Stream`] outputs only;
//! - anything else (a directory, a block device, a socket, a dangling
//!   symlink): refused with a message saying what the path is.
//!
//! Files are created with mode 0666 less the process's umask (0644 by
//! default), as `File::create` makes them. An output dropped without
//! [`Output::commit`] removes its temporary file and leaves the path as it
//! was.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How an output is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Front to back: text, edge lists, walks. May go to a pipe or device.
    Stream,
    /// With seeks back (a `.qcsr` graph's header is written last): only to
    /// a file.
    Seekable,
}

/// An output being written; see the module docs.
#[derive(Debug)]
pub struct Output {
    file: File,
    /// The temporary file, renamed to `target` on commit; `None` when the
    /// output is written in place.
    temp: Option<PathBuf>,
    /// The file the rename replaces (the path with symlinks followed).
    target: PathBuf,
    /// Whether commit makes the file and the rename durable.
    sync: bool,
}

/// The path a temporary file for `target` takes: hidden, beside it.
fn temp_path(target: &Path, attempt: u32) -> PathBuf {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = target
        .file_name()
        .map_or("output".into(), |n| n.to_string_lossy());
    dir.join(format!(".{name}.{}.{attempt}.tmp", std::process::id()))
}

fn refused(path: &Path, what: &str, shape: Shape) -> io::Error {
    let takes = match shape {
        Shape::Stream => "a new path, a regular file, a FIFO or a character device",
        Shape::Seekable => "a new path or a regular file",
    };
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is {what}; an output goes to {takes}", path.display()),
    )
}

impl Output {
    /// Opens `path` for an output of `shape`. [`Output::commit`] fsyncs the
    /// file and its directory unless [`Output::without_sync`] says not to.
    ///
    /// # Errors
    /// What the path is, when it cannot take this output; or the error of
    /// creating the temporary file.
    pub fn create(path: &Path, shape: Shape) -> io::Result<Output> {
        if path == Path::new("-") {
            if shape == Shape::Seekable {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "this output is written with seeks, so it cannot go to standard output; name a file",
                ));
            }
            let file = File::from(io::stdout().as_fd().try_clone_to_owned()?);
            return Ok(Output::in_place(file, path));
        }
        let target = match std::fs::metadata(path) {
            Ok(meta) => {
                let kind = meta.file_type();
                if kind.is_file() {
                    std::fs::canonicalize(path)?
                } else if kind.is_fifo() || kind.is_char_device() {
                    if shape == Shape::Seekable {
                        return Err(refused(
                            path,
                            "a FIFO or a device, and this output is written with seeks",
                            shape,
                        ));
                    }
                    let file = OpenOptions::new().write(true).open(path)?;
                    return Ok(Output::in_place(file, path));
                } else if kind.is_dir() {
                    return Err(refused(path, "a directory", shape));
                } else if kind.is_block_device() {
                    return Err(refused(path, "a block device", shape));
                } else {
                    return Err(refused(path, "a socket", shape));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if std::fs::symlink_metadata(path).is_ok() {
                    return Err(refused(path, "a symlink to nothing", shape));
                }
                path.to_owned()
            }
            Err(e) => return Err(e),
        };
        // A name no one else uses: created exclusively, retried on a clash.
        for attempt in 0.. {
            let temp = temp_path(&target, attempt);
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&temp)
            {
                Ok(file) => {
                    return Ok(Output {
                        file,
                        temp: Some(temp),
                        target,
                        sync: true,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => {}
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns")
    }

    fn in_place(file: File, path: &Path) -> Output {
        Output {
            file,
            temp: None,
            target: path.to_owned(),
            sync: false,
        }
    }

    /// Skips commit's fsyncs, for scratch output removed when its owner is
    /// done with it: it still appears whole or not at all, but may not
    /// survive a machine crash.
    #[must_use]
    pub fn without_sync(mut self) -> Output {
        self.sync = false;
        self
    }

    /// The file being written (the temporary one, or the FIFO or device).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Finishes the output: a file is (synced and) renamed over the path,
    /// and a copy of a regular file it replaces keeps that file's mode; a
    /// stream is flushed.
    ///
    /// # Errors
    /// The error of syncing or renaming.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        let Some(temp) = self.temp.take() else {
            return Ok(());
        };
        let done = (|| {
            if let Ok(meta) = std::fs::metadata(&self.target) {
                let mode = meta.permissions().mode();
                self.file
                    .set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            if self.sync {
                self.file.sync_all()?;
            }
            std::fs::rename(&temp, &self.target)?;
            if self.sync {
                if let Some(dir) = self.target.parent().filter(|d| !d.as_os_str().is_empty()) {
                    // Makes the rename durable; not every filesystem allows it.
                    if let Ok(dir) = File::open(dir) {
                        let _ = dir.sync_all();
                    }
                }
            }
            Ok(())
        })();
        if done.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        done
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(temp) = &self.temp {
            let _ = std::fs::remove_file(temp);
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Seek for Output {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.file.seek(pos)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn written(path: &Path, shape: Shape, text: &str) -> io::Result<()> {
        let mut out = Output::create(path, shape)?;
        out.write_all(text.as_bytes())?;
        out.commit()
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn a_new_path_and_a_regular_file_are_replaced_whole_with_the_umask_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        written(&path, Shape::Stream, "one\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        // 0666 less the umask: readable by others under the usual 022.
        assert_eq!(mode & 0o600, 0o600);
        assert_eq!(mode & 0o111, 0, "{mode:o}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        written(&path, Shape::Seekable, "two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "a replaced file keeps its mode");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn an_output_dropped_unfinished_leaves_the_path_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "kept\n").unwrap();
        let mut out = Output::create(&path, Shape::Stream).unwrap();
        out.write_all(b"half").unwrap();
        drop(out);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "kept\n");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_symlink_is_followed_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.txt");
        let link = dir.path().join("link.txt");
        std::fs::write(&real, "old\n").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        written(&link, Shape::Stream, "new\n").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new\n");
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        let err = written(&dangling, Shape::Stream, "x").unwrap_err();
        assert!(err.to_string().contains("a symlink to nothing"), "{err}");
    }

    #[test]
    fn devices_and_fifos_are_written_in_place_when_streaming() {
        written(Path::new("/dev/null"), Shape::Stream, "gone\n").unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let err = written(Path::new("/dev/null"), Shape::Seekable, "x").unwrap_err();
        assert!(err.to_string().contains("written with seeks"), "{err}");
        if Path::new("/dev/full").exists() {
            let err = written(Path::new("/dev/full"), Shape::Stream, "x").unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
            assert!(std::fs::metadata("/dev/full")
                .unwrap()
                .file_type()
                .is_char_device());
        }
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut text = String::new();
                File::open(fifo).unwrap().read_to_string(&mut text).unwrap();
                text
            })
        };
        written(&fifo, Shape::Stream, "through\n").unwrap();
        assert_eq!(reader.join().unwrap(), "through\n");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn directories_and_unwritable_places_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let err = written(dir.path(), Shape::Stream, "x").unwrap_err();
        assert!(err.to_string().contains("is a directory"), "{err}");
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let inside = locked.join("out.txt");
        match written(&inside, Shape::Stream, "x") {
            // Anyone but root is refused by the kernel, and nothing is made.
            Err(err) => {
                assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
                assert!(!inside.exists());
            }
            // Root writes anywhere: then the output is whole.
            Ok(()) => assert_eq!(std::fs::read_to_string(&inside).unwrap(), "x"),
        }
        assert!(leftovers(&locked).is_empty());
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
