//! Positioned writes, counted, and read back after dropping the page cache.

use quiver_io::{drop_page_cache, map_readonly, AlignedBuf, BackendChoice, IoCounters, WriteFile};

use crate::open;

#[test]
fn write_sync_drop_cache_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.bin");
    let w = WriteFile::create(&path).unwrap();
    let a = crate::random_bytes(3 * 4096, 41);
    let b = crate::random_bytes(100, 42);
    w.write_all_at(0, &a).unwrap();
    w.write_all_at(4096, &b).unwrap();
    w.sync().unwrap();
    assert_eq!(
        w.stats().snapshot(),
        IoCounters {
            read_calls: 0,
            read_bytes: 0,
            write_calls: 2,
            write_bytes: 3 * 4096 + 100
        }
    );
    assert_eq!(w.path(), path);
    let mut want = a.clone();
    want[4096..4196].copy_from_slice(&b);

    drop_page_cache(&std::fs::File::open(&path).unwrap()).unwrap();
    let f = open(&path, BackendChoice::Auto, true, 4);
    let mut buf = AlignedBuf::zeroed(want.len());
    f.read_at(0, &mut buf).unwrap();
    assert!(buf[..] == want[..]);
    let m = map_readonly(&std::fs::File::open(&path).unwrap()).unwrap();
    assert!(m[..] == want[..]);

    // create truncates.
    let w = WriteFile::create(&path).unwrap();
    w.sync().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}
