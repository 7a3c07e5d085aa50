"""The LDBC Graphalytics algorithms on Quiver's bsp engine, each returning
a numpy array indexed by vertex (index order). Where the graph has an id
map, a source is the dataset's id and labels are dataset ids (``uint64``);
``dense=True`` takes and gives indexes."""

from typing import Any, Optional

import numpy as np
import numpy.typing as npt

from . import Graph

#: The BFS depth of a vertex no path reaches: ``2**63 - 1``.
UNREACHED: int

def bfs(
    graph: Graph, source: int, *, threads: Optional[int] = None, dense: bool = False
) -> npt.NDArray[np.uint64]: ...
def pagerank(
    graph: Graph, iterations: int = 20, damping: float = 0.85, *, threads: Optional[int] = None
) -> npt.NDArray[np.float64]: ...
def wcc(graph: Graph, *, threads: Optional[int] = None, dense: bool = False) -> npt.NDArray[Any]: ...
def sssp(
    graph: Graph, source: int, *, threads: Optional[int] = None, dense: bool = False
) -> npt.NDArray[np.float64]: ...
def cdlp(
    graph: Graph, iterations: int = 10, *, threads: Optional[int] = None, dense: bool = False
) -> npt.NDArray[Any]: ...
def lcc(graph: Graph, *, threads: Optional[int] = None) -> npt.NDArray[np.float64]: ...
