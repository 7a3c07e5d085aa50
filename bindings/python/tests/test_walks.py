"""Walks and walk applications: every row a walk of the graph, the same
walks as the driver's corpus, Node2Vec's odds, PPR against its exact
series, errors, the GIL and Ctrl-C."""

import signal
import subprocess
import threading
import time
import _thread

import numpy as np
import pytest

import quiver


def check_walks(g, walks, walks_per_vertex, length):
    """Every row is a walk of `g` from its vertex, padded only after a stop
    at a vertex without out-edges."""
    n = len(g)
    assert walks.dtype == np.uint32
    assert walks.shape == (n * walks_per_vertex, length + 1)
    assert np.array_equal(walks[:, 0], np.repeat(np.arange(n), walks_per_vertex))
    pad = walks == quiver.NO_VERTEX
    # Once padded, padded to the end.
    assert not np.any(pad[:, :-1] & ~pad[:, 1:])
    adj = [set(g.neighbors(v)) for v in range(n)]
    for row in walks:
        steps = row[row != quiver.NO_VERTEX]
        for u, v in zip(steps[:-1], steps[1:]):
            assert v in adj[u], f"{u} -> {v} is not an edge: {row}"
        if len(steps) < length + 1:
            assert not adj[steps[-1]], f"stopped early at {steps[-1]}, which has edges"


@pytest.mark.parametrize("p, q", [(1.0, 1.0), (2.0, 0.5)])
def test_every_row_is_a_walk_of_the_graph(karate, p, q):
    walks = karate.walks(5, 12, p=p, q=q, seed=11)
    check_walks(karate, walks, 5, 12)
    assert not np.any(walks == quiver.NO_VERTEX), "karate has no dead ends"


def test_walks_stop_at_dead_ends_and_are_padded(dead_end):
    walks = dead_end.walks(40, 9, seed=5)
    check_walks(dead_end, walks, 40, 9)
    assert np.all(walks[5 * 40 : 6 * 40, 1:] == quiver.NO_VERTEX), "walks from 5 stop at once"
    assert np.any(walks[:200] == quiver.NO_VERTEX)


def test_the_same_seed_gives_the_same_walks_everywhere(karate):
    a = karate.walks(4, 20, p=0.5, q=2.0, seed=3)
    assert np.array_equal(a, karate.walks(4, 20, p=0.5, q=2.0, seed=3))
    assert not np.array_equal(a, karate.walks(4, 20, p=0.5, q=2.0, seed=4))
    # Corpus walks are exact: threads, scheduling and rounds do not matter
    # as long as the rounds' budget is the same.
    for kwargs in ({"threads": 1}, {"threads": 3, "mode": "memory"}, {"mode": "iteration"}):
        assert np.array_equal(a, karate.walks(4, 20, p=0.5, q=2.0, seed=3, **kwargs)), kwargs


def test_walk_corpus_writes_the_same_walks(karate, tmp_path):
    out = tmp_path / "walks.txt"
    report = karate.walk_corpus(out, 3, 15, p=2.0, q=0.5, seed=9)
    assert report["result"]["walks"] == 34 * 3 and report["steps"] == 34 * 3 * 15
    lines = [list(map(int, l.split())) for l in out.read_text().splitlines()]
    assert np.array_equal(np.array(lines), karate.walks(3, 15, p=2.0, q=0.5, seed=9))


def test_walks_equal_the_drivers_corpus(karate, dead_end, driver, tmp_path):
    for g, p, q in ((karate, 2.0, 0.5), (dead_end, 1.0, 1.0)):
        out = tmp_path / "cli.txt"
        args = [driver, "walk", "corpus", str(g.path), "-o", str(out)]
        args += ["--walks-per-vertex", "3", "--length", "10", "--seed", "21", "--mem", "64MiB"]
        if (p, q) != (1.0, 1.0):
            args += ["--node2vec-p", str(p), "--node2vec-q", str(q)]
        subprocess.run(args, check=True, capture_output=True)
        walks = g.walks(3, 10, p=p, q=q, seed=21, mem="64MiB")
        rows = [" ".join(str(v) for v in row if v != quiver.NO_VERTEX) for row in walks]
        assert rows == out.read_text().splitlines()


def test_node2vec_second_steps_follow_the_bias():
    # 0-1, 0-2, 1-2, 1-3: a walk 0 -> 1 goes back to 0 with weight 1/p, to
    # 2 (a neighbour of 0) with weight 1, and to 3 with weight 1/q.
    g = quiver.Graph.from_edges([0, 0, 1, 1], [1, 2, 2, 3], undirected=True)
    p, q = 2.0, 0.5
    walks = g.walks(40_000, 2, p=p, q=q, seed=1)[:40_000]
    second = walks[walks[:, 1] == 1, 2]
    assert len(second) > 15_000
    weights = np.array([1 / p, 0.0, 1.0, 1 / q])
    expected = weights / weights.sum()
    observed = np.bincount(second, minlength=4) / len(second)
    assert np.allclose(observed, expected, atol=0.015), (observed, expected)


