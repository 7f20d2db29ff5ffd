"""Softmax over R in "SR" layout."""

import numpy as np

from tunebench import Bucket, Buckets, Kernel, Space, Variant, pow2


def args(shape, dtype, rng):
    S, R = shape
    return {"x": (4 * rng.standard_normal((S, R), dtype=np.float32)).astype(dtype),
            "y": np.empty((S, R), dtype), "S": np.int32(S), "R": np.int32(R)}


def reference(x, S, R):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def heuristic(shape):
    """Today's rule: AVX2-wide vectors, the classic three passes."""
    return {"vec": 8, "unroll": 2, "chunk": 1, "online": 0}


softmax = Kernel(
    "softmax",
    buckets=Buckets("SR", [
        Bucket("few_rows", S=(1, 15), R=(1, None), shapes=[(4, 65536)]),
        Bucket("wide", S=(16, None), R=(2049, None), shapes=[(256, 8192)]),
        Bucket("narrow", S=(16, None), R=(1, 2048), shapes=[(4096, 512), (2048, 1024)], weight=2),
    ]),
    args=args, reference=reference, outputs=["y"],
    bytes=lambda shape, dtype: 2 * shape[0] * shape[1] * np.dtype(dtype).itemsize,
    tolerance={"float32": (5e-4, 1e-7)},
    cpu=Variant(
        source="kernels/softmax.c", entry="softmax", heuristic=heuristic,
        space=Space(
            {"vec": pow2(1, 16), "unroll": pow2(1, 8), "chunk": pow2(1, 16), "online": [0, 1]},
            constraints=[lambda vec, unroll: vec * unroll <= 64],
        ),
    ),
)
