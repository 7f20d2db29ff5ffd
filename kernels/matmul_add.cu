/* Matrix product plus addend on the GPU: out = A @ B + C, A is M x K, B is K x N, C and out
 * M x N, all row-major (the seeds' matmul_add). The classic shared-memory SGEMM: each block
 * computes a block_m x block_n tile of out, walking K in steps of block_k; each thread keeps a
 * thread_m x thread_n tile of accumulators in registers.
 *
 * Params, prepended as #defines by tunebench:
 *   block_m, block_n, block_k  the block tile; the A and B tiles live in static shared memory
 *   thread_m, thread_n         the thread tile: (block_m / thread_m) * (block_n / thread_n) threads
 *   vec                        floats per global load and store (1, 2, 4: float, float2, float4);
 *                              A is read vec-wide when K % vec == 0, B and C, out when N % vec == 0
 *                              (and the pointer is aligned), else one element at a time
 * TB_DTYPE is the element type (float).
 *
 * No register prefetch of the next K step: it costs the classic 128 x 128 x 8 / 8 x 8 config
 * some 16 registers, i.e. its second block per SM, which hides the load latency as well. A
 * thread's rows and columns are taken in runs of up to 4 (float4 reads from shared memory), the
 * runs of neighbouring threads adjacent: conflict-free shared memory reads, coalesced global
 * stores. Tiles are visited in groups of kGroupM tile rows so that blocks in flight share panels
 * of A and B in L2.
 * Launch: one block per tile of out, (block_m / thread_m) * (block_n / thread_n) threads, no
 * dynamic shared memory.
 */
#include <stdint.h>

typedef TB_DTYPE real;

constexpr int kThreadsM = block_m / thread_m, kThreadsN = block_n / thread_n;
constexpr int kThreads = kThreadsM * kThreadsN;
constexpr int kRunM = thread_m < 4 ? thread_m : 4;     // consecutive rows of a thread's tile
constexpr int kRunN = thread_n < 4 ? thread_n : 4;     // consecutive columns of a thread's tile
constexpr int kOutVec = vec < kRunN ? vec : kRunN;     // floats per C load / out store
constexpr int kPadA = 4;                               // As rows padded: fewer conflicts storing A^T
constexpr int kGroupM = 8;                             // tile rows visited together (L2 reuse)
constexpr int kAVecs = block_m * block_k / vec;        // vectors in an A tile, B tile
constexpr int kBVecs = block_k * block_n / vec;
constexpr int kALoads = (kAVecs + kThreads - 1) / kThreads;  // per thread
constexpr int kBLoads = (kBVecs + kThreads - 1) / kThreads;
static_assert(block_m % thread_m == 0 && block_n % thread_n == 0,
              "the thread tile must divide the block tile");
static_assert(thread_m % kRunM == 0 && thread_n % kRunN == 0 && kRunN % kOutVec == 0,
              "runs of 1, 2 or 4");
static_assert(block_k % vec == 0 && block_n % vec == 0, "vec must divide block_k and block_n");
static_assert(block_m % 4 == 0 && block_n % 4 == 0,
              "tile rows must stay 16-byte aligned in shared memory");

/* V consecutive floats, aligned for one vector access */
template <int V> struct alignas(V * sizeof(real)) Pack { real v[V]; };

__shared__ __align__(16) real As[block_k][block_m + kPadA];  // A tile, transposed: As[k][m]
__shared__ __align__(16) real Bs[block_k][block_n];

/* vec elements from p: one vector load where the row is in the matrix (in_row), all vec elements
 * are (left of them remain in the row) and vectors are aligned (aligned), else one by one, zero
 * past the matrix. */
__device__ __forceinline__ Pack<vec> load_pack(const real *p, bool aligned, bool in_row, int left)
{
    if (aligned && in_row && left > 0)  // the row length % vec == 0: the whole vector is in bounds
        return *reinterpret_cast<const Pack<vec> *>(p);
    Pack<vec> v;
#pragma unroll
    for (int j = 0; j < vec; ++j) v.v[j] = in_row && j < left ? p[j] : 0.0f;
    return v;
}

/* A thread's n values of one k row of a shared tile: runs of kRun consecutive values, run r at
 * (r * kStride + t) * kRun, each run read as one vector. */
template <int kRun, int kStride, int n>
__device__ __forceinline__ void load_fragment(const real *row, int t, float (&out)[n])
{
#pragma unroll
    for (int r = 0; r < n / kRun; ++r) {
        const Pack<kRun> v = *reinterpret_cast<const Pack<kRun> *>(&row[(r * kStride + t) * kRun]);
#pragma unroll
        for (int j = 0; j < kRun; ++j) out[r * kRun + j] = v.v[j];
    }
}

/* Global -> shared memory: the A tile at (m0, k0), transposed, and the B tile at (k0, n0); zero
 * outside the matrices, so that the ragged edges of M, N and K add nothing. */
