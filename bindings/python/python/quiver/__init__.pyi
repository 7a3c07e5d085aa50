"""Quiver's graph engines from Python (type stubs of ``quiver._quiver``)."""

import os
from typing import Any, Dict, Optional, Union

import numpy as np
import numpy.typing as npt

from . import bsp as bsp
from . import generate as generate

__version__: str

#: Pads a walk of ``Graph.walks`` after it stopped early: ``2**32 - 1``.
NO_VERTEX: int
#: Pads a walk of ``Graph.walks`` named by a dataset's ids: ``2**64 - 1``.
NO_ID: int

_Path = Union[str, "os.PathLike[str]"]
#: Bytes as an ``int``, or a string such as ``"512MiB"``.
_Size = Union[int, str]
_Ids = npt.ArrayLike

class Graph:
    """A directed graph in a ``.qcsr`` file (checksummed CSR), opened and
    verified. Vertices are stored as indexes ``0..len(g)``; ``offsets``,
    ``targets``, ``weights`` and ``original_ids`` are read-only numpy views
    of the file. Where the graph has an id map (a Graphalytics dataset),
    every method that takes or returns vertices names them by the dataset's
    own ids, or by index with ``dense=True``; arrays indexed by vertex are
    in index order (entry ``i`` is vertex ``original_ids[i]``)."""

    @staticmethod
    def open(path: _Path) -> Graph:
        """Opens the ``.qcsr`` graph at ``path``, verifying every checksum.
        Raises ``OSError`` if it cannot be read or is not an intact graph."""
    @staticmethod
    def from_edges(
        src: _Ids,
        dst: _Ids,
        weights: Optional[npt.ArrayLike] = None,
        *,
        num_vertices: Optional[int] = None,
        undirected: bool = False,
        dedupe: bool = False,
        drop_self_loops: bool = False,
        path: Optional[_Path] = None,
        mem: Optional[_Size] = None,
        work_dir: Optional[_Path] = None,
    ) -> Graph:
        """A graph of the edges ``src[i] -> dst[i]`` (with ``weights[i]``),
        written to ``path`` (default: a temporary file removed with the
        graph). ``undirected`` adds every edge's reverse. Raises
        ``ValueError`` for an id that is negative or not below
        ``num_vertices``, or arrays of different lengths."""
    def __len__(self) -> int: ...
    @property
    def num_vertices(self) -> int: ...
    @property
    def num_edges(self) -> int:
        """|E| (an undirected graph stores both directions)."""
    @property
    def path(self) -> os.PathLike[str]: ...
    @property
    def is_temporary(self) -> bool:
        """Whether the file is removed with the graph."""
    @property
    def weighted(self) -> bool: ...
    @property
    def undirected(self) -> bool: ...
    @property
    def offsets(self) -> npt.NDArray[np.uint64]:
        """``|V| + 1`` offsets: ``v``'s edges are ``targets[offsets[v]:offsets[v+1]]``."""
    @property
    def targets(self) -> npt.NDArray[np.uint32]:
        """Every adjacency list in vertex order, each sorted."""
    @property
    def weights(self) -> Optional[npt.NDArray[np.float32]]: ...
    @property
    def original_ids(self) -> Optional[npt.NDArray[np.uint64]]:
        """The id each vertex had in the input, if the graph keeps them."""
    def degree(self, v: int, *, dense: bool = False) -> int: ...
    def degrees(self) -> npt.NDArray[np.uint64]: ...
    def neighbors(self, v: int, *, dense: bool = False) -> npt.NDArray[Any]:
        """``v``'s out-neighbours in index order: a read-only ``uint32`` view
        of ``targets``, or where the graph has an id map a ``uint64`` array
        of the dataset's ids (``dense=True``: the view)."""
    def edge_weights(self, v: int, *, dense: bool = False) -> Optional[npt.NDArray[np.float32]]: ...
    def walks(
        self,
        walks_per_vertex: int = 10,
        length: int = 80,
        *,
        p: float = 1.0,
        q: float = 1.0,
        weighted: bool = False,
        dead_end: str = "stop",
        seed: Optional[int] = None,
        mem: Optional[_Size] = None,
        threads: Optional[int] = None,
        mode: Optional[str] = None,
        work_dir: Optional[_Path] = None,
        dense: bool = False,
    ) -> npt.NDArray[Any]:
        """Walks from every vertex, shape ``(len(g) * walks_per_vertex,
        length + 1)``: row ``i`` starts at index ``i // walks_per_vertex``; a
        walk that stopped early is padded with ``NO_VERTEX`` (``uint32``
        indexes), or where the graph has an id map ``NO_ID`` (``uint64``
        dataset ids; ``dense=True``: indexes). ``p``, ``q``:
        Node2Vec's parameters (both 1: first-order walks). The walks of
        ``quiver walk corpus`` with the same seed, ``mem`` and shape."""
    def walk_corpus(
        self,
        path: _Path,
        walks_per_vertex: int = 10,
        length: int = 80,
        *,
        p: float = 1.0,
        q: float = 1.0,
        weighted: bool = False,
        dead_end: str = "stop",
        seed: Optional[int] = None,
        mem: Optional[_Size] = None,
        threads: Optional[int] = None,
        mode: Optional[str] = None,
        work_dir: Optional[_Path] = None,
    ) -> Dict[str, Any]:
        """The walks of ``walks()`` written to ``path``, a line each, in
        rounds that fit ``mem``; returns the walker's report."""
    def ppr(
        self,
        source: int,
        walks: int = 2000,
        length: int = 10,
        stop: float = 0.15,
        *,
        weighted: bool = False,
        seed: Optional[int] = None,
        mem: Optional[_Size] = None,
        threads: Optional[int] = None,
        mode: Optional[str] = None,
        work_dir: Optional[_Path] = None,
        dense: bool = False,
    ) -> npt.NDArray[np.float64]:
        """Personalized PageRank from ``source`` by visit frequency: each
        vertex's share of all visits (summing to 1), indexed by vertex.
        ``source`` is the dataset's id where the graph has an id map, an
        index with ``dense=True``."""
    def rwr(
        self,
        source: int,
        walks: int = 2000,
        length: int = 20,
        restart: float = 0.15,
        *,
        weighted: bool = False,
        seed: Optional[int] = None,
        mem: Optional[_Size] = None,
        threads: Optional[int] = None,
        mode: Optional[str] = None,
        work_dir: Optional[_Path] = None,
        dense: bool = False,
    ) -> npt.NDArray[np.float64]:
        """Random walk with restart from ``source``: each vertex's share of
        all visits."""
    def simrank(
        self,
        a: int,
        b: int,
        walks: int = 2000,
        length: int = 11,
        decay: float = 0.8,
        *,
        seed: Optional[int] = None,
        mem: Optional[_Size] = None,
        threads: Optional[int] = None,
        mode: Optional[str] = None,
        work_dir: Optional[_Path] = None,
        dense: bool = False,
    ) -> float:
        """SimRank of ``a`` and ``b`` from walk meeting times."""

def convert(
    input: _Path,
    output: Optional[_Path] = None,
    *,
    format: Optional[str] = None,
    weighted_binary: bool = False,
    ignore_weights: bool = False,
    num_vertices: int = 0,
    relabel: bool = False,
    undirected: bool = False,
    dedupe: bool = False,
    drop_self_loops: bool = False,
    mem: Optional[_Size] = None,
    work_dir: Optional[_Path] = None,
) -> Graph:
    """Converts an edge list (SNAP text, ``bin``, ``mtx`` or a Graphalytics
    ``NAME.e``; ``.gz`` too) into a ``.qcsr`` graph at ``output`` (default:
    a temporary file) and opens it."""
