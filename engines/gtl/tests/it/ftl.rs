//! The FTL against a map of last writes: every read returns the last
//! write, the page accounting holds after every step, and GC runs.

use std::collections::HashMap;

use proptest::prelude::*;
use quiver_gtl::flash::{Flash, Geometry, Timing};
use quiver_gtl::ftl::{Ftl, Lba};
use quiver_gtl::Error;

fn geometry() -> Geometry {
    Geometry {
        channels: 2,
        ways: 1,
        blocks_per_die: 10,
        pages_per_block: 4,
        page_bytes: 64,
        spare_bytes: 16,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn reads_return_the_last_write_and_pages_add_up(
        writes in prop::collection::vec((0u64..41, any::<u8>()), 100..400),
    ) {
        let g = geometry();
        let mut flash = Flash::new(g.clone(), Timing::default()).unwrap();
        // Blocks 1..9 of each die: 64 pages, 41 logical.
        let mut ftl = Ftl::new(&g, 1..9, 0.35).unwrap();
        prop_assert_eq!(ftl.logical_pages(), 41);
        let mut model: HashMap<u64, u8> = HashMap::new();
        let mut now = 0;
        for (lba, byte) in writes.iter().copied() {
            now = ftl.write(&mut flash, Lba(lba), &[byte; 64], now).unwrap();
            model.insert(lba, byte);
            let pages = ftl.check(&flash);
            prop_assert_eq!(pages.valid, model.len() as u64);
            prop_assert_eq!(pages.total, 64);
        }
        for lba in 0..41 {
            let (data, done) = ftl.read(&mut flash, Lba(lba), now).unwrap();
            now = done;
            prop_assert_eq!(data, vec![model.get(&lba).copied().unwrap_or(0); 64]);
        }
        prop_assert!(ftl.counters().gc_runs > 0, "{} writes to 64 pages need GC", writes.len());
        prop_assert_eq!(flash.counters().programs, writes.len() as u64 + ftl.counters().relocated);
        // The FTL never touches blocks outside its range.
        for die in 0..2 {
            for block in [0, 9] {
                prop_assert_eq!(flash.erase_count(g.block_of(g.ppn(die, block, 0)).0), 0);
            }
        }
    }
}

#[test]
fn too_little_over_provisioning_and_out_of_range_pages_are_errors() {
    let g = geometry();
    match Ftl::new(&g, 1..9, 0.07) {
        Err(Error::InvalidArgument(e)) => assert_eq!(e.parameter, "over_provisioning"),
        other => panic!("{other:?}"),
    }
    let mut flash = Flash::new(g.clone(), Timing::default()).unwrap();
    let mut ftl = Ftl::new(&g, 1..9, 0.35).unwrap();
    assert!(matches!(
        ftl.write(&mut flash, Lba(41), &[0; 64], 0),
        Err(Error::LbaOutOfRange { lba: 41, pages: 41 })
    ));
    assert!(matches!(
        ftl.read(&mut flash, Lba(99), 0),
        Err(Error::LbaOutOfRange { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn after_a_power_cut_every_acknowledged_write_reads_back(
        writes in prop::collection::vec((0u64..41, 1u8..=255), 50..200),
        cut in 0u64..400,
    ) {
        let g = geometry();
        let mut flash = Flash::new(g.clone(), Timing::default()).unwrap();
        let mut ftl = Ftl::new(&g, 1..9, 0.35).unwrap();
        flash.cut_power_after(cut);
        let mut acked: HashMap<u64, u8> = HashMap::new();
        let mut in_flight = None;
        for (lba, byte) in writes.iter().copied() {
            match ftl.write(&mut flash, Lba(lba), &[byte; 64], 0) {
                Ok(_) => {
                    acked.insert(lba, byte);
                }
                Err(Error::PowerCut { .. }) => {
                    in_flight = Some((lba, byte));
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        flash.power_on();
        let mut ftl = Ftl::recover(&g, 1..9, 0.35, &flash).unwrap();
        ftl.check(&flash);
        for lba in 0..41 {
            let (data, _) = ftl.read(&mut flash, Lba(lba), 0).unwrap();
            let want = acked.get(&lba).copied().unwrap_or(0);
            // The write cut short may or may not have reached its page.
            let torn = in_flight.filter(|&(l, _)| l == lba).map(|(_, b)| b);
            prop_assert!(
                data[0] == want || Some(data[0]) == torn,
                "lba {} reads {} after the cut, acknowledged {}", lba, data[0], want
            );
        }
        // The recovered FTL takes writes again (and GCs the old pages).
        for (lba, byte) in writes.iter().copied() {
            ftl.write(&mut flash, Lba(lba), &[byte; 64], 0).unwrap();
        }
        ftl.check(&flash);
    }
}
