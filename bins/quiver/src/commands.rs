//! One function per subcommand: call the library, print the report.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use quiver_csr::{
    BlockRule, ConvertOptions, EdgeFormat, ExportOptions, Graph, GraphSpec, InfoOptions,
    SortOptions,
};

use crate::cli::{
    Cli, Command, ConvertArgs, ExportArgs, GenerateCommon, InfoArgs, Model, ShapeArgs,
};
use crate::progress::Bar;
use crate::report::{print_json, UsageError};
use quiver_io::size::{format_byte_amount, format_bytes};

use crate::units::seconds;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let json = cli.global.json;
    // The commands whose engines stop when their progress says so, and
    // remove what they made: Ctrl-C stops them cleanly (`kv bench` too,
    // which says so itself when its nodes run in this process). The rest
    // (kv's servers, migrations and local tcp benchmarks, whose spawned
    // nodes die with the driver and which write no file; meta's servers
    // and queries; verbs) end on Ctrl-C as any program does.
    if matches!(
        cli.command,
        Command::Generate(_)
            | Command::Convert(_)
            | Command::Export(_)
            | Command::Walk { .. }
            | Command::Bsp { .. }
            | Command::Gtl { .. }
            | Command::Demo(_)
            | Command::Meta {
                command: crate::meta::MetaCommand::Load(_) | crate::meta::MetaCommand::Bench(_)
            }
    ) {
        crate::progress::catch_interrupts()?;
    }
    match cli.command {
        Command::Generate(args) => generate(args.model, json),
        Command::Convert(args) => convert(args, json),
        Command::Export(args) => export(args, json),
        Command::Info(args) => info(&args, json),
        Command::Demo(args) => crate::demo::demo(&args, json),
        Command::Verbs { task } => crate::verbs::verbs(task, json),
        Command::Node => Ok(quiver_verbs::job::serve(crate::TASKS)?),
        Command::Walk { app } => crate::walk::walk(app, json, !std::io::stderr().is_terminal()),
        Command::Gtl { command } => {
            crate::gtl::gtl(command, json, !std::io::stderr().is_terminal())
        }
        Command::Kv { command } => crate::kv::kv(command, json, !std::io::stderr().is_terminal()),
        Command::Meta { command } => {
            crate::meta::meta(command, json, !std::io::stderr().is_terminal())
        }
        Command::Bsp { algorithm } => {
            crate::bsp::bsp(algorithm, json, !std::io::stderr().is_terminal())
        }
    }
}

