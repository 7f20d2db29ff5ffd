/* Softmax over R on the GPU, for an S x R row-major matrix ("SR" layout):
 *   y[s, r] = exp(x[s, r] - max_s) / sum over r of exp(x[s, r] - max_s)
 *
 * Params, prepended as #defines by tunebench (the knobs of CINN's reduce schedule):
 *   warp_num           warps per block: a block has warp_num * 32 threads
 *   tree_reduce_num    threads that cooperate on one row (a power of two, 32 .. block size);
 *                      a block holds warp_num * 32 / tree_reduce_num such row groups
 *   spatial_inner_num  rows each row group handles, their loads interleaved;
 *                      rows per block = groups * spatial_inner_num
 *   vec                elements per vector load/store (8 floats are two 16-byte accesses); used
 *                      when R % vec == 0 and x, y are aligned to it, else one element at a time
 * TB_DTYPE is the element type; the arithmetic is float.
 *
 * A row whose share per thread fits the register cache (kCacheFloats floats a thread) is read
 * once: max, sum of exps, scaled write from registers. A longer row is read twice: max and sum
 * in one pass (the sum rescaled whenever the max grows), then the writing pass, whose re-read
 * mostly hits L2.
 * Launch: ceil(S / rows per block) blocks of warp_num * 32 threads, no dynamic shared memory.
 */
#include "reduction.cuh"

constexpr float kLog2e = 1.4426950408889634f;

/* e^(x - m) as 2^(x log2e - m log2e): one FMA and one MUFU.EX2 */
__device__ __forceinline__ float exp_shifted(float x, float m_log2e)
{
    return exp2f(fmaf(x, kLog2e, -m_log2e));
}

/* The rows of one block, row0 onwards, accessed V elements at a time (R % V == 0). kCached:
 * whether rows that fit may be kept in registers (the scalar fallback of a vec > 1 config does
 * not: a second cached copy of the code would raise the register count of the whole kernel). */
template <int V, bool kCached>
__device__ __forceinline__ void softmax_rows(const real *__restrict__ x, real *__restrict__ y,
                                             int S, int R, long long row0,
                                             float (*red_max)[kWarps], float (*red_sum)[kWarps])
{
    const int group = threadIdx.x / kTree, lane = threadIdx.x % kTree;
    const int packs = R / V;
    const float neg_inf = -__int_as_float(0x7f800000);
    const RowGroup<V> rows(x, y, S, R, row0, group);
    const auto &in = rows.in;
    const auto &out = rows.out;
    const auto &valid = rows.valid;
    float m[kRows], s[kRows];

    constexpr int kCache = kCached ? kCacheFloats / (V * kRows) : 0;  // packs per row kept in registers
    if constexpr (kCache > 0) if (packs <= kCache * kTree) {
        float c[kRows][kCache][V];
#pragma unroll
        for (int i = 0; i < kRows; ++i) m[i] = neg_inf;
        load_cached<V, kCache>(in, packs, lane, c, [&](int i, float v) { m[i] = fmaxf(m[i], v); });
        group_reduce(m, red_max, Max(), neg_inf);
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            s[i] = 0.0f;
            const float m_log2e = m[i] * kLog2e;
#pragma unroll
            for (int k = 0; k < kCache; ++k)
                if (lane + k * kTree < packs)
#pragma unroll
                    for (int j = 0; j < V; ++j) {
                        c[i][k][j] = exp_shifted(c[i][k][j], m_log2e);
                        s[i] += c[i][k][j];
                    }
        }
        group_reduce(s, red_sum, Sum(), 0.0f);
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            const float inv = 1.0f / s[i];
            if (valid[i])
#pragma unroll
                for (int k = 0; k < kCache; ++k)
                    if (lane + k * kTree < packs) {
                        Pack<V> o;
#pragma unroll
                        for (int j = 0; j < V; ++j) store_float(&o.v[j], c[i][k][j] * inv);
                        out[i][lane + k * kTree] = o;
                    }
        }
        return;
    }

    // online max and sum in one read: when the max grows, the sum so far is rescaled
#pragma unroll
    for (int i = 0; i < kRows; ++i) { m[i] = neg_inf; s[i] = 0.0f; }
    auto update = [&](int i, const Pack<V> &v) {
        float pm = to_float(v.v[0]);
#pragma unroll
        for (int j = 1; j < V; ++j) pm = fmaxf(pm, to_float(v.v[j]));
        const float nm = fmaxf(m[i], pm), nm_log2e = nm * kLog2e;
        float add = 0.0f;
#pragma unroll
        for (int j = 0; j < V; ++j) add += exp_shifted(to_float(v.v[j]), nm_log2e);
        s[i] = s[i] * exp2f((m[i] - nm) * kLog2e) + add;  // m = -inf at first: 0 * 0
        m[i] = nm;
    };
    sweep<V>(in, packs, lane, [&](int i, const Pack<V> &v, int) { update(i, v); });

    float row_max[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) row_max[i] = m[i];
    group_reduce(row_max, red_max, Max(), neg_inf);
#pragma unroll
    for (int i = 0; i < kRows; ++i)  // a thread without elements has m = -inf, s = 0: 0
        s[i] *= exp2f((m[i] - row_max[i]) * kLog2e);
    group_reduce(s, red_sum, Sum(), 0.0f);

    float inv[kRows], m_log2e[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) { inv[i] = 1.0f / s[i]; m_log2e[i] = row_max[i] * kLog2e; }
    auto write = [&](int i, const Pack<V> &v, int at) {
        Pack<V> o;
#pragma unroll
        for (int j = 0; j < V; ++j)
            store_float(&o.v[j], exp_shifted(to_float(v.v[j]), m_log2e[i]) * inv[i]);
        if (valid[i]) out[i][at] = o;
    };
    sweep<V>(in, packs, lane, write);
}

extern "C" __global__ void __launch_bounds__(kThreads)
softmax(const real *__restrict__ x, real *__restrict__ y, int S, int R)
{
    __shared__ float red_max[kRows][kWarps], red_sum[kRows][kWarps];
    const bool vectorised = vec > 1 && R % vec == 0 && (uintptr_t)x % alignof(Pack<vec>) == 0 &&
                            (uintptr_t)y % alignof(Pack<vec>) == 0;
    const long long blocks = ((long long)S + kRowsPerBlock - 1) / kRowsPerBlock;
    // one iteration per block for any grid the launch gives; the loop only guards a smaller grid
    for (long long b = blockIdx.x; b < blocks; b += gridDim.x) {
        if (vectorised)
            softmax_rows<vec, true>(x, y, S, R, b * kRowsPerBlock, red_max, red_sum);
        else
            softmax_rows<1, vec == 1>(x, y, S, R, b * kRowsPerBlock, red_max, red_sum);
        if constexpr (kWarpsPerGroup > 1) __syncthreads();  // red_* are written again next round
    }
}
