//! `quiver gtl ...` run: each command calls the library and prints what
//! it reports (a human summary, or `--json`).

use std::path::Path;

use anyhow::{bail, Context, Result};
use quiver_csr::Graph;
use quiver_gtl::file::bench::Config as FileConfig;
use quiver_gtl::on_image;
use quiver_gtl::run::{compare, run_input};
use quiver_gtl::updates::{self, Config as UpdatesConfig};
use quiver_gtl::{App, Update, UpdatePath};
use quiver_io::size::format_bytes;
use serde::Serialize;

use super::{AppArgs, BackendArg, DeviceArgs, GtlCommand, ImageArgs, InputArgs};
use crate::progress::Bar;
use crate::report::{flagged, print_json};

/// `quiver gtl ...` as typed by the user.
pub fn gtl(command: GtlCommand, json: bool, hidden: bool) -> Result<()> {
    match command {
        GtlCommand::Init {
            graph: path,
            device,
            slack,
            geometry,
            force,
        } => {
            if device.exists() && !force {
                bail!(
                    "{} exists; --force replaces it (its graph and updates are lost)",
                    device.display()
                );
            }
            let graph =
                Graph::open(&path).with_context(|| format!("opening {}", path.display()))?;
            let config = quiver_gtl::Config {
                slack,
                ..flagged(quiver_gtl::Config::with_geometry(geometry))?
            };
            flagged(config.validate())?;
            let Some(report) = reported(json, hidden, |bar| {
                on_image::init(&graph, &config, &device, bar).with_context(|| {
                    format!("laying {} out on {}", path.display(), device.display())
                })
            })?
            else {
                return Ok(());
            };
            println!(
                "wrote {}: {} vertices, {} edges in {} graph pages (GTT {}) and a CSR file of {} pages; {} on disk",
                device.display(),
                report.vertices,
                report.edges,
                report.graph_pages,
                format_bytes(report.gtt_bytes),
                report.csr_pages,
                format_bytes(report.image_bytes)
            );
            Ok(())
        }
        GtlCommand::AddEdge {
            image,
            source,
            target,
            weight,
            path,
        } => {
            let update = Update::AddEdge {
                source,
                target,
                weight,
            };
            update_image(&image.image, &update, path.into(), json, hidden)
        }
        GtlCommand::DeleteEdge {
            image,
            source,
            target,
            path,
        } => update_image(
            &image.image,
            &Update::DeleteEdge { source, target },
            path.into(),
            json,
            hidden,
        ),
        GtlCommand::Bench {
            app,
            input,
            device,
            options,
        } => bench(&input, app.into(), &options, &device, json, hidden),
        GtlCommand::File {
            graph: path,
            gtl,
            requests,
            queue_depth,
            slack,
            seed,
            page_bytes,
        } => {
            let config = FileConfig {
                requests,
                queue_depth,
                page_bytes: usize::try_from(page_bytes.0).unwrap_or(usize::MAX),
                slack,
                seed,
            };
            flagged(config.validate())?;
            file_reads(&path, &gtl, &config, json, hidden)
        }
        GtlCommand::Merge {
            image: ImageArgs { image },
            groups,
        } => {
            let Some(report) = reported(json, hidden, |bar| {
                on_image::merge(&image, groups, bar)
                    .with_context(|| format!("merging {}", image.display()))
            })?
            else {
                return Ok(());
            };
            println!(
                "page groups merged: {} ({} left dirty); pages written: {}; {:.3} ms modelled",
                report.groups,
                report.remaining,
                report.pages_written,
                micros(report.modelled_ns) / 1e3
            );
            Ok(())
        }
        GtlCommand::Get {
            input,
            vertex,
            backend,
            device,
        } => {
            let config = device.config(backend);
            flagged(config.validate())?;
            let path = input.path();
            let opened = input.open()?;
            let Some(report) = reported(json, hidden, |bar| {
                quiver_gtl::get(opened.input(), vertex, &config, bar)
                    .with_context(|| format!("GetAdjacencyList({vertex}) on {}", path.display()))
            })?
            else {
                return Ok(());
            };
            let shown: Vec<String> = report.neighbours.iter().map(u64::to_string).collect();
            println!("{vertex}: [{}]", shown.join(", "));
            println!(
                "{} neighbours, {} pages read, {:.1} us modelled ({})",
                report.neighbours.len(),
                report.pages_read,
                micros(report.modelled_ns),
                config.backend
            );
            Ok(())
        }
        GtlCommand::Updates {
            graph: path,
            path: update_path,
            slack,
            share,
            new_vertices,
            snapshots,
            queries,
            seed,
        } => {
            let config = UpdatesConfig {
                path: update_path.into(),
                slack,
                share,
                new_vertices,
                snapshots,
                queries,
                seed,
                ..UpdatesConfig::default()
            };
            flagged(config.validate())?;
            let graph =
                Graph::open(&path).with_context(|| format!("opening {}", path.display()))?;
            let Some(report) = reported(json, hidden, |bar| {
                updates::run(&graph, &config, bar)
                    .with_context(|| format!("the update benchmark on {}", path.display()))
            })?
            else {
                return Ok(());
            };
            println!(
                "graph      {} ({:?} path, slack {}): {} vertices and {} edges loaded ({} pages), {} vertices and {} edges streamed",
                path.display(),
                report.path,
                report.slack,
                report.vertices,
                report.edges,
                report.image_pages,
                report.added_vertices,
                report.added_edges
            );
            for (i, s) in report.snapshots.iter().enumerate() {
                println!(
                    "snapshot {:<2} {} updates in {} batches: {} pages written, {:.3} ms modelled; queries {:.1} us; {} vertices chained",
                    i + 1,
                    s.updates,
                    s.batches,
                    s.pages_written,
                    micros(s.update_ns) / 1e3,
                    s.query_ns / 1e3,
                    s.chained
                );
            }
            let m = &report.merge;
            println!(
                "merge      {} groups, {} pages written, {} read, {:.3} ms modelled; queries {:.1} us merged, {} during",
                m.groups,
                m.pages_written,
                m.pages_read,
                micros(m.modelled_ns) / 1e3,
                m.query_ns_merged / 1e3,
                m.query_ns_during
                    .iter()
                    .map(|q| format!("{:.1}", q / 1e3))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            println!(
                "writes     {} pages in all, write amplification {:.1} (bytes programmed per byte of edges added)",
                report.pages_written, report.write_amplification
            );
            crate::report::print_times(&report.summary, "writing the device");
            Ok(())
        }
        GtlCommand::Run {
            app,
            input,
            backend,
            device,
            options,
        } => {
            let config = options.config(backend, &device);
            flagged(config.validate())?;
            let app = App::from(app);
            let opened = input.open()?;
            let Some(report) = reported(json, hidden, |bar| {
                run_input(opened.input(), app, &config, bar)
                    .with_context(|| format!("{app:?} on {}", input.path().display()))
            })?
            else {
                return Ok(());
            };
            println!(
                "app        {app:?} on {} ({})",
                input.path().display(),
                report.backend
            );
            println!(
                "graph      {} vertices, {} edges; device image {} pages ({} programmed, {:.3} ms modelled)",
                report.vertices,
                report.edges,
                report.init.image_pages,
                report.init.pages_written,
                micros(report.init.modelled_ns) / 1e3
            );
            println!("result     {}", serde_json::to_string(&report.result)?);
            #[allow(clippy::cast_precision_loss)] // Counts shown as ratios.
            let per = |x: u64| x as f64 / report.requests.max(1) as f64;
            println!(
                "device     {} requests in {} runs, {} pages read ({:.3} per request), {} written, {:.3} ms modelled",
                report.requests,
                report.runs,
                report.pages_read,
                per(report.pages_read),
                report.pages_written,
                micros(report.modelled_ns) / 1e3
            );
            println!(
                "cache      {} hits, {} misses, bound {}",
                report.cache_hits,
                report.cache_misses,
                format_bytes(report.cache_bytes)
            );
            crate::report::print_times(&report.summary, "writing the device");
            Ok(())
        }
    }
}

/// `quiver gtl bench`: `app` on both layouts, and the ratios.
fn bench(
    input: &InputArgs,
    app: App,
    options: &AppArgs,
    device: &DeviceArgs,
    json: bool,
    hidden: bool,
) -> Result<()> {
    let config = options.config(BackendArg::Gtl, device);
    flagged(config.validate())?;
    let opened = input.open()?;
    let Some(both) = reported(json, hidden, |bar| {
        compare(opened.input(), app, &config, bar)
            .with_context(|| format!("{app:?} on {}", input.path().display()))
    })?
    else {
        return Ok(());
    };
    println!(
        "{app:?} on {}: {} vertices, {} edges",
        input.path().display(),
        both.gtl.vertices,
        both.gtl.edges
    );
    for r in [&both.gtl, &both.csr] {
        println!(
            "{:<4} {:>12.3} ms modelled  {:>10} pages read  {:>10} requests  {:>8} cache hits  result {}",
            r.backend,
            micros(r.modelled_ns) / 1e3,
            r.pages_read,
            r.requests,
            r.cache_hits,
            serde_json::to_string(&r.result)?
        );
    }
    println!(
        "csr / gtl: {:.2}x modelled time, {:.2}x pages read",
        both.modelled_csr_over_gtl, both.pages_read_csr_over_gtl
    );
    Ok(())
}

/// Runs `work` under a progress bar (hidden with --json or when asked),
/// then prints its report as JSON if asked (`None`), or returns it for
/// the human lines.
fn reported<T: Serialize>(
    json: bool,
    hidden: bool,
    work: impl FnOnce(&Bar) -> Result<T>,
) -> Result<Option<T>> {
    let bar = Bar::new(json || hidden);
    let report = work(&bar)?;
    drop(bar);
    if json {
        print_json(&report)?;
        return Ok(None);
    }
    Ok(Some(report))
}

/// `quiver gtl file`: writes the GTL file, then times random calls on it
/// and on the graph's CSR file.
fn file_reads(
    path: &Path,
    gtl_path: &Path,
    config: &FileConfig,
    json: bool,
    hidden: bool,
) -> Result<()> {
    let Some(report) = reported(json, hidden, |bar| {
        quiver_gtl::file::bench::run(path, gtl_path, config, bar).with_context(|| {
            format!(
                "random reads on {} and {}",
                path.display(),
                gtl_path.display()
            )
        })
    })?
    else {
        return Ok(());
    };
    println!(
        "{}: {} GTL pages of {} at {}; {} random calls on vertices with edges each, queue depth {}",
        path.display(),
        report.pages,
        format_bytes(report.page_bytes as u64),
        gtl_path.display(),
        config.requests,
        config.queue_depth
    );
    let rows = &report.runs;
    for r in rows {
        #[allow(clippy::cast_precision_loss)] // Counts shown as ratios.
        let per = |x: u64| x as f64 / r.reads.calls.max(1) as f64;
        println!(
            "{:<4} {:<6} {:>10.0} calls/s  {:.3} reads/call  {:>7.0} bytes/call  {}{}",
            r.layout,
            r.backend,
            r.calls_per_s,
            per(r.reads.reads),
            per(r.reads.bytes),
            r.reads.neighbours,
            if r.direct {
                " neighbours, O_DIRECT"
            } else {
                " neighbours, buffered"
            }
        );
    }
    println!(
        "gtl / csr calls per second: {:.2} (both io_uring), {:.2} (csr by pread)",
        rows[0].calls_per_s / rows[1].calls_per_s,
        rows[0].calls_per_s / rows[2].calls_per_s
    );
    Ok(())
}

/// Runs `update` by `path` on the image `image` and reports; an update
/// that names an absent edge fails (exit 1) and changes nothing.
fn update_image(
    image: &Path,
    update: &Update,
    path: UpdatePath,
    json: bool,
    hidden: bool,
) -> Result<()> {
    let Some(report) = reported(json, hidden, |bar| {
        on_image::update(image, update, path, bar)
            .with_context(|| format!("{update} on {}", image.display()))
    })?
    else {
        return Ok(());
    };
    if !report.applied {
        bail!("{}: no such edge; nothing changed", report.update);
    }
    println!(
        "{} ({path:?} path): {} pages read, {} written, {:.1} us modelled (mounting: {:.3} ms)",
        report.update,
        report.pages_read,
        report.pages_written,
        micros(report.modelled_ns),
        micros(report.mount_ns) / 1e3
    );
    Ok(())
}

#[allow(clippy::cast_precision_loss)] // Nanoseconds shown as microseconds.
fn micros(ns: u64) -> f64 {
    ns as f64 / 1e3
}
