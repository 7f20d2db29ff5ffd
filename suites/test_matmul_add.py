"""Matrix product plus addend, out = A @ B + C: the seeds' matmul_add, in "MNK" dims."""

import numpy as np

from tunebench import Bucket, Buckets, Kernel, Space, Variant, pow2


def args(shape, dtype, rng):
    M, N, K = shape
    return {"A": rng.standard_normal((M, K), dtype=np.float32).astype(dtype),
            "B": rng.standard_normal((K, N), dtype=np.float32).astype(dtype),
            "C": rng.standard_normal((M, N), dtype=np.float32).astype(dtype),
            "out": np.empty((M, N), dtype), "M": np.int32(M), "N": np.int32(N), "K": np.int32(K)}


def reference(A, B, C, M, N, K):
    return A.astype(np.float64) @ B.astype(np.float64) + C


def heuristic(shape):
    """Today's rule: one fixed blocking tuned long ago for an AVX2 machine."""
    return {"tile_m": 64, "tile_n": 256, "tile_k": 128, "mr": 4, "nv": 2, "vec": 8}


matmul_add = Kernel(
    "matmul_add",
    buckets=Buckets("MNK", [
        Bucket("skinny", M=(1, 31), N=(1, None), K=(1, None), shapes=[(8, 1024, 1024)]),
        Bucket("small", M=(32, 383), N=(1, None), K=(1, None), shapes=[(256, 256, 256)]),
        Bucket("large", M=(384, None), N=(1, None), K=(1, None), shapes=[(512, 512, 512)]),
    ]),
    args=args, reference=reference, outputs=["out"],
    flops=lambda shape: 2 * shape[0] * shape[1] * shape[2] + shape[0] * shape[1],
    tolerance={"float32": (1e-4, 1e-3)},
    cpu=Variant(
        source="kernels/matmul_add.c", entry="matmul_add", heuristic=heuristic,
        space=Space(
            {"tile_m": pow2(16, 128), "tile_n": pow2(32, 512), "tile_k": pow2(32, 512),
             "mr": pow2(1, 8), "nv": [1, 2, 4], "vec": [4, 8, 16]},
            constraints=[
                lambda tile_m, mr: tile_m % mr == 0,
                lambda tile_n, nv, vec: tile_n % (nv * vec) == 0,
                lambda mr, nv: mr * nv <= 24,
            ],
        ),
    ),
)
