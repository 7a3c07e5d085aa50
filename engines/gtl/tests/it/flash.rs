//! Flash physics are errors, and the timing model's exact times.

use quiver_gtl::flash::{BlockId, Flash, Geometry, Ppn, Timing};
use quiver_gtl::Error;

fn geometry() -> Geometry {
    Geometry {
        channels: 2,
        ways: 2,
        blocks_per_die: 4,
        pages_per_block: 4,
        page_bytes: 16 * 1024,
        spare_bytes: 16,
    }
}

fn page(byte: u8) -> Vec<u8> {
    vec![byte; 16 * 1024]
}

#[test]
fn physics_violations_are_errors() {
    let g = geometry();
    let mut flash = Flash::new(g.clone(), Timing::default()).unwrap();
    let p0 = g.ppn(0, 1, 0);
    assert!(matches!(flash.read(p0, 0), Err(Error::ReadErased { .. })));
    flash.program(p0, &page(1), &[7], 0).unwrap();
    assert!(matches!(
        flash.program(p0, &page(2), &[], 0),
        Err(Error::ProgramNotErased { .. })
    ));
    assert!(matches!(
        flash.program(g.ppn(0, 1, 2), &page(2), &[], 0),
        Err(Error::ProgramOutOfOrder { expected: 1, .. })
    ));
    assert!(matches!(
        flash.program(g.ppn(0, 1, 1), &[0; 100], &[], 0),
        Err(Error::PageSize { .. })
    ));
    assert!(matches!(
        flash.program(g.ppn(0, 1, 1), &page(2), &[0; 17], 0),
        Err(Error::PageSize { .. })
    ));
    assert!(matches!(
        flash.read(Ppn(g.pages()), 0),
        Err(Error::PageOutOfRange { .. })
    ));
    assert!(matches!(
        flash.erase(BlockId(g.blocks()), 0),
        Err(Error::BlockOutOfRange { .. })
    ));
    let read = flash.read(p0, 0).unwrap();
    assert_eq!((read.data[0], read.spare[0], read.spare[1]), (1, 7, 0));
    let block = g.block_of(p0).0;
    flash.erase(block, 0).unwrap();
    assert_eq!(flash.erase_count(block), 1);
    assert_eq!(flash.written_pages(block), 0);
    assert!(matches!(flash.read(p0, 0), Err(Error::ReadErased { .. })));
    flash.program(p0, &page(3), &[], 0).unwrap();
    let c = flash.counters();
    assert_eq!((c.programs, c.erases, c.page_reads), (2, 1, 1));
}

