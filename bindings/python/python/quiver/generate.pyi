"""Deterministic graph generators: the same arguments and seed give the
same graph as ``quiver generate``."""

import os
from typing import Optional, Tuple, Union

from . import Graph

_Path = Union[str, "os.PathLike[str]"]
_Size = Union[int, str]

def rmat(
    scale: int,
    edge_factor: int = 16,
    *,
    a: Optional[float] = None,
    b: Optional[float] = None,
    c: Optional[float] = None,
    permute: bool = True,
    seed: int = 1,
    weights: Optional[Tuple[int, int]] = None,
    path: Optional[_Path] = None,
    undirected: bool = False,
    dedupe: bool = False,
    drop_self_loops: bool = False,
    mem: Optional[_Size] = None,
    work_dir: Optional[_Path] = None,
) -> Graph:
    """R-MAT with ``2**scale`` vertices and ``edge_factor * 2**scale`` edges
    (Graph500's probabilities and vertex permutation by default)."""

def erdos_renyi(
    vertices: int,
    edges: int,
    *,
    seed: int = 1,
    weights: Optional[Tuple[int, int]] = None,
    path: Optional[_Path] = None,
    undirected: bool = False,
    dedupe: bool = False,
    drop_self_loops: bool = False,
    mem: Optional[_Size] = None,
    work_dir: Optional[_Path] = None,
) -> Graph: ...
def shape(
    kind: str,
    n: int,
    cols: Optional[int] = None,
    *,
    seed: int = 1,
    weights: Optional[Tuple[int, int]] = None,
    path: Optional[_Path] = None,
    undirected: bool = False,
    dedupe: bool = False,
    drop_self_loops: bool = False,
    mem: Optional[_Size] = None,
    work_dir: Optional[_Path] = None,
) -> Graph:
    """``"path"``, ``"cycle"``, ``"star"`` or ``"complete"`` of ``n``
    vertices, or ``"grid"`` of ``n`` rows and ``cols`` columns."""
