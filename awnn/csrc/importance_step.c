/* The element-wise work an adaptive layer adds to a training step, one pass
 * each way (awnn/native.py builds and loads this file; awnn/fast_step.py
 * calls it; the same arithmetic as torch ops is awnn/fast_step.py's
 * reference path).
 *
 * Layer l of an AdaptiveMLP in the `authors` profile, width D, importances
 * renormalised (Eq. 14 of the paper):
 *
 *   E_j = exp(c0 - rate * (j + 1))          (f(j) / S, j < D)
 *   p_j = E_j + e                           (e = (1 - F(D)) / D)
 *   scaled = M * p                          (M: the activations a (B x D) or
 *                                            the next layer's weight (K x D))
 *
 * and in the backward pass, given G = d loss / d scaled (R x D, dense):
 *
 *   d rho  = sum_{r,j} G[r,j] M[r,j] dp_j + c,   dp_j = (1 - s (j + 1)) E_j - sigma p_j
 *   out    = G * p                          (d a, or the next weight's gradient)
 *
 * Only the work a fixed-width layer does not have: the activation and
 * everything else both arms compute stay torch ops (a C pass that took the
 * relu too was 20 us a step faster on SpiralHard, but that is the fixed
 * arm's work as well, and the step ratio would flatter AWNN by it).
 * d rho accumulates in double.  Plain C99, no vendor intrinsics: the build is
 * `cc -O3 -shared -fPIC` on any CPU.
 *
 * Strides: M's rows are `ldm` elements apart (a view of a capacity buffer);
 * every other array is dense.
 */
#include <math.h>
#include <stddef.h>

#define AWNN_STEP(T, SUFFIX, EXP)                                                                          \
void awnn_forward_##SUFFIX(const T *restrict j1, ptrdiff_t d, double c0, double neg_rate, double e,        \
                           T *restrict big_e, T *restrict p,                                               \
                           const T *restrict m, ptrdiff_t rows, ptrdiff_t ldm, T *restrict scaled)         \
{                                                                                                         \
    const T c0_ = (T)c0, rate_ = (T)neg_rate, e_ = (T)e;                                                  \
    for (ptrdiff_t j = 0; j < d; j++) {                                                                   \
        T t = EXP(c0_ + rate_ * j1[j]);                                                                   \
        big_e[j] = t;                                                                                     \
        p[j] = t + e_;                                                                                    \
    }                                                                                                     \
    for (ptrdiff_t r = 0; r < rows; r++) {                                                                \
        const T *restrict mr = m + r * ldm;                                                               \
        T *restrict sr = scaled + r * d;                                                                  \
        for (ptrdiff_t j = 0; j < d; j++)                                                                 \
            sr[j] = mr[j] * p[j];                                                                         \
    }                                                                                                     \
}                                                                                                         \
                                                                                                          \
void awnn_backward_##SUFFIX(const T *g, const T *restrict m, ptrdiff_t rows, ptrdiff_t ldm, ptrdiff_t d,    \
                            const T *restrict j1, const T *restrict big_e, const T *restrict p,            \
                            double s, double sigma, double c, T *restrict grad_rho, T *out)                \
{                                                                                                         \
    /* out may be g (the activations' gradient, in place): each element is read before it is written */ \
    const T s_ = (T)s, sigma_ = (T)sigma;                                                                 \
    double acc = 0.0;                                                                                     \
    for (ptrdiff_t r = 0; r < rows; r++) {                                                                \
        const T *gr = g + r * d;                                                                          \
        const T *restrict mr = m + r * ldm;                                                               \
        T *orow = out + r * d;                                                                            \
        double row = 0.0;                                                                                 \
        for (ptrdiff_t j = 0; j < d; j++) {                                                               \
            T gj = gr[j];                                                                                 \
            T dp = ((T)1 - s_ * j1[j]) * big_e[j] - sigma_ * p[j];                                        \
            row += (double)(gj * mr[j] * dp);                                                             \
            orow[j] = gj * p[j];                                                                          \
        }                                                                                                 \
        acc += row;                                                                                       \
    }                                                                                                     \
    grad_rho[0] = (T)(acc + c);                                                                           \
}

AWNN_STEP(float, f32, expf)
AWNN_STEP(double, f64, exp)

/* the build's check that the library loaded is this source's */
int awnn_abi_version(void) { return 2; }
