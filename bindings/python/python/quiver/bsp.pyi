"""The LDBC Graphalytics algorithms on Quiver's bsp engine, each returning
a numpy array indexed by vertex."""

from typing import Optional

import numpy as np
import numpy.typing as npt

from . import Graph

#: The BFS depth of a vertex no path reaches: ``2**63 - 1``.
UNREACHED: int

def bfs(graph: Graph, source: int, *, threads: Optional[int] = None) -> npt.NDArray[np.uint64]: ...
def pagerank(
    graph: Graph, iterations: int = 20, damping: float = 0.85, *, threads: Optional[int] = None
) -> npt.NDArray[np.float64]: ...
def wcc(graph: Graph, *, threads: Optional[int] = None) -> npt.NDArray[np.uint32]: ...
def sssp(graph: Graph, source: int, *, threads: Optional[int] = None) -> npt.NDArray[np.float64]: ...
def cdlp(graph: Graph, iterations: int = 10, *, threads: Optional[int] = None) -> npt.NDArray[np.uint32]: ...
def lcc(graph: Graph, *, threads: Optional[int] = None) -> npt.NDArray[np.float64]: ...
