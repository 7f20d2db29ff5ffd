/* Row reduction on the GPU: out[s] = sum over r of x[s, r], for an S x R row-major matrix
 * ("SR" layout).
 *
 * Params, prepended as #defines by tunebench (the knobs of CINN's reduce schedule):
 *   warp_num           warps per block: a block has warp_num * 32 threads
 *   tree_reduce_num    threads that cooperate on one row (a power of two, 32 .. block size);
 *                      a block holds warp_num * 32 / tree_reduce_num such row groups
 *   spatial_inner_num  rows each row group reduces, their loads interleaved for more bytes in
 *                      flight; rows per block = groups * spatial_inner_num
 *   vec                elements per vector load (8 floats are two 16-byte loads); used when
 *                      R % vec == 0 and x is aligned to it, else elements load one at a time
 * TB_DTYPE is the element type; sums accumulate in float.
 * Launch: ceil(S / rows per block) blocks of warp_num * 32 threads, no dynamic shared memory.
 */
#include "reduction.cuh"

template <int V>
__device__ __forceinline__ float pack_sum(const Pack<V> &p)
{
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < V; ++j) s += to_float(p.v[j]);
    return s;
}

/* The rows of one block, row0 onwards, read V elements at a time (R % V == 0). */
template <int V>
__device__ __forceinline__ void reduce_rows(const real *__restrict__ x, real *__restrict__ out,
                                            int S, int R, long long row0, float (*red)[kWarps])
{
    const int group = threadIdx.x / kTree, lane = threadIdx.x % kTree;
    const int packs = R / V;
    const Pack<V> *rows[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
        // rows past S read row S - 1 (so loads need no predicate); their sums are dropped
        const long long row = min(row0 + group * kRows + i, (long long)S - 1);
        rows[i] = reinterpret_cast<const Pack<V> *>(x + row * R);
    }
    float acc[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) acc[i] = 0.0f;

    sweep<V>(rows, packs, lane, [&](int i, const Pack<V> &v, int) { acc[i] += pack_sum<V>(v); });

    group_reduce(acc, red, Sum(), 0.0f);
    if (lane == 0)
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            const long long row = row0 + group * kRows + i;
            if (row < S) store_float(out + row, acc[i]);
        }
}

extern "C" __global__ void __launch_bounds__(kThreads)
row_reduce(const real *__restrict__ x, real *__restrict__ out, int S, int R)
{
    __shared__ float red[kRows][kWarps];
    const bool vectorised = vec > 1 && R % vec == 0 && (uintptr_t)x % alignof(Pack<vec>) == 0;
    const long long blocks = ((long long)S + kRowsPerBlock - 1) / kRowsPerBlock;
    // one iteration per block for any grid the launch gives; the loop only guards a smaller grid
    for (long long b = blockIdx.x; b < blocks; b += gridDim.x) {
        if (vectorised)
            reduce_rows<vec>(x, out, S, R, b * kRowsPerBlock, red);
        else
            reduce_rows<1>(x, out, S, R, b * kRowsPerBlock, red);
        if constexpr (kWarpsPerGroup > 1) __syncthreads();  // red is written again next round
    }
}
