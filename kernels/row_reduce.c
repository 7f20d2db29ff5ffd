/* Row reduction: out[s] = sum over r of x[s, r], for an S x R row-major matrix ("SR" layout).
 *
 * Tunables, prepended as #defines by tunebench:
 *   vec      floats per vector register (1, 2, 4, 8, 16)
 *   unroll   independent vector accumulators per row piece (hides the add latency)
 *   chunk    row pieces handed to an OpenMP thread at a time (static schedule)
 *   r_split  pieces each row is cut into, summed by different threads, then combined
 * TB_DTYPE is the element type.
 */
#include <stdlib.h>
#include <string.h>

typedef TB_DTYPE real;
typedef real vreal __attribute__((vector_size(vec * sizeof(real))));

static inline vreal vload(const real *p) { vreal v; memcpy(&v, p, sizeof v); return v; }

static real sum_range(const real *restrict p, long n)
{
    vreal acc[unroll];
    for (int u = 0; u < unroll; ++u) acc[u] = (vreal){0};
    const long step = (long)vec * unroll;
    long i = 0;
    for (; i + step <= n; i += step)
        for (int u = 0; u < unroll; ++u) acc[u] += vload(p + i + (long)u * vec);
    for (; i + vec <= n; i += vec) acc[0] += vload(p + i);
    for (int u = 1; u < unroll; ++u) acc[0] += acc[u];
    real s = 0;
    for (int l = 0; l < vec; ++l) s += acc[0][l];
    for (; i < n; ++i) s += p[i];
    return s;
}

void row_reduce(const real *restrict x, real *restrict out, int S, int R)
{
    if (r_split == 1) {
#pragma omp parallel for schedule(static, chunk)
        for (long s = 0; s < S; ++s) out[s] = sum_range(x + s * (long)R, R);
        return;
    }
    const long pieces = (long)S * r_split;
    const long len = ((long)R + r_split - 1) / r_split;
    real *partial = malloc(pieces * sizeof(real));
#pragma omp parallel for schedule(static, chunk)
    for (long t = 0; t < pieces; ++t) {
        const long s = t / r_split, begin = (t % r_split) * len;
        const long end = begin + len < R ? begin + len : R;
        partial[t] = begin < end ? sum_range(x + s * (long)R + begin, end - begin) : 0;
    }
    for (long s = 0; s < S; ++s) {
        real total = 0;
        for (int p = 0; p < r_split; ++p) total += partial[s * r_split + p];
        out[s] = total;
    }
    free(partial);
}
