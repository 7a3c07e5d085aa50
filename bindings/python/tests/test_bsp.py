"""The Graphalytics algorithms against the benchmark's reference outputs
(fixtures/graphalytics), and their errors."""

import numpy as np
import pytest

import quiver
from conftest import FIXTURES

DATA = FIXTURES / "graphalytics"


def properties(name):
    props = {}
    for line in open(DATA / f"{name}.properties"):
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            props[key.strip().removeprefix(f"graph.{name}.")] = value.strip()
    return props


def reference(name, algorithm):
    """The reference output as {original id: value}."""
    out = {}
    for line in open(DATA / f"{name}-{algorithm}"):
        vertex, value = line.split()
        out[int(vertex)] = float(value) if algorithm in ("PR", "SSSP", "LCC") else int(value)
    return out


@pytest.mark.parametrize("name", ["example-directed", "example-undirected"])
@pytest.mark.parametrize("algorithm", ["BFS", "PR", "WCC", "SSSP", "CDLP", "LCC"])
def test_results_match_the_reference_outputs(name, algorithm):
    g = quiver.convert(DATA / f"{name}.e")
    ids = g.original_ids
    props = properties(name)

    # Sources and labels by the dataset's own ids, as the reference names them.
    if algorithm == "BFS":
        values = quiver.bsp.bfs(g, int(props["bfs.source-vertex"]))
    elif algorithm == "PR":
        values = quiver.bsp.pagerank(
            g,
            iterations=int(props["pr.num-iterations"]),
            damping=float(props["pr.damping-factor"]),
        )
    elif algorithm == "WCC":
        values = quiver.bsp.wcc(g)
    elif algorithm == "SSSP":
        values = quiver.bsp.sssp(g, int(props["sssp.source-vertex"]))
    elif algorithm == "CDLP":
        values = quiver.bsp.cdlp(g, iterations=int(props["cdlp.max-iterations"]))
    else:
        values = quiver.bsp.lcc(g)
    assert len(values) == len(g)
    expected = reference(name, algorithm)
    got = {int(i): v for i, v in zip(ids, values)}
    assert got.keys() == expected.keys()
    for vertex, want in expected.items():
        if isinstance(want, float):
            # Weights are f32s: distances agree to their precision.
            assert got[vertex] == pytest.approx(want, rel=1e-6, abs=1e-12), vertex
        else:
            assert got[vertex] == want, vertex


def test_bfs_marks_unreached_vertices():
    g = quiver.Graph.from_edges([0, 1], [1, 2], num_vertices=4)
    depths = quiver.bsp.bfs(g, 0)
    assert depths.dtype == np.uint64
    assert list(depths) == [0, 1, 2, quiver.bsp.UNREACHED]


def test_results_do_not_depend_on_threads(karate):
    one = quiver.bsp.wcc(karate, threads=1)
    assert np.array_equal(one, quiver.bsp.wcc(karate, threads=3))
    assert np.allclose(quiver.bsp.pagerank(karate, threads=1), quiver.bsp.pagerank(karate, threads=3))
    ranks = quiver.bsp.pagerank(karate)
    # Contributions are held as f32 (2^-24 relative), so the mass is 1 to
    # about 1e-8.
    assert abs(ranks.sum() - 1) < 1e-6 and ranks.argmax() == 33


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda g: quiver.bsp.bfs(g, 34), "source"),
        (lambda g: quiver.bsp.bfs(g, -1), "source"),
        (lambda g: quiver.bsp.sssp(g, 0), "weights"),
        (lambda g: quiver.bsp.pagerank(g, iterations=0), "iterations"),
        (lambda g: quiver.bsp.pagerank(g, damping=1.5), "damping"),
        (lambda g: quiver.bsp.cdlp(g, iterations=0), "iterations"),
    ],
)
def test_bad_arguments_are_value_errors(karate, call, message):
    with pytest.raises(ValueError, match=message):
        call(karate)
