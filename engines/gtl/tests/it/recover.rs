//! Power cuts at every NAND program: a seeded stream of updates (both
//! paths) and merges runs on a fresh device with power cut after program
//! `k`, for every `k` up to the stream's end (and at a random program of
//! random streams); after recovery every
//! update the host saw acknowledged is there, nothing half-applied is
//! visible (the graph is the state after the acknowledged batches, or
//! after the one that was cut short), and the device works on.

use proptest::prelude::*;
use quiver_csr::testing::build;
use quiver_csr::Graph;
use quiver_gtl::{Config, Error, Ssd, Update, UpdatePath};
use quiver_run::NoProgress;

use crate::small_config;
use crate::update::{arb_steps, gc_config, long_stream, resolve, Model, Raw, Step};

/// A weighted graph of 30 vertices with a dense vertex (0) whose list
/// spans pages, and isolated vertices; undirected or directed (then its
/// in-lists are pages of their own).
fn graph(undirected: bool) -> Graph {
    let mut edges: Vec<(u32, u32, f32)> = (1..20).map(|t| (0, t, t as f32)).collect();
    edges.extend((1..24).map(|v| (v, (v * 7) % 24, 0.5)));
    build(30, edges, true, undirected)
}

/// The stream: batches of a few commands (all six kinds), alternately by
/// each path, and merges, drawn from a fixed pattern.
fn stream() -> Vec<Step> {
    (0u32..36)
        .map(|i| match i % 9 {
            8 => Step::Merge(if i % 2 == 0 { None } else { Some(1) }),
            r => Step::Batch(
                vec![
                    Raw::Add(i * 13, i * 7 + 1, 16 + u16::try_from(i).unwrap()),
                    match r % 4 {
                        0 => Raw::AddVertex(vec![(i, 9), (0, 3)]),
                        1 => Raw::Delete(i * 5, i, true),
                        2 => Raw::UpdateVertex(i * 11, vec![(i, 5), (i + 2, 6)]),
                        _ => Raw::DeleteVertex(i * 3 + 1),
                    },
                    Raw::Reweight(i * 3, i, 40),
                ],
                r % 2 == 0,
            ),
        })
        .collect()
}

/// Out-lists, and a directed graph's in-lists, of (vertex, weight).
type Lists = (Vec<Vec<(u32, f32)>>, Option<Vec<Vec<(u32, f32)>>>);

/// Every list (with weights) the device holds now, and on a directed
/// graph every in-list.
fn lists(ssd: &mut Ssd) -> Lists {
    let n = ssd.gtl().unwrap().vertices();
    let pairs = |list: quiver_gtl::delta::Adjacency| -> Vec<(u32, f32)> {
        list.targets.into_iter().zip(list.weights).collect()
    };
    let outs = (0..n)
        .map(|v| pairs(ssd.read_list(v).unwrap().value))
        .collect();
    let ins = (!ssd.gtl().unwrap().undirected()).then(|| {
        (0..n)
            .map(|v| pairs(ssd.read_in_list(v).unwrap().value))
            .collect()
    });
    (outs, ins)
}

/// What `model` says [`lists`] should return.
fn want(model: &Model) -> Lists {
    (model.lists.clone(), model.ins.clone())
}

/// What running a stream did.
struct Run {
    /// The device, after the stream or frozen by the cut.
    ssd: Ssd,
    /// The models after each acknowledged step (the first is the loaded
    /// graph), with the model of the step cut short last.
    models: Vec<Model>,
    /// The programs made during steps in which GC ran.
    gc_programs: Vec<u64>,
}

/// Runs `steps` on a device of `config` that loses power after program
/// `cut`.
fn run_until_cut(graph: &Graph, steps: &[Step], config: &Config, cut: Option<u64>) -> Run {
    let mut ssd = Ssd::new(config).unwrap();
    if let Some(k) = cut {
        ssd.cut_power_after(k);
    }
    let mut models = Vec::new();
    let mut gc_programs = Vec::new();
    if matches!(
        ssd.graph_initialize(graph, &NoProgress),
        Err(Error::PowerCut { .. })
    ) {
        return Run {
            ssd,
            models,
            gc_programs,
        };
    }
    let mut model = Model::of(graph);
    models.push(model.clone());
    for step in steps {
        let before = (ssd.flash().counters().programs, gc_runs(&ssd));
        let result = match step {
            Step::Batch(raws, delta) => {
                let mut updates: Vec<Update> = Vec::new();
                for raw in raws {
                    let update = resolve(raw, &model);
                    model.apply(&update);
                    updates.push(update);
                }
                let path = if *delta {
                    UpdatePath::Delta
                } else {
                    UpdatePath::Direct
                };
                ssd.update(&updates, path).map(drop)
            }
            Step::Merge(limit) => ssd.merge(*limit).map(drop),
        };
        models.push(model.clone());
        if gc_runs(&ssd) > before.1 {
            gc_programs.extend(before.0 + 1..=ssd.flash().counters().programs);
        }
        match result {
            Ok(()) => {}
            Err(Error::PowerCut { .. }) => break,
            Err(e) => panic!("{e}"),
        }
    }
    Run {
        ssd,
        models,
        gc_programs,
    }
}

fn gc_runs(ssd: &Ssd) -> u64 {
    ssd.gtl().map_or(0, |g| g.counters().gc_runs)
}

