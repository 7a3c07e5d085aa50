"""Node2Vec and DeepWalk walks into Python: PecanPy against quiver, end to
end (loading the graph, then the walks), on one graph and parameters.

Not part of CI: it needs PecanPy from PyPI (`pip install pecanpy`) and the
package installed (`pip install ./bindings/python`). The graph is an edge
list with each undirected edge once, e.g. GAPBS's Kronecker graph:

    converter -g 18 -k 16 -s -e kron18-both.el && awk '$1 < $2' kron18-both.el > kron18.el
    python bindings/python/bench/pecanpy_vs_quiver.py kron18.el --system quiver
    python bindings/python/bench/pecanpy_vs_quiver.py kron18.el --system pecanpy

Each run prints one JSON line: seconds to load, seconds to walk, walks and
steps (positions after a walk's first), steps per second end to end, and
how far the process's resident memory rose above where it stood when the
walks began, at its peak while they ran (Linux: the peak is reset before
walking, so loading's own peak does not hide it), beside the bytes of the
walks it returned.
PecanPy's walk time includes numba's compilation, as a user meets it; its
walks come back as lists of strings, quiver's as one uint32 array.
"""

import argparse
import json
import re
import sys
import time


def pecanpy(args):
    from pecanpy import pecanpy as node2vec

    mode = "SparseOTF" if args.order == "node2vec" else "FirstOrderUnweighted"
    started = time.perf_counter()
    g = getattr(node2vec, mode)(p=args.p, q=args.q, workers=args.threads, verbose=False)
    g.read_edg(args.edges, weighted=False, directed=False, delimiter=" ")
    loaded = time.perf_counter()
    before = start_peak()
    walks = g.simulate_walks(num_walks=args.walks_per_vertex, walk_length=args.length)
    walked = time.perf_counter()
    steps = sum(len(w) - 1 for w in walks)
    returned = sum(sys.getsizeof(w) + sum(sys.getsizeof(x) for x in w) for w in walks)
    return mode, loaded - started, walked - loaded, len(walks), steps, rise(before), returned


def quiver(args):
    import numpy as np

    import quiver

    p, q = (args.p, args.q) if args.order == "node2vec" else (1.0, 1.0)
    started = time.perf_counter()
    if args.edges.endswith(".qcsr"):
        g = quiver.Graph.open(args.edges)
    else:
        g = quiver.convert(args.edges, undirected=True)
    loaded = time.perf_counter()
    before = start_peak()
    walks = g.walks(
        args.walks_per_vertex, args.length, p=p, q=q, threads=args.threads, mem=args.mem, seed=1
    )
    walked = time.perf_counter()
    steps = int(np.count_nonzero(walks != quiver.NO_VERTEX)) - walks.shape[0]
    return "walks", loaded - started, walked - loaded, walks.shape[0], steps, rise(before), walks.nbytes


def status(field):
    """A memory figure of this process from /proc/self/status, in bytes."""
    with open("/proc/self/status") as f:
        return int(re.search(field + r":\s+(\d+) kB", f.read()).group(1)) * 1024


def start_peak():
    """Resets the process's peak resident memory to what it holds now
    (Linux >= 4.0: writing 5 to clear_refs) and returns that."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status("VmRSS")


def rise(before):
    """How far the peak resident memory rose above `before` since start_peak."""
    return status("VmHWM") - before


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("edges")
    parser.add_argument("--system", choices=["pecanpy", "quiver"], required=True)
    parser.add_argument("--order", choices=["node2vec", "deepwalk"], default="node2vec")
    parser.add_argument("--p", type=float, default=2.0)
    parser.add_argument("--q", type=float, default=0.5)
    parser.add_argument("--walks-per-vertex", type=int, default=2)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mem", default=None, help="quiver's budget (default: the walker's)")
    args = parser.parse_args()
    run = pecanpy if args.system == "pecanpy" else quiver
    how, load, walk, walks, steps, grew, returned = run(args)
    print(
        json.dumps(
            {
                "system": args.system,
                "how": how,
                "order": args.order,
                "load_s": round(load, 3),
                "walk_s": round(walk, 3),
                "total_s": round(load + walk, 3),
                "walks": walks,
                "steps": steps,
                "steps_per_s_end_to_end": round(steps / (load + walk)),
                "peak_rss_rise_bytes_while_walking": grew,
                "returned_walks_bytes": returned,
            }
        )
    )


if __name__ == "__main__":
    main()
