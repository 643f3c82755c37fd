/*
 * chan_norm_ref_checks.c — part of test_chan_norm_ref: the naive GroupNorm / InstanceNorm /
 * BatchNorm formulas in fp64 (one-pass moments, each element sent to its set by index
 * arithmetic; no code shared with the engine) and the checks of an executed case against
 * them: the forward (y, saved statistics, running statistics) and the backward (closed
 * form, or central finite differences of the naive forward for L = sum d_y * y).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan_norm_ref.h"
#include "ref_test_util.h"

#define F32 FROST_F32

static double eps_of(const cn_case *c)
{
    return c->epsilon > 0 ? c->epsilon : 1e-5;
}

/* ---- element access by logical index ---- */

static int64_t data_off(const tu_buf *b, int64_t n, int64_t ch, int64_t s)
{
    int64_t off = n * b->strides[0] + ch * b->strides[1];
    for (int i = b->rank - 1; i >= 2; --i) {
        off += (s % b->dims[i]) * b->strides[i];
        s /= b->dims[i];
    }
    return off;
}

static double data_at(const run *R, int slot, int64_t n, int64_t ch, int64_t s)
{
    return tu_buf_get(&R->t[slot].buf, data_off(&R->t[slot].buf, n, ch, s));
}

double chan_norm_ref_chan_at(const run *R, int slot, int64_t ch)
{
    const tu_buf *b = &R->t[slot].buf;
    return tu_buf_get(b, ch * b->strides[b->rank == 1 ? 0 : 1]);
}

/* Statistic k of a set: rank 2 [N, G or C] or rank 1 [C]. */
static double stat_at(const run *R, int slot, int64_t k)
{
    const tu_buf *b = &R->t[slot].buf;
    if (b->rank == 1)
        return tu_buf_get(b, k * b->strides[0]);
    return tu_buf_get(b, (k / b->dims[1]) * b->strides[0] + (k % b->dims[1]) * b->strides[1]);
}

/* The set an element of channel ch in sample n belongs to. */
static int64_t set_of(const run *R, int64_t n, int64_t ch)
{
    switch (R->c->kind) {
    case GN:
        return n * R->G + ch / (R->C / R->G);
    case IN:
        return n * R->C + ch;
    default:
        return ch;
    }
}

/* ---- the naive forward in fp64 on dense copies: x[(n*C + c)*S + s], w[c], b[c] ---- */

/* The samples an element loop walks: none when there are no spatial positions, so that a
 * tensor of 2^40 samples of 0 pixels costs no time. */
static int64_t walked_samples(const run *R)
{
    return R->S > 0 ? R->N : 0;
}

/* mean, var and rstd of every set by one-pass moments; acc holds 3 x sets doubles. */
static void naive_stats(const run *R, const double *x, double *acc)
{
    double *mean = acc, *var = acc + R->sets, *cnt = acc + 2 * R->sets;
    memset(acc, 0, sizeof(double) * 3 * (size_t)R->sets);
    for (int64_t n = 0; n < walked_samples(R); ++n)
        for (int64_t ch = 0; ch < R->C; ++ch)
            for (int64_t s = 0; s < R->S; ++s) {
                double v = x[(n * R->C + ch) * R->S + s];
                int64_t k = set_of(R, n, ch);
                mean[k] += v, var[k] += v * v, cnt[k] += 1;
            }
    for (int64_t k = 0; k < R->sets; ++k) {
        mean[k] /= cnt[k];
        var[k] = var[k] / cnt[k] - mean[k] * mean[k];
        var[k] = var[k] > 0 ? var[k] : 0;
    }
}

/* L = Σ dy·y with the set's own statistics (the training forward). */
static double naive_loss(const run *R, const double *x, const double *w, const double *b, const double *dy, double *acc)
{
    double l = 0;
    naive_stats(R, x, acc);
    for (int64_t n = 0; n < walked_samples(R); ++n)
        for (int64_t ch = 0; ch < R->C; ++ch)
            for (int64_t s = 0; s < R->S; ++s) {
                int64_t i = (n * R->C + ch) * R->S + s, k = set_of(R, n, ch);
                double y = (x[i] - acc[k]) / sqrt(acc[R->sets + k] + eps_of(R->c)) * w[ch] + b[ch];
                l += dy[i] * y;
            }
    return l;
}

/* naive_loss of a run's dense copies, as tu_central_diff wants it. */
typedef struct loss_of_dense {
    const run *R;
    dense *d;
} loss_of_dense;

static double dense_loss(void *ctx)
{
    const loss_of_dense *ld = ctx;
    return naive_loss(ld->R, ld->d->x, ld->d->w, ld->d->b, ld->d->dy, ld->d->acc);
}