def test_ppr_on_karate_matches_the_truncated_series(karate):
    n, source, stop, length = len(karate), 0, 0.15, 10
    step = np.zeros((n, n))
    for v in range(n):
        step[v, karate.neighbors(v)] = (1 - stop) / karate.degree(v)
    visits, hop = np.zeros(n), np.eye(n)[source]
    for _ in range(length + 1):
        visits += hop
        hop = hop @ step
    exact = visits / visits.sum()
    ppr = karate.ppr(source, walks=200_000, length=length, stop=stop, seed=2)
    assert ppr.shape == (n,) and abs(ppr.sum() - 1) < 1e-9
    assert np.abs(ppr - exact).max() < 0.005, np.abs(ppr - exact).max()
    assert np.argmax(ppr) == source
    # The test can fail: uniform visits are far from the series.
    assert np.abs(np.full(n, 1 / n) - exact).max() > 0.1


def test_rwr_and_simrank(karate):
    rwr = karate.rwr(33, walks=5000, seed=1)
    assert abs(rwr.sum() - 1) < 1e-9 and np.argmax(rwr) == 33
    s = karate.simrank(32, 33, walks=500, seed=1)
    assert 0 < s <= 1 and s == karate.simrank(32, 33, walks=500, seed=1)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda g: g.walks(2, 5, p=0.0), "node2vec.p"),
        (lambda g: g.walks(2, 5, q=float("inf")), "node2vec.q"),
        (lambda g: g.walks(2, 5, mode="fast"), "mode"),
        (lambda g: g.walks(2, 5, dead_end="bounce"), "dead_end"),
        (lambda g: g.walks(2, 5, weighted=True), "weights"),
        (lambda g: g.walks(2, 5, mem=0), "0 bytes cannot hold"),
        (lambda g: g.walks(2**40, 5), "walks_per_vertex"),
        (lambda g: g.ppr(34), "not in the graph"),
        (lambda g: g.ppr(-3), "not in the graph"),
        (lambda g: g.rwr(0, restart=2.0), "restart_probability"),
        (lambda g: g.ppr(0, stop=-0.5), "stop_probability"),
        (lambda g: g.simrank(0, 99), "not in the graph"),
    ],
)
def test_bad_walk_arguments_are_value_errors(karate, call, message):
    with pytest.raises(ValueError, match=message):
        call(karate)


def test_a_walk_corpus_to_a_missing_directory_is_an_os_error(karate, tmp_path):
    with pytest.raises(OSError, match="missing"):
        karate.walk_corpus(tmp_path / "missing" / "w.txt", 1, 5)


@pytest.fixture(scope="module")
def big():
    """A graph whose walks take a while (seconds in a debug build)."""
    return quiver.generate.rmat(14, 16, seed=2, undirected=True)


def test_out_of_core_walks_are_the_in_memory_walks(tmp_path):
    g = quiver.generate.rmat(15, 16, seed=5, undirected=True)
    # 3 MiB of the 6 MiB budget walks a graph of about 4 MiB of edges; the
    # other half holds every path, so both runs have one round (and seed).
    assert g.num_edges * 4 > 3.5 * 2**20
    small = g.walks(1, 10, mem="6MiB", seed=4)
    assert np.array_equal(small, g.walks(1, 10, mem="64MiB", seed=4, mode="memory"))
    report = g.walk_corpus(tmp_path / "w.txt", 1, 10, mem="6MiB", seed=4)
    assert report["mode"] == "graphwalker" and report["blocks"] > 1
    assert report["blocks_loaded"] > 1 and report["peak_mem_bytes"] <= report["mem_budget"]
    assert report["result"]["rounds"] == 1


def test_walks_release_the_gil(big):
    done = threading.Event()
    result = {}

    def walk():
        result["walks"] = big.walks(10, 80, threads=1)
        done.set()

    thread = threading.Thread(target=walk)
    thread.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    thread.join()
    assert result["walks"].shape == (len(big) * 10, 81)
    assert ticks > 20, "Python ran while the walks did"


def test_ctrl_c_interrupts_a_run(big):
    # Python's own Ctrl-C handler: a shell that starts the suite in the
    # background makes the process ignore SIGINT, and `interrupt_main` then
    # does nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        started = time.monotonic()
        full = big.walks(10, 80, threads=1)
        full_time = time.monotonic() - started
        timer = threading.Timer(min(0.1, full_time / 4), _thread.interrupt_main)
        started = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            big.walks(10, 80, threads=1)
        interrupted = time.monotonic() - started
        timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert interrupted < full_time * 0.8, (interrupted, full_time)
    # The graph is still usable, and walks the same as before.
    assert np.array_equal(big.walks(10, 80, threads=1), full)
