"""On a graph with an id map (the Graphalytics example, ids 1..=10 at
indexes 0..=9), every function that takes or returns vertices names them
by the dataset's ids, and by index with ``dense=True``; a graph without a
map is unchanged. Vertex 3's out-neighbours are 1, 5, 8 and 10
(example-directed.e), where index 3 (the dataset's vertex 4) has none."""

import numpy as np
import pytest

import quiver
from conftest import FIXTURES

EDGES = FIXTURES / "graphalytics" / "example-directed.e"


def dataset_neighbours(vertex):
    """Out-neighbours of `vertex` as the edge file lists them, sorted."""
    out = []
    for line in open(EDGES):
        src, dst = map(int, line.split()[:2])
        if src == vertex:
            out.append(dst)
    return sorted(out)


@pytest.fixture(scope="module")
def example():
    return quiver.convert(EDGES)


def index(g, original):
    return int(np.searchsorted(g.original_ids, original))


def test_lists_take_and_give_the_datasets_ids(example):
    g = example
    want = dataset_neighbours(3)
    assert want == [1, 5, 8, 10]
    assert g.degree(3) == 4 and g.degree(4) == 0
    got = g.neighbors(3)
    assert got.dtype == np.uint64 and sorted(got) == want
    assert len(g.edge_weights(3)) == 4
    # dense=True: indexes in, the view of targets out.
    assert g.degree(index(g, 3), dense=True) == 4
    view = g.neighbors(index(g, 3), dense=True)
    assert view.dtype == np.uint32 and np.shares_memory(view, g.targets)
    assert sorted(g.original_ids[view]) == want
    for call in (lambda: g.degree(0), lambda: g.neighbors(11), lambda: g.edge_weights(-1)):
        with pytest.raises(ValueError, match="dense=True takes an index"):
            call()
    with pytest.raises(ValueError, match=r"\|V\| = 10"):
        g.degree(10, dense=True)
    with pytest.raises(ValueError, match="vertex 18446744073709551616 is not in the graph"):
        g.degree(2**64)
    with pytest.raises(TypeError, match="v: a vertex is an int, not float"):
        g.degree(1.5)


def test_walks_name_the_datasets_vertices(example):
    g = example
    walks = g.walks(walks_per_vertex=3, length=4, seed=1)
    assert walks.dtype == np.uint64 and walks.shape == (30, 5)
    assert np.array_equal(walks[:, 0], np.repeat(g.original_ids, 3))
    steps = walks[walks != quiver.NO_ID]
    assert set(steps.tolist()) <= set(range(1, 11))
    # Every step follows an edge of the dataset.
    for row in walks:
        row = row[row != quiver.NO_ID]
        for u, v in zip(row, row[1:]):
            assert int(v) in dataset_neighbours(int(u)), (u, v)
    dense = g.walks(walks_per_vertex=3, length=4, seed=1, dense=True)
    assert dense.dtype == np.uint32
    pad = dense == quiver.NO_VERTEX
    assert np.array_equal(pad, walks == quiver.NO_ID)
    assert np.array_equal(g.original_ids[dense[~pad]], walks[~pad])
    assert quiver.NO_ID == 2**64 - 1


def test_walk_apps_take_a_source_by_its_id(example):
    g = example
    # One step from 3: visits 3 and its out-neighbours only.
    shares = g.ppr(3, walks=400, length=1, stop=0.0, seed=1)
    visited = sorted(g.original_ids[np.nonzero(shares)[0]].tolist())
    assert visited == sorted([3] + dataset_neighbours(3))
    same = g.ppr(index(g, 3), walks=400, length=1, stop=0.0, seed=1, dense=True)
    assert np.array_equal(shares, same)
    assert g.rwr(10, walks=10, length=2)[index(g, 10)] > 0
    assert 0.0 <= g.simrank(1, 3, walks=10) <= 1.0
    with pytest.raises(ValueError, match="source"):
        g.ppr(0)
    with pytest.raises(ValueError, match="b: vertex 11"):
        g.simrank(1, 11)


def test_bsp_takes_sources_and_gives_labels_by_id(example):
    g = example
    depths = quiver.bsp.bfs(g, 3)
    first = sorted(g.original_ids[depths == 1].tolist())
    assert first == dataset_neighbours(3)
    assert np.array_equal(depths, quiver.bsp.bfs(g, index(g, 3), dense=True))
    labels = quiver.bsp.wcc(g)
    assert labels.dtype == np.uint64 and set(labels.tolist()) <= set(range(1, 11))
    dense = quiver.bsp.wcc(g, dense=True)
    assert dense.dtype == np.uint32 and np.array_equal(g.original_ids[dense], labels)
    assert np.array_equal(g.original_ids[quiver.bsp.cdlp(g, dense=True)], quiver.bsp.cdlp(g))
    with pytest.raises(ValueError, match="source"):
        quiver.bsp.sssp(g, 0)


def test_a_graph_without_a_map_names_vertices_by_index(karate, karate_adj):
    assert karate.original_ids is None
    for dense in (False, True):
        assert list(karate.neighbors(33, dense=dense)) == sorted(karate_adj[33])
        assert karate.degree(33, dense=dense) == 17
    walks = karate.walks(walks_per_vertex=1, length=2, seed=1)
    assert walks.dtype == np.uint32
    assert quiver.bsp.wcc(karate).dtype == np.uint32
