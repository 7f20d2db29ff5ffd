/* Layer normalisation over R on the GPU, for an S x R row-major matrix ("SR" layout):
 *   y[s, r] = (x[s, r] - mean_s) / sqrt(var_s + eps) * gamma[r] + beta[r]
 *
 * Params, prepended as #defines by tunebench (the knobs of CINN's reduce schedule):
 *   warp_num           warps per block: a block has warp_num * 32 threads
 *   tree_reduce_num    threads that cooperate on one row (a power of two, 32 .. block size);
 *                      a block holds warp_num * 32 / tree_reduce_num such row groups
 *   spatial_inner_num  rows each row group handles, their loads interleaved;
 *                      rows per block = groups * spatial_inner_num
 *   vec                elements per vector load/store (8 floats are two 16-byte accesses); used
 *                      when R % vec == 0 and x, gamma, beta, y are aligned to it, else one
 *                      element at a time
 * TB_DTYPE is the element type; the arithmetic is float (eps is a float for every dtype).
 *
 * A row whose share per thread fits the register cache (kCacheFloats floats a thread) is read
 * once: the mean, then the variance around it (exact two-pass, from registers), then the write.
 * A longer row is read twice: sum and sum of squares of x - x[s, 0] in one pass (shifted by a
 * value of the row, so that a large mean does not cancel), then the writing pass, whose re-read
 * mostly hits L2.
 * Launch: ceil(S / rows per block) blocks of warp_num * 32 threads, no dynamic shared memory.
 */
#include "reduction.cuh"

/* The rows of one block, row0 onwards, accessed V elements at a time (R % V == 0). kCached:
 * whether rows that fit may be kept in registers (the scalar fallback of a vec > 1 config does
 * not: a second cached copy of the code would raise the register count of the whole kernel). */
