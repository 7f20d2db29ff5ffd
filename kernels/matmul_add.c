/* Matrix product plus addend: out = A @ B + C, A is M x K, B is K x N, C and out M x N,
 * all row-major (the seeds' matmul_add).
 *
 * Tunables, prepended as #defines by tunebench:
 *   tile_m, tile_n, tile_k  cache blocking: each OpenMP task owns a tile_m x tile_n block of
 *                           out and walks K in steps of tile_k
 *   mr                      rows of the register micro-tile
 *   nv                      vectors per row of the micro-tile (nv * vec columns)
 *   vec                     floats per vector register (4, 8, 16)
 * TB_DTYPE is the element type.
 */
#include <string.h>

typedef TB_DTYPE real;
typedef real vreal __attribute__((vector_size(vec * sizeof(real))));
#define NR (nv * vec)

static inline vreal vload(const real *p) { vreal v; memcpy(&v, p, sizeof v); return v; }
static inline void vstore(real *p, vreal v) { memcpy(p, &v, sizeof v); }
static inline long lmin(long a, long b) { return a < b ? a : b; }

/* out[i:i+mr, j:j+NR] += A[i:i+mr, k0:k1] @ B[k0:k1, j:j+NR], accumulated in registers */
static inline void micro(const real *restrict A, const real *restrict B, real *restrict out,
                         long i, long j, long k0, long k1, long N, long K)
{
    vreal acc[mr][nv];
    for (int r = 0; r < mr; ++r)
        for (int v = 0; v < nv; ++v) acc[r][v] = vload(out + (i + r) * N + j + v * vec);
    for (long k = k0; k < k1; ++k) {
        vreal b[nv];
        for (int v = 0; v < nv; ++v) b[v] = vload(B + k * N + j + v * vec);
        for (int r = 0; r < mr; ++r) {
            const real a = A[(i + r) * K + k];
            for (int v = 0; v < nv; ++v) acc[r][v] += a * b[v];
        }
    }
    for (int r = 0; r < mr; ++r)
        for (int v = 0; v < nv; ++v) vstore(out + (i + r) * N + j + v * vec, acc[r][v]);
}

/* the same for a ragged edge, one value at a time */
static void edge(const real *restrict A, const real *restrict B, real *restrict out,
                 long i0, long i1, long j0, long j1, long k0, long k1, long N, long K)
{
    for (long i = i0; i < i1; ++i)
        for (long j = j0; j < j1; ++j) {
            real s = out[i * N + j];
            for (long k = k0; k < k1; ++k) s += A[i * K + k] * B[k * N + j];
            out[i * N + j] = s;
        }
}

void matmul_add(const real *restrict A, const real *restrict B, const real *restrict C,
                real *restrict out, int M, int N, int K)
{
    const long tiles_n = (N + tile_n - 1) / tile_n;
    const long tiles = (M + tile_m - 1) / tile_m * tiles_n;
#pragma omp parallel for schedule(static)
    for (long t = 0; t < tiles; ++t) {
        const long i0 = t / tiles_n * tile_m, j0 = t % tiles_n * tile_n;
        const long i1 = lmin(i0 + tile_m, M), j1 = lmin(j0 + tile_n, N);
        for (long i = i0; i < i1; ++i) memcpy(out + i * N + j0, C + i * N + j0, (j1 - j0) * sizeof(real));
        for (long k0 = 0; k0 < K; k0 += tile_k) {
            const long k1 = lmin(k0 + tile_k, K);
            long i = i0;
            for (; i + mr <= i1; i += mr) {
                long j = j0;
                for (; j + NR <= j1; j += NR) micro(A, B, out, i, j, k0, k1, N, K);
                edge(A, B, out, i, i + mr, j, j1, k0, k1, N, K);
            }
            edge(A, B, out, i, i1, j0, j1, k0, k1, N, K);
        }
    }
}