void chan_norm_ref_load_dense(const run *R, dense *d)
{
    const cn_case *c = R->c;
    for (int64_t n = 0; n < walked_samples(R); ++n)
        for (int64_t ch = 0; ch < R->C; ++ch)
            for (int64_t s = 0; s < R->S; ++s) {
                int64_t i = (n * R->C + ch) * R->S + s;
                d->x[i] = data_at(R, T_X, n, ch, s);
                d->dy[i] = c->backward ? data_at(R, T_DY, n, ch, s) : 0.0;
            }
    for (int64_t ch = 0; ch < R->C; ++ch) {
        double w = c->scale ? chan_norm_ref_chan_at(R, T_SCALE, ch) : 0.0;
        d->w[ch] = c->scale ? (c->zero_centered ? 1.0 + w : w) : 1.0;
        d->b[ch] = c->bias ? chan_norm_ref_chan_at(R, T_BIAS, ch) : 0.0;
    }
}

void chan_norm_ref_check_forward(const run *R, dense *d)
{
    const cn_case *c = R->c;
    const int64_t total = R->N * R->C * R->S, sets = R->sets;
    const int use_running = c->kind == BN && c->inference;
    double *mean = d->acc, *var = d->acc + sets, mag = 1e-300, xmag = 1e-300;
    naive_stats(R, d->x, d->acc);
    for (int64_t n = 0; n < walked_samples(R); ++n)
        for (int64_t ch = 0; ch < R->C; ++ch)
            for (int64_t s = 0; s < R->S; ++s) {
                int64_t i = (n * R->C + ch) * R->S + s, k = set_of(R, n, ch);
                double mu = use_running ? R->rm0[ch] : mean[k];
                double rstd = 1.0 / sqrt((use_running ? R->rv0[ch] : var[k]) + eps_of(c));
                d->ref[i] = (d->x[i] - mu) * rstd * d->w[ch] + d->b[ch];
                d->got[i] = data_at(R, T_Y, n, ch, s);
                mag = fmax(mag, fabs((d->x[i] - mu) * rstd * d->w[ch]) + fabs(d->b[ch]));
                xmag = fmax(xmag, fabs(d->x[i]));
            }
    tu_expect_close("y", d->got, d->ref, total, 1e-12 * mag + tu_subnormal_floor(c->dtype), 2.5 * tu_eps(c->dtype));
    for (int which = 0; which < 2; ++which) { /* saved mean, inv_std */
        if (!R->t[which ? T_RSTD : T_MEAN].id)
            continue;
        for (int64_t k = 0; k < sets; ++k) {
            d->got[k] = stat_at(R, which ? T_RSTD : T_MEAN, k);
            d->ref[k] = which ? 1.0 / sqrt(var[k] + eps_of(c)) : mean[k];
        }
        tu_expect_close(chan_norm_ref_slot_names[which ? T_RSTD : T_MEAN], d->got, d->ref, sets,
                        which ? 1e-30 : 1e-12 * xmag, 2.5 * tu_eps(F32));
    }
    if (c->kind == BN && c->running && !c->inference) {
        const double mom = c->momentum > 0 ? c->momentum : 0.1, m = (double)(R->N * R->S);
        for (int which = 0; which < 2; ++which) {
            double rmag = 1e-300;
            for (int64_t ch = 0; ch < R->C; ++ch) {
                double old = which ? R->rv0[ch] : R->rm0[ch], batch = which ? var[ch] * m / (m - 1) : mean[ch];
                d->ref[ch] = (1 - mom) * old + mom * batch;
                d->got[ch] = chan_norm_ref_chan_at(R, which ? T_RVAR : T_RMEAN, ch);
                rmag = fmax(rmag, fabs((1 - mom) * old) + fabs(mom * batch));
            }
            tu_expect_close(chan_norm_ref_slot_names[which ? T_RVAR : T_RMEAN], d->got, d->ref, R->C,
                            2.5 * tu_eps(F32) * rmag, 2.5 * tu_eps(F32));
        }
    } else if (c->kind == BN && c->running) { /* read, not updated: bit-identical */
        for (int64_t ch = 0; ch < R->C; ++ch)
            if (chan_norm_ref_chan_at(R, T_RMEAN, ch) != R->rm0[ch] ||
                chan_norm_ref_chan_at(R, T_RVAR, ch) != R->rv0[ch])
                tu_failf("running statistics of channel %lld changed although no update was asked", (long long)ch);
    }
}

/* Backward: closed form evaluated here, or finite differences of the naive forward.  With
 * saved statistics the engine works from f32-rounded mean / inv_std, which moves the exact
 * gradient by up to `slack`; finite differences see the exact one, so they forgive that. */