/// Whether `err` is a write to a pipe whose reader has gone.
fn is_broken_pipe(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The progress bar of a command: hidden with `--json` or when stderr is
/// not a terminal.
pub(crate) fn bar(json: bool) -> Bar {
    Bar::new(json || !std::io::stderr().is_terminal())
}

fn sort_options(shape: &ShapeArgs, relabel: bool) -> SortOptions {
    SortOptions {
        mem_budget: shape.mem,
        work_dir: shape.work_dir.clone(),
        undirected: shape.undirected,
        dedupe: shape.dedupe,
        drop_self_loops: shape.drop_self_loops,
        relabel,
        ..SortOptions::default()
    }
}

/// Refuses, before a single edge is drawn, a graph whose sort runs would
/// pass 10 times `--mem` (a usage error), or whose file and runs would
/// not fit the free space of their filesystems, as `available` tells it.
fn check_room(
    spec: &GraphSpec,
    weighted: bool,
    sort: &SortOptions,
    output: &Path,
    available: &dyn Fn(&Path) -> std::io::Result<u64>,
) -> Result<()> {
    let needs = spec.disk_needs(weighted, sort)?;
    let graph = format!(
        "{spec} is {} edges, a {} graph",
        needs.edges,
        format_bytes(needs.graph_bytes)
    );
    if needs.spill_bytes > sort.mem_budget.saturating_mul(10) {
        // A --mem that parses, in whole MiB.
        let enough = needs.spill_bytes.div_ceil(10).div_ceil(1 << 20) << 20;
        anyhow::bail!(UsageError(format!(
            "{graph}, sorted through {} of runs: more than 10 times --mem {}; give --mem {} or more, or fewer edges",
            format_bytes(needs.spill_bytes),
            crate::units::ByteSize(sort.mem_budget),
            crate::units::ByteSize(enough)
        )));
    }
    // A device or FIFO output streams past the disk; a new path or
    // regular file is written beside its name, the runs in the work
    // directory.
    let streams = std::fs::metadata(output).is_ok_and(|m| !m.is_file());
    let beside = match output.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let work = sort.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut wanted: Vec<(PathBuf, u64)> = Vec::new();
    if !streams {
        wanted.push((beside, needs.graph_bytes));
    }
    if needs.spill_bytes > 0 {
        wanted.push((work, needs.spill_bytes));
    }
    // Paths on one filesystem share its room; a path that cannot be
    // looked at is left to the write, which names its error.
    let mut filesystems: Vec<(u64, PathBuf, u64)> = Vec::new();
    for (dir, bytes) in wanted {
        let Ok(meta) = std::fs::metadata(&dir) else {
            continue;
        };
        let dev = std::os::unix::fs::MetadataExt::dev(&meta);
        match filesystems.iter_mut().find(|(d, _, _)| *d == dev) {
            Some((_, _, total)) => *total += bytes,
            None => filesystems.push((dev, dir, bytes)),
        }
    }
    for (_, dir, bytes) in filesystems {
        let Ok(free) = available(&dir) else {
            continue;
        };
        if bytes > free {
            anyhow::bail!(
                "{graph}, with {} of sort runs: {} on the filesystem of {}, which has {} free",
                format_bytes(needs.spill_bytes),
                format_bytes(bytes),
                dir.display(),
                format_bytes(free)
            );
        }
    }
    Ok(())
}

fn generate(model: Model, json: bool) -> Result<()> {
    let (spec, common): (GraphSpec, GenerateCommon) = match model {
        Model::Rmat {
            scale,
            edge_factor,
            a,
            b,
            c,
            no_permute,
            common,
        } => (
            GraphSpec::Rmat {
                scale,
                edge_factor,
                probabilities: (a, b, c),
                permute: !no_permute,
            },
            common,
        ),
        Model::Er {
            vertices,
            edges,
            common,
        } => (GraphSpec::ErdosRenyi { vertices, edges }, common),
        Model::Path { vertices, common } => (GraphSpec::Path(vertices), common),
        Model::Cycle { vertices, common } => (GraphSpec::Cycle(vertices), common),
        Model::Star { vertices, common } => (GraphSpec::Star(vertices), common),
        Model::Grid { rows, cols, common } => (GraphSpec::Grid(rows, cols), common),
        Model::Complete { vertices, common } => (GraphSpec::Complete(vertices), common),
    };
    let options = sort_options(&common.shape, false);
    check_room(
        &spec,
        common.weights.is_some(),
        &options,
        &common.output,
        &quiver_io::available_bytes,
    )?;
    let report = quiver_csr::generate_to_file(
        &spec,
        common.seed,
        common.weights,
        &options,
        &common.output,
        &bar(json),
    )
    .with_context(|| format!("generating {}", common.output.display()))?;
    if json {
        return print_json(&report);
    }
    println!(
        "wrote {}: {} vertices, {} edges ({}, seed {}) in {:.2} s",
        report.output.display(),
        report.vertices,
        report.edges,
        spec,
        report.seed,
        seconds(report.wall_ns)
    );
    if !report.distinct_targets {
        println!("note       it holds parallel edges (an edge drawn more than once); --dedupe keeps one of each");
    }
    Ok(())
}

fn convert(args: ConvertArgs, json: bool) -> Result<()> {
    if args.weighted
        && args
            .format
            .unwrap_or_else(|| EdgeFormat::from_path(&args.input))
            != EdgeFormat::Bin
    {
        return Err(UsageError("--weighted describes binary input; text and Matrix Market files say whether they carry weights".into()).into());
    }
    let output = match args.output {
        Some(output) => output,
        None if args.input == Path::new("-") => {
            return Err(UsageError("reading standard input needs -o OUTPUT".into()).into())
        }
        None => default_output(&args.input),
    };
    let options = ConvertOptions {
        format: args.format,
        weighted_binary: args.weighted,
        ignore_weights: args.ignore_weights,
        min_vertices: args.vertices,
        sort: SortOptions {
            keep_directed: args.directed,
            ..sort_options(&args.shape, args.relabel)
        },
    };
    let report =
        quiver_csr::convert(&args.input, &output, &options, &bar(json)).with_context(|| {
            format!(
                "converting {} into {}",
                args.input.display(),
                output.display()
            )
        })?;
    if json {
        return print_json(&report);
    }
    let r = &report;
    println!(
        "converted {} ({}, {}) into {}: {} vertices, {} edges{}",
        r.input.display(),
        r.format,
        format_bytes(r.input_bytes),
        r.output.display(),
        r.vertices,
        r.edges,
        if r.weighted { ", weighted" } else { "" },
    );
    println!(
        "  {:.2} s, {:.1} MB/s of input; {} edges parsed, {} self-loops and {} duplicates dropped",
        seconds(r.wall_ns),
        r.input_mb_per_s,
        r.edges_parsed,
        r.sort.self_loops_dropped,
        r.sort.duplicates_dropped
    );
    println!(
        "  {} sorted runs spilled ({}), {} merge passes; peak memory {}",
        r.sort.runs_spilled,
        format_bytes(r.sort.spill_bytes),
        r.sort.merge_passes,
        r.peak_mem_bytes.map_or("unknown".into(), format_bytes)
    );
    if r.sort.symmetric {
        println!("  every edge has its reverse: stored undirected (--directed keeps it directed)");
    }
    Ok(())
}

/// `input` beside itself with `.qcsr` for its extension (and `.gz`).
fn default_output(input: &Path) -> PathBuf {
    let plain = match input.extension() {
        Some(ext) if ext.eq_ignore_ascii_case("gz") => input.with_extension(""),
        _ => input.to_owned(),
    };
    plain.with_extension("qcsr")
}

fn export(args: ExportArgs, json: bool) -> Result<()> {
    let graph = open_graph(&args.graph)?;
    let format = args
        .format
        .unwrap_or_else(|| EdgeFormat::from_path(&args.output));
    let options = ExportOptions {
        format,
        each_edge_once: args.each_edge_once,
    };
    if let Some(why) = quiver_csr::export_refusal(&graph, options) {
        return Err(UsageError(format!("{}: {why}", args.graph.display())).into());
    }
    let report = match quiver_csr::export_file(&graph, &args.output, options) {
        Ok(report) => report,
        // A reader that stopped early (`| head`): done, as Unix tools are.
        Err(err) if args.output == Path::new("-") && is_broken_pipe(&err) => return Ok(()),
        Err(err) => return Err(err).with_context(|| format!("exporting {}", args.graph.display())),
    };
    if json {
        return print_json(&report);
    }
    if report.output != Path::new("-") {
        println!(
            "wrote {} edges of {} to {} ({}, {})",
            report.edges,
            args.graph.display(),
            report.output.display(),
            report.format,
            format_bytes(report.bytes)
        );
    }
    Ok(())
}

fn open_graph(path: &Path) -> Result<Graph> {
    Graph::open(path).with_context(|| format!("opening graph {}", path.display()))
}

fn info(args: &InfoArgs, json: bool) -> Result<()> {
    let graph = open_graph(&args.graph)?;
    let options = InfoOptions {
        verify: args.verify,
        blocks: match (args.block_size, args.chunks) {
            (Some(size), _) => Some(BlockRule::Bytes(size)),
            (None, Some(chunks)) => Some(BlockRule::Balanced {
                chunks,
                alpha: args.alpha,
            }),
            (None, None) => None,
        },
        list_blocks: args.list_blocks,
    };
    let report = quiver_csr::info(&graph, &options)
        .with_context(|| format!("inspecting {}", args.graph.display()))?;
    if json {
        return print_json(&report);
    }
    let d = &report.degrees;
    println!(
        "graph      {} ({})",
        args.graph.display(),
        format_bytes(report.file_bytes)
    );
    println!("vertices   {}", report.vertices);
    println!(
        "edges      {} ({}{}{})",
        report.edges,
        match (report.undirected, report.symmetric) {
            (true, _) => "undirected, both directions stored",
            (false, true) =>
                "directed, yet every edge has its reverse: convert stores such input undirected",
            (false, false) => "directed",
        },
        if report.weighted { ", weighted" } else { "" },
        if report.distinct_targets {
            ", no parallel edges"
        } else {
            ""
        }
    );
    match graph.original_ids() {
        Some(ids) => println!(
            "ids        original ids from the input (id map), {} to {}",
            ids.iter().min().unwrap_or(&0),
            ids.iter().max().unwrap_or(&0)
        ),
        None => println!("ids        0..{} (no id map)", report.vertices),
    }
    println!(
        "out-degree min {}, median {}, mean {:.2}, p99 {}, max {}; {} vertices with none",
        d.min, d.median, d.mean, d.p99, d.max, d.zero_out_degree
    );
    if let Some(b) = &report.blocks {
        println!("blocks     {} ({})", b.count, b.rule);
        for (name, s) in [("vertices", &b.vertices), ("edges", &b.edges)] {
            println!(
                "  {name:<9} min {}, mean {:.1}, max {}",
                s.min, s.mean, s.max
            );
        }
        let e = &b.extent_bytes;
        println!(
            "  {:<9} min {}, mean {}, max {} (aligned reads)",
            "bytes",
            format_bytes(e.min),
            format_byte_amount(e.mean),
            format_bytes(e.max)
        );
        for block in b.list.iter().flatten() {
            println!(
                "  block {:>5}: vertices {:>10}..{:<10} edges {:>12}..{:<12} {}",
                block.id.0,
                block.vertices.start,
                block.vertices.end,
                block.edges.start,
                block.edges.end,
                format_bytes(block.extent_bytes())
            );
        }
    }
    if report.verified {
        println!("verified   checksums and targets (at open), distinct targets and finite weights");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use quiver_csr::{GraphSpec, SortOptions};

    use super::{check_room, UsageError};

    #[test]
    fn a_graph_past_the_free_disk_or_ten_times_mem_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let output = dir.path().join("g.qcsr");
        let sort = SortOptions {
            work_dir: Some(dir.path().to_path_buf()),
            ..SortOptions::default()
        };
        let plenty = |_: &Path| Ok(1 << 50);
        // 10^10 edges: 74.5 GiB of runs for a 1 GiB budget.
        let complete = GraphSpec::Complete(100_000);
        let err = check_room(&complete, false, &sort, &output, &plenty).unwrap_err();
        assert!(err.downcast_ref::<UsageError>().is_some(), "{err:#}");
        assert_eq!(
            err.to_string(),
            "the complete graph on 100000 vertices is 9999900000 edges, a 37.3 GiB graph, \
             sorted through 74.5 GiB of runs: more than 10 times --mem 1GiB; give --mem 7630MiB \
             or more, or fewer edges"
        );
        // 10^9 edges: 3.7 GiB of file and 7.5 GiB of runs, one filesystem.
        let er = GraphSpec::ErdosRenyi {
            vertices: 1000,
            edges: 1_000_000_000,
        };
        let ten_gib = |_: &Path| Ok(10 << 30);
        let err = check_room(&er, false, &sort, &output, &ten_gib).unwrap_err();
        assert!(err.downcast_ref::<UsageError>().is_none(), "{err:#}");
        assert!(
            err.to_string().ends_with(&format!(
                "with 7.5 GiB of sort runs: 11.2 GiB on the filesystem of {}, which has 10.0 GiB free",
                dir.path().display()
            )),
            "{err:#}"
        );
        assert!(check_room(&er, false, &sort, &output, &plenty).is_ok());
        // A small graph needs no runs, and a device output no room.
        let small = GraphSpec::Grid(10, 10);
        let none = |_: &Path| Ok(0);
        let err = check_room(&small, false, &sort, &output, &none).unwrap_err();
        assert!(err.to_string().contains("which has 0 B free"), "{err:#}");
        assert!(check_room(&small, false, &sort, Path::new("/dev/null"), &none).is_ok());
    }
}
