//! Power cuts at every NAND program: a seeded stream of updates (both
//! paths) and merges runs on a fresh device with power cut after program
//! `k`, for every `k` up to the stream's end; after recovery every
//! update the host saw acknowledged is there, nothing half-applied is
//! visible (the graph is the state after the acknowledged batches, or
//! after the one that was cut short), and the device works on.

use quiver_csr::testing::build;
use quiver_csr::Graph;
use quiver_gtl::{Error, Ssd, Update, UpdatePath};

use crate::small_config;
use crate::update::{resolve, Model, Raw, Step};

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

/// Runs the stream on a device that loses power after program `cut`;
/// returns the device and the models after each acknowledged step (the
/// first is the loaded graph), with the model of the step cut short last.
fn run_until_cut(graph: &Graph, steps: &[Step], cut: Option<u64>) -> (Ssd, Vec<Model>) {
    let mut ssd = Ssd::new(&small_config()).unwrap();
    if let Some(k) = cut {
        ssd.cut_power_after(k);
    }
    let mut models = Vec::new();
    if matches!(ssd.graph_initialize(graph), Err(Error::PowerCut { .. })) {
        return (ssd, models);
    }
    let mut model = Model::of(graph);
    models.push(model.clone());
    for step in steps {
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
        match result {
            Ok(()) => {}
            Err(Error::PowerCut { .. }) => return (ssd, models),
            Err(e) => panic!("{e}"),
        }
    }
    (ssd, models)
}

#[test]
fn after_a_cut_at_any_program_the_graph_is_before_or_after_the_cut_update() {
    cut_everywhere(&graph(true));
}

#[test]
fn a_directed_graph_keeps_its_in_lists_in_step_through_every_cut() {
    cut_everywhere(&graph(false));
}

fn cut_everywhere(graph: &Graph) {
    let steps = stream();
    let (whole, models) = run_until_cut(graph, &steps, None);
    let programs = whole.flash().counters().programs;
    assert_eq!(models.len(), steps.len() + 1);
    let mut outcomes = [0usize; 3];
    for cut in 0..=programs {
        let (mut ssd, models) = run_until_cut(graph, &steps, Some(cut));
        ssd.power_cycle().unwrap();
        let Some(gtl) = ssd.gtl() else {
            assert!(
                models.is_empty(),
                "cut {cut}: GraphInitialize was acknowledged"
            );
            outcomes[0] += 1;
            continue;
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
        if got == want(acked) {
            outcomes[1] += 1;
        } else {
            assert_eq!(
                got,
                want(cut_short),
                "cut {cut}: neither the acknowledged state nor the next"
            );
            outcomes[2] += 1;
        }
        // The recovered device works on. An update acknowledged after the
        // recovery survives a second power cycle before any merge (so the
        // pages of a unit the cut tore must not come back).
        let mut model = cut_short.clone();
        if got == want(acked) {
            model = acked.clone();
        }
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
    }
    // Cuts land before the graph, on acknowledged states and inside updates.
    assert!(
        outcomes.iter().all(|&n| n > 0),
        "{outcomes:?} of {programs} cuts"
    );
}
