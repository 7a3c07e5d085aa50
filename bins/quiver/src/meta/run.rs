//! `quiver meta ...` run: each command calls the library and prints what
//! it reports (a human summary, or `--json`).

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use quiver_csr::Graph;
use quiver_meta::bench::{BenchConfig, Workload};
use quiver_meta::load::graph_writes;
use quiver_meta::{Client, Engine, LocalCluster, Membership, QueryReport, Travel, TravelOptions};
use quiver_verbs::job::Program;

use super::{
    BenchArgs, ClusterCommand, Generator, LoadArgs, MetaCommand, PlacementArgs, QueryArgs,
    ServeArgs, UpArgs,
};
use crate::progress::Bar;
use crate::report::{flag_error, print_json, UsageError};

/// `quiver meta ...` as typed by the user.
pub fn meta(command: MetaCommand, json: bool, quiet: bool) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match command {
        MetaCommand::Serve(args) => runtime.block_on(serve(args)),
        MetaCommand::Cluster {
            command: ClusterCommand::Up(args),
        } => runtime.block_on(up(args)),
        MetaCommand::Load(args) => runtime.block_on(load(args, json, quiet)),
        MetaCommand::Query(args) => runtime.block_on(query(args, json)),
        MetaCommand::Bench(args) => runtime.block_on(bench(args, json, quiet)),
    }
}

async fn connect(path: &Path) -> Result<Client> {
    let cluster = Membership::read(path)?;
    Client::connect(&cluster)
        .await
        .with_context(|| format!("connecting to the cluster {}", path.display()))
}

async fn serve(args: ServeArgs) -> Result<()> {
    let listen = args.listen.to_string();
    let (cluster, index) = Membership::of_server(args.cluster.as_deref(), &args.data, &listen)?;
    let servers = cluster.servers.len();
    let config = args
        .placement
        .server_config(cluster, index, args.data.clone())?;
    quiver_meta::cluster::serve(config, args.listen, |addr| {
        eprintln!(
            "quiver meta: server {index} of {servers} serving on {addr} ({}, data in {}); Ctrl-C stops it",
            args.placement.partitioner.name(),
            args.data.display()
        );
    })
    .await?;
    eprintln!("quiver meta: server {index} stopped; its store is flushed");
    Ok(())
}

/// Starts `n` servers under `dir` as children of this process (`quiver
/// meta serve`, with `placement`'s flags or the servers' defaults), and
/// connects to them.
pub async fn spawn_local(
    n: usize,
    dir: &Path,
    base_port: u16,
    placement: Option<&PlacementArgs>,
    quiet: bool,
) -> Result<(LocalCluster, Client)> {
    let mut args = vec!["meta".to_owned(), "serve".to_owned()];
    args.extend(placement.map(PlacementArgs::to_args).unwrap_or_default());
    let server = Program::this_executable(args)?;
    LocalCluster::spawn(n, dir, base_port, quiet, &server)
        .await
        .map_err(meta_error)
}

/// A meta error, with a setting the library refused named by its flag.
fn meta_error(e: quiver_meta::Error) -> anyhow::Error {
    match e {
        quiver_meta::Error::Invalid(invalid) => flag_error(invalid),
        e => e.into(),
    }
}

async fn up(args: UpArgs) -> Result<()> {
    let (mut cluster, _) = spawn_local(
        args.servers,
        &args.data,
        args.base_port,
        Some(&args.placement),
        false,
    )
    .await?;
    eprintln!(
        "quiver meta: {} servers up ({}), cluster file {}; Ctrl-C stops them",
        args.servers,
        cluster.addrs().join(", "),
        cluster.file().display()
    );
    println!("{}", cluster.file().display());
    cluster.run_until_signal().await?;
    eprintln!(
        "quiver meta: cluster stopped; data kept in {}",
        args.data.display()
    );
    Ok(())
}

