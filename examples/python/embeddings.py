"""Node2Vec embeddings of Zachary's karate club with Quiver's walks.

Quiver walks the graph (Node2Vec, p = 1, q = 0.5: a bias toward moving
outward, which favours community structure), gensim's Word2Vec (skip-gram)
turns the walks into vectors, and a simple classifier checks that the
vectors separate the club's two factions (the members who followed Mr. Hi
and those who followed the officer after the split Zachary observed):
leave-one-out nearest centroid by cosine similarity.

Without gensim the same walks are embedded by the matrix DeepWalk
factorises implicitly (positive pointwise mutual information of vertices
within the window, reduced by SVD), with numpy alone.

    pip install ./bindings/python gensim    # gensim is optional
    python examples/python/embeddings.py [--require-accuracy 0.8]
"""

import argparse
import pathlib
import sys

import numpy as np

import quiver

KARATE = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "karate.txt"

# The faction of each member (vertex i is member i + 1) after the split, as
# networkx's karate_club_graph() records it in its "club" attribute:
# 0 followed Mr. Hi (member 1), 1 the officer (member 34).
FACTION = np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])

WINDOW = 5
DIMENSIONS = 16


def sentences(walks):
    """Walks as lists of tokens, without the padding of walks that stopped."""
    return [[str(v) for v in row if v != quiver.NO_VERTEX] for row in walks]


def word2vec(walks, n, seed):
    from gensim.models import Word2Vec

    model = Word2Vec(
        sentences(walks),
        vector_size=DIMENSIONS,
        window=WINDOW,
        min_count=0,
        sg=1,
        workers=1,
        epochs=5,
        seed=seed,
    )
    return np.array([model.wv[str(v)] for v in range(n)])


def ppmi_svd(walks, n):
    """DeepWalk as a matrix: co-occurrence within the window, its positive
    PMI, and the top singular vectors."""
    counts = np.zeros((n, n))
    for row in walks:
        row = row[row != quiver.NO_VERTEX]
        for offset in range(1, WINDOW + 1):
            np.add.at(counts, (row[:-offset], row[offset:]), 1)
    counts += counts.T
    total = counts.sum()
    expected = np.outer(counts.sum(1), counts.sum(0)) / total
    with np.errstate(divide="ignore"):
        pmi = np.log(counts / expected)
    ppmi = np.maximum(pmi, 0)
    u, s, _ = np.linalg.svd(ppmi)
    return u[:, :DIMENSIONS] * np.sqrt(s[:DIMENSIONS])


def leave_one_out_accuracy(vectors, labels):
    """Each member classified by the nearer faction centroid (cosine) of the
    other members."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    right = 0
    for i in range(len(unit)):
        others = np.arange(len(unit)) != i
        centroids = [unit[others & (labels == c)].mean(0) for c in (0, 1)]
        scores = [unit[i] @ c / np.linalg.norm(c) for c in centroids]
        right += int(np.argmax(scores) == labels[i])
    return right / len(unit)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--require-accuracy", type=float, default=0.0)
    parser.add_argument("--no-gensim", action="store_true", help="embed with PPMI + SVD")
    args = parser.parse_args()

    g = quiver.convert(KARATE, undirected=True)
    walks = g.walks(walks_per_vertex=20, length=40, p=1.0, q=0.5, seed=args.seed)
    print(f"{walks.shape[0]} Node2Vec walks of {walks.shape[1]} vertices on {g}")

    try:
        if args.no_gensim:
            raise ImportError("asked for PPMI + SVD")
        vectors = word2vec(walks, len(g), args.seed)
        how = "gensim Word2Vec (skip-gram)"
    except ImportError:
        vectors = ppmi_svd(walks, len(g))
        how = "PPMI + SVD (numpy; gensim not used)"
    accuracy = leave_one_out_accuracy(vectors, FACTION)
    print(f"{DIMENSIONS}-dimensional embeddings by {how}")
    print(f"factions told apart: {accuracy:.1%} of members (leave-one-out nearest centroid)")
    if accuracy < args.require_accuracy:
        sys.exit(f"accuracy {accuracy:.3f} is below {args.require_accuracy}")


if __name__ == "__main__":
    main()
