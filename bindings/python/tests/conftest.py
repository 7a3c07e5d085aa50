"""Shared fixtures of the Python tests: the repository's graphs, converted
by the package itself, and the driver for comparisons with the CLI."""

import os
import pathlib

import numpy as np
import pytest

import quiver

ROOT = pathlib.Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures"


def adjacency_of(path, undirected):
    """The adjacency sets of a SNAP fixture, read by Python alone."""
    edges = []
    for line in open(path):
        if line.strip() and not line.startswith("#"):
            u, v = map(int, line.split()[:2])
            edges.append((u, v))
    n = 1 + max(max(e) for e in edges)
    adj = [set() for _ in range(n)]
    for u, v in edges:
        adj[u].add(v)
        if undirected:
            adj[v].add(u)
    return adj


@pytest.fixture(scope="session")
def karate():
    """Zachary's karate club, undirected: 34 vertices, 156 edges."""
    return quiver.convert(FIXTURES / "karate.txt", undirected=True)


@pytest.fixture(scope="session")
def karate_adj():
    return adjacency_of(FIXTURES / "karate.txt", undirected=True)


@pytest.fixture(scope="session")
def dead_end():
    """A directed graph whose vertex 5 has no out-edges (walks stop there)."""
    src = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4]
    dst = [1, 2, 2, 3, 0, 4, 1, 5, 0, 3, 5]
    return quiver.Graph.from_edges(np.array(src), np.array(dst))


@pytest.fixture(scope="session")
def driver():
    """The `quiver` driver named by QUIVER_BIN (CI builds it), if any."""
    path = os.environ.get("QUIVER_BIN")
    if not path:
        pytest.skip("QUIVER_BIN does not name the quiver driver")
    return path