async fn load(args: LoadArgs, json: bool, quiet: bool) -> Result<()> {
    let client = connect(&args.cluster).await?;
    let writes = match (&args.graph, args.generate) {
        (Some(path), _) => {
            let graph = Graph::open(path).with_context(|| format!("opening {}", path.display()))?;
            graph_writes(&graph, &args.vertex_type, &args.relation, args.seed)
        }
        (None, Some(Generator::Darshan)) => {
            quiver_meta::darshan::generate(args.vertices, args.seed)
        }
        (None, None) => bail!(UsageError(
            "name --generate darshan or a graph (GRAPH)".into()
        )),
    };
    let bar = Bar::new(json || quiet);
    let report =
        quiver_meta::load::load(&client, Arc::new(writes), args.clients.config(), &bar).await?;
    drop(bar);
    if json {
        return print_json(&report);
    }
    println!("loaded: {report}");
    println!("everything is visible as of {}", report.ts);
    Ok(())
}

async fn query(args: QueryArgs, json: bool) -> Result<()> {
    let travel = Travel::parse(&args.travel)?;
    let as_of = args
        .as_of
        .as_deref()
        .map(|text| quiver_meta::clock::as_of_from_text(text).map_err(flag_error))
        .transpose()?;
    let client = connect(&args.cluster).await?;
    let options = TravelOptions {
        as_of,
        prefetch: !args.no_prefetch,
        engine: args.engine,
    };
    let report = QueryReport {
        travel: args.travel,
        answer: client.travel(&travel, options).await?.into(),
    };
    if json {
        return print_json(&report);
    }
    let answer = &report.answer;
    println!("as of {}:", answer.as_of);
    for (step, ids) in &answer.marked {
        println!("step {step}: {} vertices", ids.len());
        for id in ids.iter().take(args.limit) {
            println!("  {id}");
        }
        if ids.len() > args.limit {
            println!(
                "  ... {} more (--limit, or --json for all)",
                ids.len() - args.limit
            );
        }
    }
    if travel.paths {
        println!("{} paths", answer.paths.len());
        for p in answer.paths.iter().take(args.limit) {
            println!("  {}", p.join(" -> "));
        }
    }
    for (i, s) in answer.steps.iter().enumerate() {
        // The asynchronous engine runs its steps at once: no step time.
        let time = match options.engine {
            Engine::Sync => format!(", {:.1} ms", s.ns as f64 / 1e6),
            Engine::Async => String::new(),
        };
        println!(
            "  step {i}: {} vertices read, {} edges, StatComm {}, StatReads {}, {} messages ({} B) between servers{time}",
            s.vertices, s.edges, s.stat_comm, s.stat_reads, s.messages, s.bytes,
        );
    }
    println!("  {:.1} ms in all", answer.ns as f64 / 1e6);
    Ok(())
}

async fn bench(args: BenchArgs, json: bool, quiet: bool) -> Result<()> {
    let workload = Workload::from(args.workload);
    let config = BenchConfig {
        vertices: args.vertices,
        files_per_client: args.files_per_client,
        steps: args.steps.clone(),
        degree_samples: args.degree_samples,
        scale: args.scale,
        edge_factor: args.edge_factor,
        load: args.clients.config(),
        seed: args.seed,
    };
    config.validate()?;
    let temp = tempfile::tempdir().context("creating a temporary directory")?;
    let dir = args.data.as_deref().unwrap_or(temp.path());
    let bar = Bar::new(json || quiet);
    let graph = match workload {
        Workload::Traverse | Workload::Degrees => {
            Some(config.write_graph(&temp.path().join("rmat.qcsr"), &bar)?)
        }
        Workload::Insert | Workload::Mdtest => None,
    };
    let report = if args.raw_rocksdb {
        let schema = args.placement.schema()?;
        let rocksdb = dir.join("rocksdb");
        quiver_meta::bench::raw_rocksdb(
            workload,
            &config,
            &schema,
            args.placement.sync,
            &rocksdb,
            &bar,
        )
        .map_err(meta_error)?
    } else {
        // The servers' messages go to server{i}.log beside their data.
        let servers = dir.join("servers");
        let (mut cluster, client) =
            spawn_local(args.servers, &servers, 0, Some(&args.placement), true).await?;
        let report =
            quiver_meta::bench::run(&client, workload, graph.as_ref(), &config, &bar).await?;
        cluster.stop();
        report
    };
    drop(bar);
    if json {
        return print_json(&report);
    }
    print!("{report}");
    Ok(())
}