template <int V, bool kCached>
__device__ __forceinline__ void layernorm_rows(const real *__restrict__ x,
                                               const real *__restrict__ gamma,
                                               const real *__restrict__ beta, real *__restrict__ y,
                                               int S, int R, float eps, long long row0,
                                               float (*red_a)[kWarps], float (*red_b)[kWarps])
{
    const int group = threadIdx.x / kTree, lane = threadIdx.x % kTree;
    const int packs = R / V;
    const RowGroup<V> rows(x, y, S, R, row0, group);
    const auto &in = rows.in;
    const auto &out = rows.out;
    const auto &valid = rows.valid;
    const Pack<V> *g = reinterpret_cast<const Pack<V> *>(gamma);
    const Pack<V> *b = reinterpret_cast<const Pack<V> *>(beta);
    float mean[kRows], rstd[kRows];

    constexpr int kCache = kCached ? kCacheFloats / (V * kRows) : 0;  // packs per row kept in registers
    if constexpr (kCache > 0) if (packs <= kCache * kTree) {
        float c[kRows][kCache][V];
#pragma unroll
        for (int i = 0; i < kRows; ++i) mean[i] = 0.0f;
        load_cached<V, kCache>(in, packs, lane, c, [&](int i, float v) { mean[i] += v; });
        group_reduce(mean, red_a, Sum(), 0.0f);
        float var[kRows];
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            mean[i] /= R;
            var[i] = 0.0f;
#pragma unroll
            for (int k = 0; k < kCache; ++k)
                if (lane + k * kTree < packs)
#pragma unroll
                    for (int j = 0; j < V; ++j) {
                        const float d = c[i][k][j] - mean[i];
                        var[i] = fmaf(d, d, var[i]);
                    }
        }
        group_reduce(var, red_b, Sum(), 0.0f);
#pragma unroll
        for (int i = 0; i < kRows; ++i) rstd[i] = rsqrtf(var[i] / R + eps);
#pragma unroll
        for (int k = 0; k < kCache; ++k)
            if (lane + k * kTree < packs) {
                const Pack<V> gv = g[lane + k * kTree], bv = b[lane + k * kTree];
#pragma unroll
                for (int i = 0; i < kRows; ++i)
                    if (valid[i]) {
                        Pack<V> o;
#pragma unroll
                        for (int j = 0; j < V; ++j)
                            store_float(&o.v[j], fmaf((c[i][k][j] - mean[i]) * rstd[i],
                                                      to_float(gv.v[j]), to_float(bv.v[j])));
                        out[i][lane + k * kTree] = o;
                    }
            }
        return;
    }

    // sum and sum of squares of x - shift in one read; moments[i] and moments[kRows + i]
    float shift[kRows], moments[2 * kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
        shift[i] = R > 0 ? to_float(reinterpret_cast<const real *>(in[i])[0]) : 0.0f;
        moments[i] = moments[kRows + i] = 0.0f;
    }
    auto accumulate = [&](int i, const Pack<V> &v) {
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const float d = to_float(v.v[j]) - shift[i];
            moments[i] += d;
            moments[kRows + i] = fmaf(d, d, moments[kRows + i]);
        }
    };
    sweep<V>(in, packs, lane, [&](int i, const Pack<V> &v, int) { accumulate(i, v); });
    group_reduce(moments, red_a, Sum(), 0.0f);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
        const float d_mean = moments[i] / R;  // mean of x - shift
        mean[i] = shift[i] + d_mean;
        rstd[i] = rsqrtf(fmaxf(moments[kRows + i] / R - d_mean * d_mean, 0.0f) + eps);
    }

    auto write = [&](const Pack<V> (&v)[kRows], int at) {
        const Pack<V> gv = g[at], bv = b[at];
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            Pack<V> o;
#pragma unroll
            for (int j = 0; j < V; ++j)
                store_float(&o.v[j], fmaf((to_float(v[i].v[j]) - mean[i]) * rstd[i], to_float(gv.v[j]),
                                          to_float(bv.v[j])));
            if (valid[i]) out[i][at] = o;
        }
    };
    int p = lane;  // a position of every row at a time: gamma and beta are loaded once for all
    for (; p + (kUnroll - 1) * kTree < packs; p += kUnroll * kTree) {
        Pack<V> v[kUnroll][kRows];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
            for (int i = 0; i < kRows; ++i) v[u][i] = in[i][p + u * kTree];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) write(v[u], p + u * kTree);
    }
    for (; p < packs; p += kTree) {
        Pack<V> v[kRows];
#pragma unroll
        for (int i = 0; i < kRows; ++i) v[i] = in[i][p];
        write(v, p);
    }
}

extern "C" __global__ void __launch_bounds__(kThreads)
layernorm(const real *__restrict__ x, const real *__restrict__ gamma, const real *__restrict__ beta,
          real *__restrict__ y, int S, int R, float eps)
{
    __shared__ float red_a[2 * kRows][kWarps], red_b[kRows][kWarps];
    constexpr size_t kAlign = alignof(Pack<vec>);
    const bool vectorised = vec > 1 && R % vec == 0 && (uintptr_t)x % kAlign == 0 &&
                            (uintptr_t)y % kAlign == 0 && (uintptr_t)gamma % kAlign == 0 &&
                            (uintptr_t)beta % kAlign == 0;
    const long long blocks = ((long long)S + kRowsPerBlock - 1) / kRowsPerBlock;
    // one iteration per block for any grid the launch gives; the loop only guards a smaller grid
    for (long long b = blockIdx.x; b < blocks; b += gridDim.x) {
        if (vectorised)
            layernorm_rows<vec, true>(x, gamma, beta, y, S, R, eps, b * kRowsPerBlock, red_a, red_b);
        else
            layernorm_rows<1, vec == 1>(x, gamma, beta, y, S, R, eps, b * kRowsPerBlock, red_a, red_b);
        if constexpr (kWarpsPerGroup > 1) __syncthreads();  // red_a, red_b are written again next round
    }
}
