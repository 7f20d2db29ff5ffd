/* Softmax over R of an S x R row-major matrix ("SR" layout):
 *   y[s, r] = exp(x[s, r] - max_s) / sum over r of exp(x[s, r] - max_s)
 *
 * Tunables, prepended as #defines by tunebench:
 *   vec     floats per vector register (1, 2, 4, 8, 16)
 *   unroll  independent vectors in flight in the max and sum passes
 *   chunk   rows handed to an OpenMP thread at a time (static schedule)
 *   online  1: max and sum in one read (the sum rescaled when the max grows), then one
 *           writing pass; 0: a max pass, an exp-and-sum pass that stores exp, a scaling pass
 * TB_DTYPE is the element type (float).
 */
#include <string.h>

typedef TB_DTYPE real;
typedef real vreal __attribute__((vector_size(vec * sizeof(real))));
typedef int vint __attribute__((vector_size(vec * sizeof(int))));

static inline vreal vload(const real *p) { vreal v; memcpy(&v, p, sizeof v); return v; }
static inline void vstore(real *p, vreal v) { memcpy(p, &v, sizeof v); }
static inline vreal vsplat(real a) { return (vreal){0} + a; }
static inline vreal vselect(vint mask, vreal a, vreal b) { return (vreal)(((vint)a & mask) | ((vint)b & ~mask)); }
static inline vreal vmax(vreal a, vreal b) { return vselect(a > b, a, b); }
static inline real hmax(vreal v) { real m = v[0]; for (int l = 1; l < vec; ++l) m = v[l] > m ? v[l] : m; return m; }
static inline real hsum(vreal v) { real s = 0; for (int l = 0; l < vec; ++l) s += v[l]; return s; }

/* e^x for x <= 0: 2^(x log2 e) = 2^n * 2^f, 2^f by its Taylor series (relative error < 2e-6) */
static inline vreal vexp(vreal x)
{
    vreal t = x * 1.44269504f;
    t = vselect(t < -126.0f, vsplat(-126.0f), t);
    vint n = __builtin_convertvector(t + 128.0f, vint) - 128; /* floor, as t + 128 > 0 */
    vreal f = (t - __builtin_convertvector(n, vreal)) * 0.693147181f;
    vreal p = 1.0f + f * (1.0f + f * (0.5f + f * (1.0f / 6 + f * (1.0f / 24 + f * (1.0f / 120
              + f * (1.0f / 720 + f * (1.0f / 5040)))))));
    return p * (vreal)((n + 127) << 23);
}

static inline real sexp(real x) { vreal v = vsplat(x); return vexp(v)[0]; }

static real row_max(const real *restrict p, long n)
{
    real m = p[0];
    long i = 0;
    if (n >= (long)vec * unroll) {
        vreal acc[unroll];
        for (int u = 0; u < unroll; ++u) acc[u] = vsplat(p[0]);
        for (; i + (long)vec * unroll <= n; i += (long)vec * unroll)
            for (int u = 0; u < unroll; ++u) acc[u] = vmax(acc[u], vload(p + i + (long)u * vec));
        for (int u = 1; u < unroll; ++u) acc[0] = vmax(acc[0], acc[u]);
        m = hmax(acc[0]);
    }
    for (; i < n; ++i) m = p[i] > m ? p[i] : m;
    return m;
}

/* sum of exp(p[i] - m); stores the exps in out when out is not NULL */
static real exp_sum(const real *restrict p, long n, real m, real *restrict out)
{
    vreal acc[unroll];
    for (int u = 0; u < unroll; ++u) acc[u] = (vreal){0};
    long i = 0;
    for (; i + (long)vec * unroll <= n; i += (long)vec * unroll)
        for (int u = 0; u < unroll; ++u) {
            vreal e = vexp(vload(p + i + (long)u * vec) - m);
            if (out) vstore(out + i + (long)u * vec, e);
            acc[u] += e;
        }
    for (int u = 1; u < unroll; ++u) acc[0] += acc[u];
    real s = hsum(acc[0]);
    for (; i < n; ++i) { real e = sexp(p[i] - m); if (out) out[i] = e; s += e; }
    return s;
}

/* one read: running max and sum per lane, the sum rescaled whenever the max grows */
static real online_max_sum(const real *restrict p, long n, real *sum)
{
    real m = p[0], s = 0;
    long i = 0;
    if (n >= (long)vec * unroll) {
        vreal mx[unroll], sm[unroll];
        for (int u = 0; u < unroll; ++u) { mx[u] = vsplat(p[0]); sm[u] = (vreal){0}; }
        for (; i + (long)vec * unroll <= n; i += (long)vec * unroll)
            for (int u = 0; u < unroll; ++u) {
                vreal v = vload(p + i + (long)u * vec);
                vreal nm = vmax(mx[u], v);
                sm[u] = sm[u] * vexp(mx[u] - nm) + vexp(v - nm);
                mx[u] = nm;
            }
        m = mx[0][0];
        for (int u = 0; u < unroll; ++u) m = hmax(mx[u]) > m ? hmax(mx[u]) : m;
        for (int u = 0; u < unroll; ++u) s += hsum(sm[u] * vexp(mx[u] - m));
    }
    for (; i < n; ++i) {
        if (p[i] > m) { s *= sexp(m - p[i]); m = p[i]; }
        s += sexp(p[i] - m);
    }
    *sum = s;
    return m;
}

void softmax(const real *restrict x, real *restrict y, int S, int R)
{
#pragma omp parallel for schedule(static, chunk)
    for (long s = 0; s < S; ++s) {
        const real *row = x + s * (long)R;
        real *out = y + s * (long)R;
        long i = 0;
        if (online) {
            real sum, m = online_max_sum(row, R, &sum);
            const real inv = 1 / sum;
            for (; i + vec <= R; i += vec) vstore(out + i, vexp(vload(row + i) - m) * inv);
            for (; i < R; ++i) out[i] = sexp(row[i] - m) * inv;
        } else {
            const real m = row_max(row, R);
            const real inv = 1 / exp_sum(row, R, m, out);
            for (; i + vec <= R; i += vec) vstore(out + i, vload(out + i) * inv);
            for (; i < R; ++i) out[i] *= inv;
        }
    }
}
