"""Softmax over R in "SR" layout."""

import numpy as np
from reduction_family import cpu_space, cuda_variant, normalisation_buckets

from tunebench import Kernel, Variant


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
    buckets=normalisation_buckets("cpu"),
    args=args, reference=reference, outputs=["y"],
    bytes=lambda shape, dtype: 2 * shape[0] * shape[1] * np.dtype(dtype).itemsize,
    # float16: the output's rounding is at most 2**-11 (4.9e-4) relative (2**-25 absolute for
    # float16's subnormals, below 6.1e-5), exp2 and the float sums add ~1e-6; four times that.
    # bfloat16 rounds to 2**-8 (3.9e-3) relative and has float32's range (no subnormals here)
    tolerance={"float32": (5e-4, 1e-7), "float16": (2e-3, 1e-6), "bfloat16": (1.6e-2, 1e-6)},
    cpu=Variant(source="kernels/softmax.c", entry="softmax", heuristic=heuristic,
                space=cpu_space(online=[0, 1])),
    cuda=cuda_variant("kernels/softmax.cu", "softmax", normalisation_buckets("cuda"),
                      dtypes=("float32", "float16", "bfloat16")),
)
