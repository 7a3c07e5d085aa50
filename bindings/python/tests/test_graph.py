"""Graphs: opening, building, converting and generating them, their numpy
views, and the exceptions bad input raises."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import quiver
from conftest import FIXTURES


def test_karate_has_the_fixtures_shape(karate, karate_adj):
    assert len(karate) == karate.num_vertices == 34
    assert karate.num_edges == 156
    assert karate.undirected and not karate.weighted
    assert [karate.degree(v) for v in (0, 32, 33)] == [16, 12, 17]
    for v, expected in enumerate(karate_adj):
        assert list(karate.neighbors(v)) == sorted(expected)
    assert np.array_equal(karate.degrees(), np.diff(karate.offsets))
    assert karate.weights is None and karate.original_ids is None


def test_views_are_read_only_arrays_of_the_file(karate):
    offsets, targets = karate.offsets, karate.targets
    assert (offsets.dtype, targets.dtype) == (np.uint64, np.uint32)
    assert offsets.shape == (35,) and targets.shape == (156,)
    assert offsets[0] == 0 and offsets[-1] == 156
    for array in (offsets, targets, karate.neighbors(3)):
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array[0] = 1
    # A neighbour list is a view of `targets`, not a copy.
    assert np.shares_memory(karate.neighbors(5), targets)


def test_from_edges_builds_the_graph_convert_builds(karate):
    text = [l.split() for l in open(FIXTURES / "karate.txt") if l[0].isdigit()]
    src = np.array([int(u) for u, v in text], dtype=np.int64)
    dst = np.array([int(v) for u, v in text], dtype=np.int32)
    g = quiver.Graph.from_edges(src, dst, undirected=True)
    assert g.is_temporary and g.path.exists()
    assert np.array_equal(g.offsets, karate.offsets)
    assert np.array_equal(g.targets, karate.targets)
    path = g.path
    del g
    assert not path.exists(), "a temporary graph's file goes with it"


def test_from_edges_keeps_weights_and_writes_a_path(tmp_path):
    out = tmp_path / "w.qcsr"
    g = quiver.Graph.from_edges([0, 0, 1], [1, 2, 2], [0.5, 1.5, 2.5], path=out, num_vertices=4)
    assert not g.is_temporary and len(g) == 4 and g.weighted
    assert list(g.edge_weights(0)) == [0.5, 1.5]
    assert list(g.neighbors(3)) == []
    assert len(quiver.Graph.open(out)) == 4


@pytest.mark.parametrize(
    "src, dst, kwargs, message",
    [
        ([0, -1], [1, 2], {}, "src[1] = -1"),
        ([0, 1], [1, 2, 3], {}, "src has 2 edges, dst 3"),
        ([0, 5], [1, 2], {"num_vertices": 5}, "src[1] = 5 is not a vertex id below 5"),
        ([0], [1], {"mem": "lots"}, "mem"),
        ([0], [1], {"mem": 1000}, "mem_budget"),
        (np.array([0.5, 2.9]), [1, 2], {}, "src[0] = 0.5 is not a whole number"),
        ([0, 1], np.array([1.0, float("nan")]), {}, "dst[1] = NaN is not a whole number"),
    ],
)
def test_from_edges_refuses_bad_arguments(src, dst, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        quiver.Graph.from_edges(src, dst, **kwargs)


def test_from_edges_takes_whole_floats_as_ids():
    g = quiver.Graph.from_edges(np.array([0.0, 1.0]), np.array([1.0, 2.0]))
    assert (len(g), g.num_edges) == (3, 2)


def test_negative_counts_are_value_errors(karate):
    for call, parameter in [
        (lambda: karate.walks(walks_per_vertex=1, length=-1), "length"),
        (lambda: karate.walks(walks_per_vertex=-1, length=5), "walks_per_vertex"),
        (lambda: karate.ppr(0, walks=-5), "walks"),
        (lambda: karate.simrank(0, 1, length=-2), "length"),
    ]:
        with pytest.raises(ValueError, match=parameter):
            call()


def test_the_package_exports_only_its_names():
    assert not [name for name in dir(quiver) if not name.startswith("_") and name not in quiver.__all__]


def test_vertices_out_of_range_are_value_errors(karate):
    for v in (-1, 34, 2**40):
        with pytest.raises(ValueError, match="not in the graph"):
            karate.degree(v)
        with pytest.raises(ValueError, match="not in the graph"):
            karate.neighbors(v)


def test_a_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.qcsr"):
        quiver.Graph.open(tmp_path / "nope.qcsr")
    with pytest.raises(OSError):
        quiver.convert(tmp_path / "nope.txt")


def test_corrupt_and_foreign_files_raise_and_never_crash(tmp_path, karate):
    data = bytearray(karate.path.read_bytes())
    for offset in (100, 4096 + 8, len(data) - 5000, len(data) - 1):
        bad = tmp_path / f"flip{offset}.qcsr"
        flipped = bytearray(data)
        flipped[offset] ^= 0x40
        bad.write_bytes(bytes(flipped))
        with pytest.raises(OSError, match=str(bad.name)):
            quiver.Graph.open(bad)
    truncated = tmp_path / "short.qcsr"
    truncated.write_bytes(bytes(data[:5000]))
    with pytest.raises(OSError, match="truncated|corrupt|checksum"):
        quiver.Graph.open(truncated)
    foreign = tmp_path / "edges.qcsr"
    foreign.write_text("0 1\n1 2\n")
    with pytest.raises(OSError, match="not a .qcsr graph"):
        quiver.Graph.open(foreign)


def test_convert_reads_graphalytics_datasets_with_their_ids():
    g = quiver.convert(FIXTURES / "graphalytics" / "example-directed.e")
    ids = [int(l) for l in open(FIXTURES / "graphalytics" / "example-directed.v")]
    assert len(g) == 10 and g.num_edges == 17 and g.weighted
    assert list(g.original_ids) == sorted(ids)
    with pytest.raises(ValueError, match="format"):
        quiver.convert(FIXTURES / "karate.txt", format="csv")


def test_generators_are_deterministic():
    a = quiver.generate.rmat(10, 8, seed=3, undirected=True, dedupe=True)
    b = quiver.generate.rmat(10, 8, seed=3, undirected=True, dedupe=True)
    c = quiver.generate.rmat(10, 8, seed=4, undirected=True, dedupe=True)
    assert len(a) == 1024 and a.undirected
    assert np.array_equal(a.targets, b.targets) and np.array_equal(a.offsets, b.offsets)
    assert not np.array_equal(a.targets, c.targets)
    er = quiver.generate.erdos_renyi(100, 500, seed=1, weights=(1, 5))
    assert er.num_edges == 500 and er.weighted
    assert set(np.unique(er.weights)) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    grid = quiver.generate.shape("grid", 3, 4)
    assert list(grid.degrees()) == [2, 2, 2, 1, 2, 2, 2, 1, 1, 1, 1, 0]
    assert list(quiver.generate.shape("star", 5).degrees()) == [4, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="u32 id space"):
        quiver.generate.rmat(40)
    with pytest.raises(ValueError, match="kind"):
        quiver.generate.shape("torus", 4)


def test_import_forms():
    import quiver.bsp
    from quiver.generate import rmat

    assert rmat is quiver.generate.rmat and quiver.bsp.UNREACHED == 2**63 - 1
    assert quiver.NO_VERTEX == 2**32 - 1
    assert "walks_per_vertex" in quiver.Graph.walks.__text_signature__
    assert "Node2Vec" in quiver.Graph.walks.__doc__


def test_importing_without_numpy_raises_import_error_saying_so():
    # numpy blocked in a fresh interpreter (None in sys.modules makes its
    # import fail) that finds quiver where this one did.
    code = (
        "import sys; sys.modules['numpy'] = None; "
        f"sys.path.insert(0, {str(Path(quiver.__file__).parent.parent)!r})\n"
        "try:\n"
        "    import quiver\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "quiver needs numpy (pip install numpy)" in result.stdout
