/* Layer normalisation over R of an S x R row-major matrix ("SR" layout):
 *   y[s, r] = (x[s, r] - mean_s) / sqrt(var_s + eps) * gamma[r] + beta[r]
 *
 * Tunables, prepended as #defines by tunebench:
 *   vec       floats per vector register (1, 2, 4, 8, 16)
 *   unroll    independent vector accumulators in the statistics pass
 *   chunk     rows handed to an OpenMP thread at a time (static schedule)
 *   two_pass  1: mean, then the variance around it (two reads); 0: sum and sum of squares
 *             in one read (var = E[x^2] - mean^2)
 * TB_DTYPE is the element type.
 */
#include <math.h>
#include <string.h>

typedef TB_DTYPE real;
typedef real vreal __attribute__((vector_size(vec * sizeof(real))));

static inline vreal vload(const real *p) { vreal v; memcpy(&v, p, sizeof v); return v; }
static inline void vstore(real *p, vreal v) { memcpy(p, &v, sizeof v); }
static inline real hsum(vreal v) { real s = 0; for (int l = 0; l < vec; ++l) s += v[l]; return s; }

/* sum of (p[i] - shift) and of its square over n values */
static void moments(const real *restrict p, long n, real shift, real *sum, real *sumsq)
{
    vreal s[unroll], q[unroll];
    for (int u = 0; u < unroll; ++u) s[u] = q[u] = (vreal){0};
    const long step = (long)vec * unroll;
    long i = 0;
    for (; i + step <= n; i += step)
        for (int u = 0; u < unroll; ++u) {
            vreal v = vload(p + i + (long)u * vec) - shift;
            s[u] += v;
            q[u] += v * v;
        }
    for (int u = 1; u < unroll; ++u) { s[0] += s[u]; q[0] += q[u]; }
    real ts = hsum(s[0]), tq = hsum(q[0]);
    for (; i < n; ++i) { real v = p[i] - shift; ts += v; tq += v * v; }
    *sum = ts;
    *sumsq = tq;
}

void layernorm(const real *restrict x, const real *restrict gamma, const real *restrict beta,
               real *restrict y, int S, int R, real eps)
{
#pragma omp parallel for schedule(static, chunk)
    for (long s = 0; s < S; ++s) {
        const real *row = x + s * (long)R;
        real *out = y + s * (long)R;
        real sum, sumsq, mean, var;
        moments(row, R, 0, &sum, &sumsq);
        mean = sum / R;
        if (two_pass) {
            moments(row, R, mean, &sum, &sumsq);
            var = sumsq / R;
        } else {
            var = sumsq / R - mean * mean;
        }
        const real rstd = 1 / sqrtf(var + eps);
        long i = 0;
        for (; i + vec <= R; i += vec)
            vstore(out + i, (vload(row + i) - mean) * rstd * vload(gamma + i) + vload(beta + i));
        for (; i < R; ++i) out[i] = (row[i] - mean) * rstd * gamma[i] + beta[i];
    }
}
