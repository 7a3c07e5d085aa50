"""examples/python/embeddings.py runs and its embedding separates the
karate club's factions (with gensim if installed, else numpy alone)."""

import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "python" / "embeddings.py"


@pytest.mark.parametrize("gensim", [False, True])
def test_the_embedding_separates_the_factions(gensim):
    args = [sys.executable, str(EXAMPLE), "--require-accuracy", "0.85"]
    if gensim and importlib.util.find_spec("gensim") is None:
        pytest.skip("gensim is not installed")
    if not gensim:
        args.append("--no-gensim")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    assert "factions told apart" in out
    assert ("gensim Word2Vec" in out) == gensim