__device__ __forceinline__ void load_tiles(const real *__restrict__ A, const real *__restrict__ B,
                                           int M, int N, int K, int m0, int n0, int k0,
                                           bool a_vec, bool b_vec)
{
#pragma unroll
    for (int l = 0; l < kALoads; ++l) {
        const int idx = threadIdx.x + l * kThreads;
        if (kAVecs % kThreads == 0 || idx < kAVecs) {
            const int mt = idx / (block_k / vec), kt = idx % (block_k / vec) * vec;  // in the tile
            const int m = m0 + mt, k = k0 + kt;
            const Pack<vec> v = load_pack(A + (long long)m * K + k, a_vec, m < M, K - k);
#pragma unroll
            for (int j = 0; j < vec; ++j) As[kt + j][mt] = v.v[j];
        }
    }
#pragma unroll
    for (int l = 0; l < kBLoads; ++l) {
        const int idx = threadIdx.x + l * kThreads;
        if (kBVecs % kThreads == 0 || idx < kBVecs) {
            const int kt = idx / (block_n / vec), nt = idx % (block_n / vec) * vec;  // in the tile
            const int k = k0 + kt, n = n0 + nt;
            const Pack<vec> v = load_pack(B + (long long)k * N + n, b_vec, k < K, N - n);
            *reinterpret_cast<Pack<vec> *>(&Bs[kt][nt]) = v;
        }
    }
}

extern "C" __global__ void __launch_bounds__(kThreads)
matmul_add(const real *__restrict__ A, const real *__restrict__ B, const real *__restrict__ C,
           real *__restrict__ out, int M, int N, int K)
{
    const int tx = threadIdx.x % kThreadsN, ty = threadIdx.x / kThreadsN;
    const bool a_vec = K % vec == 0 && (uintptr_t)A % alignof(Pack<vec>) == 0;
    const bool b_vec = N % vec == 0 && (uintptr_t)B % alignof(Pack<vec>) == 0;
    const bool out_vec = N % kOutVec == 0 && (uintptr_t)C % alignof(Pack<kOutVec>) == 0 &&
                         (uintptr_t)out % alignof(Pack<kOutVec>) == 0;
    const int tiles_m = (M + block_m - 1) / block_m, tiles_n = (N + block_n - 1) / block_n;
    const long long tiles = (long long)tiles_m * tiles_n;

    // one iteration per block for any grid the launch gives; the loop only guards a smaller grid
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        // tile t -> (tile row, tile column), kGroupM tile rows at a time, column by column
        const long long per_group = (long long)kGroupM * tiles_n;
        const int first_m = (int)(t / per_group) * kGroupM;
        const int group_m = min(tiles_m - first_m, kGroupM);
        const int in_group = (int)(t % per_group);
        const int m0 = (first_m + in_group % group_m) * block_m, n0 = in_group / group_m * block_n;

        float acc[thread_m][thread_n];
#pragma unroll
        for (int i = 0; i < thread_m; ++i)
#pragma unroll
            for (int j = 0; j < thread_n; ++j) acc[i][j] = 0.0f;

        for (int k0 = 0; k0 < K; k0 += block_k) {
            load_tiles(A, B, M, N, K, m0, n0, k0, a_vec, b_vec);
            __syncthreads();
#pragma unroll
            for (int k = 0; k < block_k; ++k) {
                float a[thread_m], b[thread_n];
                load_fragment<kRunM, kThreadsM>(As[k], ty, a);
                load_fragment<kRunN, kThreadsN>(Bs[k], tx, b);
#pragma unroll
                for (int i = 0; i < thread_m; ++i)
#pragma unroll
                    for (int j = 0; j < thread_n; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
            }
            __syncthreads();  // the tiles are overwritten by the next step
        }

        // out = acc + C; accumulator (i, j) belongs to row m0 + row_of(i), column n0 + col_of(j)
#pragma unroll
        for (int i = 0; i < thread_m; ++i) {
            const int m = m0 + (i / kRunM * kThreadsM + ty) * kRunM + i % kRunM;
            if (m >= M) continue;
#pragma unroll
            for (int j = 0; j < thread_n; j += kOutVec) {
                const int n = n0 + (j / kRunN * kThreadsN + tx) * kRunN + j % kRunN;
                const long long at = (long long)m * N + n;
                if (out_vec && n < N) {  // N % kOutVec == 0: the whole vector is in bounds
                    Pack<kOutVec> c = *reinterpret_cast<const Pack<kOutVec> *>(C + at);
#pragma unroll
                    for (int e = 0; e < kOutVec; ++e) c.v[e] += acc[i][j + e];
                    *reinterpret_cast<Pack<kOutVec> *>(out + at) = c;
                } else {
#pragma unroll
                    for (int e = 0; e < kOutVec; ++e)
                        if (n + e < N) out[at + e] = acc[i][j + e] + C[at + e];
                }
            }
        }
    }
}
