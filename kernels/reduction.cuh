/* What the reduction-family templates (row_reduce, layernorm, softmax) share: the block layout
 * their params imply, vector packs, float accumulation for float, __half and __nv_bfloat16 data,
 * and the reduction over a row group. Included with #include "reduction.cuh": tunebench inlines it, so a
 * kernel's source hash covers it.
 *
 * Needs the #defines warp_num, tree_reduce_num, spatial_inner_num and TB_DTYPE.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

typedef TB_DTYPE real;

constexpr int kThreads = warp_num * 32;
constexpr int kTree = tree_reduce_num;
constexpr int kRows = spatial_inner_num;               // rows per row group
constexpr int kRowsPerBlock = kThreads / kTree * kRows;
constexpr int kWarps = kThreads / 32;
constexpr int kWarpsPerGroup = kTree / 32;
constexpr int kUnroll = (4 + kRows - 1) / kRows;       // vectors per row in flight per iteration
// floats of a row a thread may keep in registers: an eighth of what __launch_bounds__ leaves it
// (8 in a 1024-thread block), at most 32; more spills or costs the occupancy of the other path
constexpr int kCacheFloats = 65536 / kThreads / 8 < 32 ? 65536 / kThreads / 8 : 32;
static_assert(kTree >= 32 && kTree % 32 == 0 && kThreads % kTree == 0,
              "tree_reduce_num must be a multiple of 32 that divides warp_num * 32");

/* V consecutive elements, aligned so that an access is one (or two) vector instructions */
template <int V> struct alignas(V * sizeof(real) < 16 ? V * sizeof(real) : 16) Pack { real v[V]; };

/* The kRows rows of this thread's row group, row0 + group * kRows onwards, as packs: rows past S
 * work on row S - 1 (so loads need no predicate) and are not valid (store nothing). */
template <int V> struct RowGroup {
    const Pack<V> *in[kRows];
    Pack<V> *out[kRows];
    bool valid[kRows];

    __device__ __forceinline__ RowGroup(const real *x, real *y, int S, int R, long long row0, int group)
    {
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
            const long long row = row0 + group * kRows + i;
            const long long safe = min(row, (long long)S - 1);
            in[i] = reinterpret_cast<const Pack<V> *>(x + safe * R);
            out[i] = reinterpret_cast<Pack<V> *>(y + safe * R);
            valid[i] = row < S;
        }
    }
};

__device__ __forceinline__ float to_float(float a) { return a; }
__device__ __forceinline__ float to_float(__half a) { return __half2float(a); }
__device__ __forceinline__ float to_float(__nv_bfloat16 a) { return __bfloat162float(a); }
__device__ __forceinline__ void store_float(float *p, float a) { *p = a; }
__device__ __forceinline__ void store_float(__half *p, float a) { *p = __float2half_rn(a); }
__device__ __forceinline__ void store_float(__nv_bfloat16 *p, float a) { *p = __float2bfloat16_rn(a); }

struct Sum { __device__ float operator()(float a, float b) const { return a + b; } };
struct Max { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };

/* Reduces v[i] over the kTree threads of each row group; every thread gets the result. Lane 0
 * of each warp publishes its warp's value; each warp then reads its group's kWarpsPerGroup values
 * from consecutive words (no bank conflicts). red must not be written again before every thread
 * has passed this call, so successive reductions use different red arrays. */
template <int N, class Op>
__device__ __forceinline__ void group_reduce(float (&v)[N], float (*red)[kWarps], Op op, float identity)
{
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2)
            v[i] = op(v[i], __shfl_xor_sync(0xffffffffu, v[i], offset));
    if constexpr (kWarpsPerGroup > 1) {
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        const int first = warp / kWarpsPerGroup * kWarpsPerGroup;  // the group's first warp
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < N; ++i) red[i][warp] = v[i];
        __syncthreads();
#pragma unroll
        for (int i = 0; i < N; ++i) {
            float w = lane < kWarpsPerGroup ? red[i][first + lane] : identity;
#pragma unroll
            for (int offset = 16; offset > 0; offset /= 2)
                w = op(w, __shfl_xor_sync(0xffffffffu, w, offset));
            v[i] = w;
        }
    }
}

/* Calls use(i, pack, at) for the packs at = lane, lane + kTree, ... < packs of each row i of a
 * row group (in: kRows pointers to packs), kUnroll packs per row at a time with every load issued
 * before the first use, so that the loads of an iteration are in flight together. */
template <int V, class Rows, class Use>
__device__ __forceinline__ void sweep(const Rows &in, int packs, int lane, Use use)
{
    int p = lane;
    for (; p + (kUnroll - 1) * kTree < packs; p += kUnroll * kTree) {
        Pack<V> v[kUnroll][kRows];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
            for (int i = 0; i < kRows; ++i) v[u][i] = in[i][p + u * kTree];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
            for (int i = 0; i < kRows; ++i) use(i, v[u][i], p + u * kTree);
    }
    for (; p < packs; p += kTree)
#pragma unroll
        for (int i = 0; i < kRows; ++i) use(i, in[i][p], p);
}

/* The first pass over rows kept in registers: the packs at = lane + k * kTree (k < kCache,
 * at < packs) of each row of the group into c as floats, use(i, value) called on each. */
template <int V, int kCache, class Rows, class Use>
__device__ __forceinline__ void load_cached(const Rows &in, int packs, int lane, float (&c)[kRows][kCache][V],
                                            Use use)
{
#pragma unroll
    for (int k = 0; k < kCache; ++k)
        if (lane + k * kTree < packs)
#pragma unroll
            for (int i = 0; i < kRows; ++i) {
                const Pack<V> v = in[i][lane + k * kTree];
#pragma unroll
                for (int j = 0; j < V; ++j) {
                    c[i][k][j] = to_float(v.v[j]);
                    use(i, c[i][k][j]);
                }
            }
}