#[test]
fn geometry_is_validated() {
    let bad = Geometry {
        channels: 0,
        ..geometry()
    };
    match Flash::new(bad, Timing::default()) {
        Err(Error::InvalidArgument(e)) => assert_eq!(e.parameter, "channels"),
        other => panic!("{other:?}"),
    }
    let bad = Geometry {
        page_bytes: 100,
        ..geometry()
    };
    assert!(matches!(
        Flash::new(bad, Timing::default()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_power_cut_keeps_exactly_the_pages_programmed_before_it() {
    let g = geometry();
    let mut flash = Flash::new(g.clone(), Timing::default()).unwrap();
    flash.cut_power_after(2);
    flash.program(g.ppn(0, 0, 0), &page(1), &[], 0).unwrap();
    flash.program(g.ppn(1, 0, 0), &page(2), &[], 0).unwrap();
    assert!(flash.is_frozen());
    assert!(matches!(
        flash.program(g.ppn(0, 0, 1), &page(3), &[], 0),
        Err(Error::PowerCut { programs: 2 })
    ));
    assert!(matches!(
        flash.erase(BlockId(0), 0),
        Err(Error::PowerCut { .. })
    ));
    assert_eq!(flash.peek(g.ppn(1, 0, 0)).unwrap()[0], 2);
    assert!(!flash.is_programmed(g.ppn(0, 0, 1)));
}

/// A device with pages on dies 0, 1 and 2, idle from the returned time on.
fn idle_device() -> (Flash, u64) {
    let g = geometry();
    let mut flash = Flash::new(g.clone(), Timing::default()).unwrap();
    for die in 0..3 {
        for p in 0..2 {
            flash.program(g.ppn(die, 0, p), &page(1), &[], 0).unwrap();
        }
    }
    let idle = flash.counters().modelled_ns;
    (flash, idle)
}

// Defaults: tR 40 us, a 16 KiB page crosses a channel in 20.48 us and the
// host link in 4.096 us.
const SENSE: u64 = 40_000;
const CHANNEL: u64 = 20_480;
const HOST: u64 = 4_096;

#[test]
fn reads_on_different_channels_overlap() {
    let g = geometry();
    let (mut flash, t) = idle_device();
    // Dies 0 and 1 are on channels 0 and 1.
    let a = flash.read(g.ppn(0, 0, 0), t).unwrap().done;
    let b = flash.read(g.ppn(1, 0, 0), t).unwrap().done;
    assert_eq!((a - t, b - t), (SENSE + CHANNEL, SENSE + CHANNEL));
    let ha = flash.host_transfer(16 * 1024, a);
    let hb = flash.host_transfer(16 * 1024, b);
    assert_eq!(
        (ha - t, hb - t),
        (SENSE + CHANNEL + HOST, SENSE + CHANNEL + 2 * HOST)
    );
}

#[test]
fn reads_on_one_die_serialize_and_on_one_channel_share_it() {
    let g = geometry();
    let (mut flash, t) = idle_device();
    let a = flash.read(g.ppn(0, 0, 0), t).unwrap().done;
    let b = flash.read(g.ppn(0, 0, 1), t).unwrap().done;
    assert_eq!(a - t, SENSE + CHANNEL);
    assert_eq!(
        b - t,
        2 * (SENSE + CHANNEL),
        "the second read waits for the die"
    );
    let (mut flash, t) = idle_device();
    // Dies 0 and 2 share channel 0: they sense together, then take turns on it.
    let a = flash.read(g.ppn(0, 0, 0), t).unwrap().done;
    let c = flash.read(g.ppn(2, 0, 0), t).unwrap().done;
    assert_eq!((a - t, c - t), (SENSE + CHANNEL, SENSE + 2 * CHANNEL));
    assert_eq!(flash.counters().modelled_ns, c);
}

#[test]
fn programs_and_erases_hold_their_die() {
    let g = geometry();
    let mut flash = Flash::new(g.clone(), Timing::default()).unwrap();
    let a = flash.program(g.ppn(0, 0, 0), &page(1), &[], 0).unwrap();
    assert_eq!(a, CHANNEL + 200_000);
    let b = flash.program(g.ppn(1, 0, 0), &page(1), &[], 0).unwrap();
    assert_eq!(b, CHANNEL + 200_000, "another channel programs alongside");
    let e = flash.erase(BlockId(0), 0).unwrap();
    assert_eq!(
        e,
        a + 2_000_000,
        "the erase waits for the program on its die"
    );
}

/// One step of a random flash workload.
#[derive(Clone, Debug)]
enum Step {
    /// Program the next page of the block with this byte.
    Program(u64, u8),
    Erase(u64),
    Read(u64),
}

fn step(g: &Geometry) -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    let (blocks, pages) = (g.blocks(), g.pages());
    prop_oneof![
        3 => (0..blocks, any::<u8>()).prop_map(|(b, v)| Step::Program(b, v)),
        1 => (0..blocks).prop_map(Step::Erase),
        2 => (0..pages).prop_map(Step::Read),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// A device whose pages live in a sparse file behaves exactly as one
    /// in memory: every program, erase and read answers the same (bytes,
    /// errors, times), the same pages are programmed after each step, and
    /// erased blocks give their disk space back.
    #[test]
    fn a_device_on_a_sparse_file_behaves_as_one_in_memory(
        steps in proptest::collection::vec(step(&geometry()), 1..60)
    ) {
        let g = geometry();
        let dir = tempfile::tempdir().unwrap();
        let mut memory = Flash::new(g.clone(), Timing::default()).unwrap();
        let mut file = Flash::on_file(g.clone(), Timing::default(), &dir.path().join("nand")).unwrap();
        let ppb = u64::from(g.pages_per_block);
        for (at, step) in (0u64..).zip(&steps) {
            let now = at * 1000;
            match *step {
                Step::Program(block, byte) => {
                    let ppn = Ppn(block * ppb + u64::from(memory.written_pages(BlockId(block))));
                    let spare = [byte, 1, 2];
                    let a = memory.program(ppn, &page(byte), &spare, now);
                    let b = file.program(ppn, &page(byte), &spare, now);
                    proptest::prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                }
                Step::Erase(block) => {
                    let a = memory.erase(BlockId(block), now);
                    let b = file.erase(BlockId(block), now);
                    proptest::prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                }
                Step::Read(ppn) => {
                    let a = memory.read(Ppn(ppn), now).map(|r| (r.data.to_vec(), r.spare.to_vec(), r.done));
                    let b = file.read(Ppn(ppn), now).map(|r| (r.data.to_vec(), r.spare.to_vec(), r.done));
                    proptest::prop_assert_eq!(format!("{a:?}"), format!("{b:?}"));
                }
            }
            proptest::prop_assert_eq!(memory.programmed_pages(), file.programmed_pages());
        }
        for ppn in 0..g.pages() {
            proptest::prop_assert_eq!(memory.raw(ppn), file.raw(ppn));
        }
    }
}

/// The sparse file takes disk space for programmed pages only: a full
/// block's worth after programming it, and none once it is erased.
#[test]
fn an_erased_block_gives_its_disk_space_back() {
    let g = geometry();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nand");
    let mut flash = Flash::on_file(g.clone(), Timing::default(), &path).unwrap();
    let taken = || std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&path).unwrap()) * 512;
    let page_len = u64::from(g.page_bytes + g.spare_bytes);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        g.pages() * page_len
    );
    let empty = taken();
    for i in 0..g.pages_per_block {
        flash.program(g.ppn(0, 1, i), &page(7), &[], 0).unwrap();
    }
    let full = taken();
    assert!(
        full >= empty + u64::from(g.pages_per_block) * u64::from(g.page_bytes),
        "{empty} then {full}"
    );
    flash.erase(g.block_of(g.ppn(0, 1, 0)).0, 0).unwrap();
    assert!(taken() < full, "{} after the erase, {full} before", taken());
}