#[test]
fn after_a_cut_at_any_program_the_graph_is_before_or_after_the_cut_update() {
    cut_everywhere(&graph(true));
}

#[test]
fn a_directed_graph_keeps_its_in_lists_in_step_through_every_cut() {
    cut_everywhere(&graph(false));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A cut anywhere inside a random stream (the update model tests'
    /// streams: batches of every command by either path, and merges)
    /// recovers the acknowledged state or the one cut short, on an
    /// undirected or a directed graph.
    #[test]
    fn a_cut_inside_a_random_stream_recovers_a_whole_state(
        steps in arb_steps(),
        at in 0.0..=1.0f64,
        undirected in any::<bool>(),
    ) {
        let graph = graph(undirected);
        let config = small_config();
        let whole = run_until_cut(&graph, &steps, &config, None);
        let programs = whole.ssd.flash().counters().programs;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
        let cut = (programs as f64 * at) as u64;
        check_cut(&graph, &steps, &config, cut, programs);
    }
}

fn cut_everywhere(graph: &Graph) {
    let steps = stream();
    let config = small_config();
    let whole = run_until_cut(graph, &steps, &config, None);
    let programs = whole.ssd.flash().counters().programs;
    assert_eq!(whole.models.len(), steps.len() + 1);
    let mut outcomes = [0usize; 3];
    for cut in 0..=programs {
        outcomes[check_cut(graph, &steps, &config, cut, programs)] += 1;
    }
    // Cuts land before the graph, on acknowledged states and inside updates.
    assert!(
        outcomes.iter().all(|&n| n > 0),
        "{outcomes:?} of {programs} cuts"
    );
}

/// Runs `steps` with power cut after program `cut` (of `programs` in the
/// whole run), recovers, and checks that the graph is the acknowledged
/// state or the one cut short and that the device works on; returns which
/// (0: GraphInitialize was cut, 1: acknowledged, 2: cut short).
fn check_cut(graph: &Graph, steps: &[Step], config: &Config, cut: u64, programs: u64) -> usize {
    let Run {
        mut ssd, models, ..
    } = run_until_cut(graph, steps, config, Some(cut));
    ssd.power_cycle().unwrap();
    let Some(gtl) = ssd.gtl() else {
        assert!(
            models.is_empty(),
            "cut {cut}: GraphInitialize was acknowledged"
        );
        return 0;
    };
    gtl.check_structure(ssd.flash());
    let got = lists(&mut ssd);
    // models: the acknowledged states, then the one cut short (if any).
    let acked = if cut < programs {
        &models[models.len() - 2]
    } else {
        &models[models.len() - 1]
    };
    let cut_short = &models[models.len() - 1];
    let outcome = if got == want(acked) {
        1
    } else {
        assert_eq!(
            got,
            want(cut_short),
            "cut {cut}: neither the acknowledged state nor the next"
        );
        2
    };
    // The recovered device works on. An update acknowledged after the
    // recovery survives a second power cycle before any merge (so the
    // pages of a unit the cut tore must not come back).
    let mut model = if outcome == 1 { acked } else { cut_short }.clone();
    let more = Update::AddVertex {
        edges: vec![(0, 1.0), (1, 2.0)],
    };
    model.apply(&more);
    ssd.update(&[more], UpdatePath::Delta).unwrap();
    ssd.power_cycle().unwrap();
    ssd.gtl().unwrap().check_structure(ssd.flash());
    assert_eq!(
        lists(&mut ssd),
        want(&model),
        "cut {cut}: after a second power cycle"
    );
    let direct = Update::AddEdge {
        source: 2,
        target: 3,
        weight: 4.0,
    };
    model.apply(&direct);
    ssd.update(&[direct], UpdatePath::Direct).unwrap();
    ssd.merge(None).unwrap();
    ssd.gtl().unwrap().check_structure(ssd.flash());
    assert_eq!(
        lists(&mut ssd),
        want(&model),
        "cut {cut}: after recovery and more"
    );
    outcome
}

/// Power cut inside garbage collection: [`long_stream`] on a device small
/// enough that GC moves pages still in use, cut at programs of the steps
/// in which GC ran; after recovery the graph is the acknowledged
/// state or the one cut short, and the device works on.
#[test]
fn a_cut_inside_garbage_collection_recovers_a_whole_state() {
    let graph = graph(true);
    let steps = long_stream();
    // The weighted graph's weight pages need two more graph blocks a die
    // than the GC tests' unweighted karate.
    let config = Config {
        ftl_blocks_per_die: gc_config(true).ftl_blocks_per_die - 2,
        ..small_config()
    };
    let whole = run_until_cut(&graph, &steps, &config, None);
    let programs = whole.ssd.flash().counters().programs;
    let relocated = whole.ssd.gtl().unwrap().counters().relocated;
    assert!(
        relocated > 0 && whole.gc_programs.len() > 100,
        "GC moved {relocated} pages in use, in steps of {} programs",
        whole.gc_programs.len()
    );
    // Every fifth of those programs (cutting at all of them took 22-23 s
    // in a debug build here).
    let mut outcomes = [0usize; 3];
    for &cut in whole.gc_programs.iter().step_by(5) {
        outcomes[check_cut(&graph, &steps, &config, cut, programs)] += 1;
    }
    assert!(outcomes[1] > 0 && outcomes[2] > 0, "{outcomes:?}");
}
