"""Row reduction (sum over R) in "SR" layout: the reduction family of the seeds."""

import numpy as np
from reduction_family import cpu_space, cuda_variant

from tunebench import Bucket, Buckets, Kernel, Variant, pow2


def args(shape, dtype, rng):
    S, R = shape
    return {"x": rng.random((S, R), dtype=np.float32).astype(dtype), "out": np.empty(S, dtype),
            "S": np.int32(S), "R": np.int32(R)}


def reference(x, S, R):
    return x.astype(np.float64).sum(axis=1)


def heuristic(shape):
    """Today's rule: AVX2-wide vectors, two accumulators; split the rows only when there are few."""
    S, R = shape
    return {"vec": 8, "unroll": 2, "chunk": 4, "r_split": 4 if S < 8 and R >= 8192 else 1}


row_reduce = Kernel(
    "row_reduce",
    buckets=Buckets("SR", [
        Bucket("few_rows", S=(1, 7), R=(1, None), shapes=[(4, 262144)]),
        Bucket("long_rows", S=(8, None), R=(4097, None), shapes=[(128, 32768)]),
        Bucket("short_rows", S=(8, None), R=(1, 4096), shapes=[(16384, 256), (4096, 1024)], weight=2),
    ]),
    args=args, reference=reference, outputs=["out"],
    bytes=lambda shape, dtype: (shape[0] * shape[1] + shape[0]) * np.dtype(dtype).itemsize,
    tolerance={"float32": (2e-4, 1e-3)},
    cpu=Variant(
        source="kernels/row_reduce.c", entry="row_reduce", heuristic=heuristic,
        space=cpu_space(r_split=pow2(1, 8)),
    ),
    cuda=cuda_variant(
        "kernels/row_reduce.cu", "row_reduce",
        # the largest shapes move 512 MB a call, enough for DRAM bandwidth on an H100 or H200;
        # few_rows keeps at most 7 blocks busy (one per row): latency more than bandwidth
        Buckets("SR", [
            Bucket("few_rows", S=(1, 7), R=(1, None), shapes=[(4, 1048576)]),
            Bucket("long_rows", S=(8, None), R=(4097, None), shapes=[(8192, 16384), (1024, 32768)]),
            Bucket("short_rows", S=(8, None), R=(1, 4096), shapes=[(262144, 512), (32768, 4096)],
                   weight=2),
        ]),
    ),
)
