"""What the reduction-family suites (row_reduce, layernorm, softmax; rows of length R in "SR"
layout) share: the CPU knobs, and the CUDA knobs, launch and heuristic of CINN's reduce schedule.
Not a suite itself (pytest collects only test_*.py)."""

from tunebench import Bucket, Buckets, Space, Variant, pow2


def cpu_space(**extra) -> Space:
    """vec floats per vector, unroll independent accumulators, chunk rows per OpenMP hand-out,
    plus the kernel's own algorithmic knobs."""
    return Space({"vec": pow2(1, 16), "unroll": pow2(1, 8), "chunk": pow2(1, 16), **extra},
                 constraints=[lambda vec, unroll: vec * unroll <= 64])


def cuda_launch(config, shape):
    """One block of warp_num * 32 threads per (block / tree_reduce_num) * spatial_inner_num rows.

    S is an int32, so the grid never exceeds the 2**31 - 1 blocks that grid.x allows."""
    S = shape[0]
    threads = config["warp_num"] * 32
    rows = max(1, threads // config["tree_reduce_num"]) * config["spatial_inner_num"]
    return (max(1, -(-S // rows)),), (threads,)


def cuda_heuristic(shape):
    """Today's rule, as frameworks (CINN, Paddle) size a reduction: one row per block, as many
    threads as the row has elements rounded up to a power of two (32 to 1024), float4 loads."""
    R = shape[1]
    tree = min(1024, max(32, 1 << (R - 1).bit_length()))
    return {"warp_num": tree // 32, "tree_reduce_num": tree, "spatial_inner_num": 1, "vec": 4}


#: The knobs of CINN's reduce schedule. vec 8 is one 16-byte access for float16 and two for
#: float32 (the space cannot depend on the dtype); every config passing the constraints is correct
#: for every shape, odd R included (vector accesses only where R % vec == 0). A 1024-thread block
#: leaves a thread 64 registers, too few for 3 or 4 rows at a time without spilling.
CUDA_SPACE = Space(
    {"warp_num": pow2(1, 32), "tree_reduce_num": pow2(32, 1024), "spatial_inner_num": (1, 4),
     "vec": [1, 2, 4, 8]},
    constraints=[
        lambda warp_num, tree_reduce_num: tree_reduce_num <= warp_num * 32,
        lambda warp_num, spatial_inner_num: warp_num * spatial_inner_num <= 64,
    ],
)


def cuda_variant(source: str, entry: str, buckets: Buckets, dtypes=("float32",)) -> Variant:
    return Variant(source=source, entry=entry, heuristic=cuda_heuristic, launch=cuda_launch,
                   space=CUDA_SPACE, dtypes=dtypes, buckets=buckets)


def normalisation_buckets(target: str) -> Buckets:
    """The buckets of the row-wise normalisations (layernorm, softmax). On the GPU the largest
    shapes move 1 GB a call in float32 (512 MB in float16); few_rows keeps at most 15 blocks busy
    (one per row): latency more than bandwidth."""
    if target == "cuda":
        return Buckets("SR", [
            Bucket("few_rows", S=(1, 15), R=(1, None), shapes=[(8, 262144)]),
            Bucket("wide", S=(16, None), R=(2049, None), shapes=[(16384, 8192), (4096, 32768)]),
            Bucket("narrow", S=(16, None), R=(1, 2048), shapes=[(262144, 512), (131072, 1024)], weight=2),
        ])
    return Buckets("SR", [
        Bucket("few_rows", S=(1, 15), R=(1, None), shapes=[(4, 65536)]),
        Bucket("wide", S=(16, None), R=(2049, None), shapes=[(256, 8192)]),
        Bucket("narrow", S=(16, None), R=(1, 2048), shapes=[(4096, 512), (2048, 1024)], weight=2),
    ])
