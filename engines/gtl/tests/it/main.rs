//! quiver-gtl against its references: flash physics and timing, the FTL
//! against a map of last writes, and both graph layouts against the CSR
//! graph they were loaded from, the update paths against a model, and
//! recovery after a power cut at every program.

mod apps;
mod command;
mod file;
mod flash;
mod ftl;
mod gtl;
mod image;
mod recover;
mod update;

use quiver_gtl::flash::{Geometry, Timing};
use quiver_gtl::Config;

/// A small device: 2 channels x 2 ways x 32 blocks x 8 pages of 64
/// bytes, so that random graphs have vertices whose lists span pages.
pub fn small_config() -> Config {
    Config {
        geometry: Geometry {
            channels: 2,
            ways: 2,
            blocks_per_die: 32,
            pages_per_block: 8,
            page_bytes: 64,
            spare_bytes: 24,
        },
        timing: Timing::default(),
        ftl_blocks_per_die: 16,
        over_provisioning: 0.2,
        slack: 0.05,
        mark_empty: false,
        flash_file: None,
    }
}
