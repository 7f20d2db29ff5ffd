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


def cuda_threads(c):
    """Threads per block: one per thread tile of the block tile."""
    return c["block_m"] // c["thread_m"] * (c["block_n"] // c["thread_n"])


def cuda_registers(c):
    """Registers a thread needs, estimated: accumulators, one row and one column of operands,
    and some 40 for addresses and indices."""
    return c["thread_m"] * c["thread_n"] + c["thread_m"] + c["thread_n"] + 40


def cuda_launch(config, shape):
    """One block per block_m x block_n tile of out (the kernel loops if the grid is smaller)."""
    M, N = shape[0], shape[1]
    tiles = -(-M // config["block_m"]) * -(-N // config["block_n"])
    return (max(1, min(tiles, 2**31 - 1)),), (cuda_threads(config),)


def cuda_heuristic(shape):
    """Today's rule: the classic SGEMM blocking, 128 x 128 x 8 block tiles, 8 x 8 thread tiles,
    float4 loads, whatever the shape."""
    return {"block_m": 128, "block_n": 128, "block_k": 8, "thread_m": 8, "thread_n": 8, "vec": 4}


#: Block tile, thread tile and the width of global accesses. The constraints keep what launches
#: without spilling much: 32 to 1024 threads, the A (padded by 4 floats) and B tiles within the
#: 48 KB of static shared memory, the registers within a thread's 255 and the block's 65536, and
#: at most 16 vector loads per thread and K step (they are unrolled).
CUDA_SPACE = Space(
    {"block_m": pow2(16, 256), "block_n": pow2(16, 256), "block_k": pow2(4, 64),
     "thread_m": pow2(1, 16), "thread_n": pow2(1, 16), "vec": [1, 2, 4]},
    constraints=[
        lambda block_m, thread_m: block_m % thread_m == 0,
        lambda block_n, thread_n: block_n % thread_n == 0,
        lambda block_k, block_n, vec: block_k % vec == 0 and block_n % vec == 0,
        lambda c: 32 <= cuda_threads(c) <= 1024,
        lambda block_m, block_n, block_k: (block_m + 4 + block_n) * block_k * 4 <= 48 * 1024,
        lambda c: cuda_registers(c) <= 255,
        lambda c: cuda_registers(c) * cuda_threads(c) <= 65536,
        lambda c: (c["block_m"] + c["block_n"]) * c["block_k"] <= 16 * c["vec"] * cuda_threads(c),
    ],
)


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
    cuda=Variant(
        source="kernels/matmul_add.cu", entry="matmul_add", heuristic=cuda_heuristic,
        launch=cuda_launch, space=CUDA_SPACE,
        # K stays <= 8192: float32 accumulation over K has an error of about K * 1.8e-8 (1.5e-4
        # at 8192), well inside atol 1e-3 even at the largest of millions of outputs
        buckets=Buckets("MNK", [
            Bucket("skinny", M=(1, 31), N=(1, None), K=(1, None), shapes=[(16, 8192, 8192)]),
            Bucket("small", M=(32, 383), N=(1, None), K=(1, None), shapes=[(256, 4096, 4096)]),
            Bucket("large", M=(384, None), N=(1, None), K=(1, None),
                   shapes=[(1024, 1024, 1024), (4096, 4096, 4096)]),
        ]),
    ),
)
