"""Quiver's graph engines from Python: random walks (GraphWalker) and the
LDBC Graphalytics algorithms (RGraph's BSP engine) over ``.qcsr`` graphs,
with results as numpy arrays.

Everything is computed by the Rust libraries in the extension module
``quiver._quiver``; this package only names its parts::

    import quiver
    g = quiver.generate.rmat(16, undirected=True)
    walks = g.walks(walks_per_vertex=2, length=40, p=2.0, q=0.5, seed=7)
    ranks = quiver.bsp.pagerank(g, iterations=20)
"""

import sys as _sys

from ._quiver import NO_ID, NO_VERTEX, Graph, __version__, bsp, convert, generate

# The submodules live in the extension; registering them makes
# `import quiver.bsp` and `from quiver.generate import rmat` work too.
_sys.modules[__name__ + ".bsp"] = bsp
_sys.modules[__name__ + ".generate"] = generate

__all__ = ["Graph", "NO_ID", "NO_VERTEX", "bsp", "convert", "generate", "__version__"]