void chan_norm_ref_check_backward(const run *R, dense *d)
{
    const cn_case *c = R->c;
    const int64_t total = R->N * R->C * R->S, sets = R->sets, C = R->C;
    const int fd = c->backward == BWD_FD;
    const int saved_mean = c->saved == 1 || c->saved == 2, saved_rstd = c->saved == 1 || c->saved == 3;
    double *sums = calloc((size_t)(6 * sets + 6 * C + total + 2), sizeof(double));
    double *mu = sums + 2 * sets, *rs = mu + sets, *cnt = rs + sets, *absg = cnt + sets, *pgot = absg + sets;
    double *pref = pgot + 2 * C, *pslack = pref + 2 * C, *slack = pslack + 2 * C;
    double mag = 1e-300, pmag = 1e-300, patol, prtol = 2.5 * tu_eps(F32);
    naive_stats(R, d->x, d->acc);
    for (int64_t k = 0; k < sets; ++k) {
        mu[k] = saved_mean ? stat_at(R, T_MEAN, k) : d->acc[k];
        rs[k] = saved_rstd ? stat_at(R, T_RSTD, k) : 1.0 / sqrt(d->acc[sets + k] + eps_of(c));
        cnt[k] = d->acc[2 * sets + k];
    }
    for (int pass = 0; pass < 2; ++pass) /* 0: set sums and parameter gradients, 1: dx */
        for (int64_t n = 0; n < walked_samples(R); ++n)
            for (int64_t ch = 0; ch < C; ++ch)
                for (int64_t s = 0; s < R->S; ++s) {
                    int64_t i = (n * C + ch) * R->S + s, k = set_of(R, n, ch);
                    double xh = (d->x[i] - mu[k]) * rs[k], g = d->dy[i] * d->w[ch];
                    if (pass == 0) {
                        sums[k] += g, sums[sets + k] += g * xh, absg[k] += fabs(g);
                        pref[ch] += d->dy[i] * xh, pref[C + ch] += d->dy[i];
                        pslack[ch] += tu_norm_param_slack(saved_mean, saved_rstd, mu[k], rs[k], xh, d->dy[i]);
                        pmag = fmax(pmag, (fabs(d->dy[i] * xh) + fabs(d->dy[i])) * (double)(R->N * R->S));
                        continue;
                    }
                    double mg = sums[k] / cnt[k], mgx = sums[sets + k] / cnt[k];
                    d->ref[i] = rs[k] * (g - mg - xh * mgx);
                    d->got[i] = data_at(R, T_DX, n, ch, s);
                    mag = fmax(mag, rs[k] * (fabs(g) + fabs(mg) + fabs(xh * mgx)));
                    /* how far the f32 rounding of saved statistics moves the exact gradient */
                    slack[i] = tu_norm_dx_slack(saved_mean, saved_rstd, mu[k], rs[k], xh, g, mg, mgx, absg[k] / cnt[k]);
                }
    patol = 1e-12 * pmag + 1e-30;
    if (fd) {
        const double h = 1e-6;
        double m = 0, pm = 0;
        loss_of_dense ld = {R, d};
        for (int64_t i = 0; i < total; ++i) { /* dL/dx */
            d->ref[i] = tu_central_diff(&d->x[i], h, dense_loss, &ld);
            m = fmax(m, fabs(d->ref[i]));
        }
        for (int p = 0; p < 2; ++p) /* dL/dw_eff and dL/db */
            for (int64_t ch = 0; ch < C; ++ch) {
                pref[p * C + ch] = tu_central_diff(p == 0 ? &d->w[ch] : &d->b[ch], h, dense_loss, &ld);
                pm = fmax(pm, fabs(pref[p * C + ch]));
            }
        tu_take_slack(d->got, d->ref, slack, total);
        tu_expect_close("d_x (vs finite differences)", d->got, d->ref, total, 2e-5 * fmax(1, m), 1e-4);
        patol = 2e-5 * fmax(1, pm);
        prtol = 1e-4;
    } else {
        tu_expect_close("d_x", d->got, d->ref, total, 1e-12 * mag + tu_subnormal_floor(c->dtype),
                        2.5 * tu_eps(c->dtype));
    }
    for (int64_t ch = 0; ch < C; ++ch) {
        pgot[ch] = R->t[T_DSCALE].id ? chan_norm_ref_chan_at(R, T_DSCALE, ch) : 0;
        pgot[C + ch] = R->t[T_DBIAS].id ? chan_norm_ref_chan_at(R, T_DBIAS, ch) : 0;
    }
    if (fd)
        tu_take_slack(pgot, pref, pslack, C);
    if (R->t[T_DSCALE].id)
        tu_expect_close(fd ? "d_scale (vs finite differences)" : "d_scale", pgot, pref, C, patol, prtol);
    if (R->t[T_DBIAS].id)
        tu_expect_close(fd ? "d_bias (vs finite differences)" : "d_bias", pgot + C, pref + C, C, patol, prtol);
    free(sums);
}
