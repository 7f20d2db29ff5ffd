"""Layer normalisation over R in "SR" layout, as in the seeds' CINN tuning example."""

import numpy as np
from reduction_family import cpu_space, cuda_variant, normalisation_buckets

from tunebench import Kernel, Variant

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
    buckets=normalisation_buckets("cpu"),
    args=args, reference=reference, outputs=["y"],
    bytes=lambda shape, dtype: (2 * shape[0] * shape[1] + 2 * shape[1]) * np.dtype(dtype).itemsize,
    # float16: the output's rounding is at most 2**-11 (4.9e-4) of |y|, the float arithmetic
    # adds ~1e-6; twice that margin, and atol for the values near zero
    tolerance={"float32": (1e-4, 1e-4), "float16": (2e-3, 2e-3)},
    cpu=Variant(source="kernels/layernorm.c", entry="layernorm", heuristic=heuristic,
                space=cpu_space(two_pass=[0, 1])),
    cuda=cuda_variant("kernels/layernorm.cu", "layernorm", normalisation_buckets("cuda"),
                      dtypes=("float32", "float16")),
)
