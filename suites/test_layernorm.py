"""Layer normalisation over R in "SR" layout, as in the seeds' CINN tuning example."""

import numpy as np

from tunebench import Bucket, Buckets, Kernel, Space, Variant, pow2

EPS = 1e-5


def args(shape, dtype, rng):
    S, R = shape
    return {"x": rng.standard_normal((S, R), dtype=np.float32).astype(dtype),
            "gamma": rng.uniform(0.5, 1.5, R).astype(dtype), "beta": rng.uniform(-0.5, 0.5, R).astype(dtype),
            "y": np.empty((S, R), dtype), "S": np.int32(S), "R": np.int32(R), "eps": np.float32(EPS)}


def reference(x, gamma, beta, S, R, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + float(eps)) * gamma + beta


def heuristic(shape):
    """Today's rule: AVX2-wide vectors, the numerically safe two-pass variance."""
    return {"vec": 8, "unroll": 2, "chunk": 1, "two_pass": 1}


layernorm = Kernel(
    "layernorm",
    buckets=Buckets("SR", [
        Bucket("few_rows", S=(1, 15), R=(1, None), shapes=[(4, 65536)]),
        Bucket("wide", S=(16, None), R=(2049, None), shapes=[(256, 8192)]),
        Bucket("narrow", S=(16, None), R=(1, 2048), shapes=[(4096, 512), (2048, 1024)], weight=2),
    ]),
    args=args, reference=reference, outputs=["y"],
    bytes=lambda shape, dtype: (2 * shape[0] * shape[1] + 2 * shape[1]) * np.dtype(dtype).itemsize,
    tolerance={"float32": (1e-4, 1e-4)},
    cpu=Variant(
        source="kernels/layernorm.c", entry="layernorm", heuristic=heuristic,
        space=Space(
            {"vec": pow2(1, 16), "unroll": pow2(1, 8), "chunk": pow2(1, 16), "two_pass": [0, 1]},
            constraints=[lambda vec, unroll: vec * unroll <= 64],
        ),
    ),
)
