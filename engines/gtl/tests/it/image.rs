//! Device images: a device saved and opened again reads as before (its
//! unmerged deltas, its baseline file and its counts of erases included),
//! and a file that is not an image, or a damaged one, is a clear error.

use quiver_csr::testing::karate;
use quiver_gtl::{Error, Ssd, Update, UpdatePath};
use quiver_run::NoProgress;

use crate::small_config;

fn saved() -> (tempfile::TempDir, std::path::PathBuf, Ssd) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.img");
    let mut ssd = Ssd::new(&small_config()).unwrap();
    ssd.graph_initialize(&karate(true), &NoProgress).unwrap();
    ssd.write_csr(&karate(true), &NoProgress).unwrap();
    let add = |s, t| Update::AddEdge {
        source: s,
        target: t,
        weight: 1.0,
    };
    ssd.update(&[add(0, 33), add(5, 6)], UpdatePath::Direct)
        .unwrap();
    ssd.update(
        &[add(1, 30), Update::DeleteVertex { vertex: 2 }],
        UpdatePath::Delta,
    )
    .unwrap();
    ssd.save(&path, &NoProgress).unwrap();
    (dir, path, ssd)
}

fn lists(ssd: &mut Ssd) -> Vec<Vec<u32>> {
    let n = ssd.gtl().unwrap().vertices();
    (0..n)
        .map(|v| ssd.get_adjacency_list(v).unwrap().value)
        .collect()
}

#[test]
fn a_saved_device_opens_with_the_same_graph_and_unmerged_deltas() {
    let (_dir, path, mut before) = saved();
    let (mut after, mount) = Ssd::open(&path).unwrap();
    assert!(mount > 0, "mounting reads the graph pages");
    assert_eq!(lists(&mut after), lists(&mut before));
    assert!(
        after.gtl().unwrap().chained() > 0,
        "the delta chains survive"
    );
    // The graph read back group by group holds the lists read one by one
    // (a quiver-csr graph keeps each list sorted).
    let graph = after.read_graph().unwrap();
    for (v, mut list) in (0u32..).zip(lists(&mut before)) {
        list.sort_unstable();
        assert_eq!(
            graph.neighbors(v),
            list.as_slice(),
            "read_graph's list of {v}"
        );
    }
    for v in 0..34 {
        assert_eq!(
            after.csr_get_adjacency_list(v).unwrap().value,
            karate(true).neighbors(v),
            "the baseline's file of vertex {v}"
        );
    }
    assert_eq!(after.flash().block_erases(), before.flash().block_erases());
    after.gtl().unwrap().check_structure(after.flash());
    // It works on, and saves over itself.
    after.merge(None).unwrap();
    after.save(&path, &NoProgress).unwrap();
    let (mut again, _) = Ssd::open(&path).unwrap();
    assert_eq!(lists(&mut again), lists(&mut before));
    assert_eq!(again.gtl().unwrap().chained(), 0);
    let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn files_that_are_not_sound_images_are_named_errors() {
    let (dir, path, _) = saved();
    let bytes = std::fs::read(&path).unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("empty", Vec::new(), "bad magic"),
        ("text", b"0 1\n1 2\n".to_vec(), "bad magic"),
        ("truncated", bytes[..bytes.len() - 10].to_vec(), "truncated"),
        (
            "flipped",
            {
                let mut b = bytes.clone();
                let last = b.len() - 100;
                b[last] ^= 0x40;
                b
            },
            "checksum",
        ),
    ];
    for (name, content, want) in cases {
        let bad = dir.path().join(name);
        std::fs::write(&bad, content).unwrap();
        match Ssd::open(&bad) {
            Err(e @ Error::Image { .. }) => {
                let text = e.to_string();
                assert!(text.contains(want) && text.contains(name), "{name}: {text}");
            }
            other => panic!("{name}: {:?}", other.map(|_| ())),
        }
    }
    assert!(matches!(
        Ssd::open(&dir.path().join("missing")),
        Err(Error::Image { .. })
    ));
}
