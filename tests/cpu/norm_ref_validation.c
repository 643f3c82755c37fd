/*
 * norm_ref_validation.c — part of test_norm_ref: the validation walk of LayerNorm and
 * RMSNorm.  Every refusal of frost_graph_add_{layernorm,rmsnorm}[_backward] is provoked
 * once: its status must match and frost_last_error() must name the culprit (tensor, dim
 * or attribute).  A refused call must leave the graph as it was; the accepted edges
 * (norm_dims = rank, leading-1 scale, rows = 0), the one-writer rule and the built-graph
 * refusal follow.
 */
#include <math.h>

#include "norm_ref.h"
#include "ref_test_util.h"

#define F32 FROST_F32
#define F16 FROST_F16
#define INVALID FROST_INVALID_ARGUMENT

static frost_status fwd(frost_graph *g, int kind, frost_norm_desc d, frost_norm_outputs o)
{
    return kind == LN ? frost_graph_add_layernorm(g, &d, &o) : frost_graph_add_rmsnorm(g, &d, &o);
}

static frost_status bwd(frost_graph *g, int kind, frost_norm_backward_desc d, frost_norm_grads o)
{
    return kind == LN ? frost_graph_add_layernorm_backward(g, &d, &o) : frost_graph_add_rmsnorm_backward(g, &d, &o);
}

typedef frost_norm_desc FD;
typedef frost_norm_outputs FO;
typedef frost_norm_backward_desc BD;
typedef frost_norm_grads BG;

void norm_ref_validation_walk(frost_context *cpu)
{
    tu_set_context("test_norm_ref", 0, -1, "validation walk");
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(cpu, &g));
    const int64_t d3[] = {4, 6, 8}, d3b[] = {4, 6, 9}, st[] = {4, 6, 1}, w1[] = {8}, w1b[] = {7}, w2[] = {6, 8};
    const int64_t wl[] = {1, 1, 8}, wlb[] = {2, 1, 8}, sr[] = {4, 6}, z2[] = {4, 0}, r0[] = {0, 8}, bc[] = {0, 8, 1};
    frost_tensor x = tu_add(g, "vx", F32, 3, d3, NULL), xi = tu_add(g, "vx_i32", FROST_I32, 3, d3, NULL);
    frost_tensor xz = tu_add(g, "vx_zero", F32, 2, z2, NULL), xr0 = tu_add(g, "vx_rows0", F32, 2, r0, NULL);
    frost_tensor w = tu_add(g, "vw", F32, 1, w1, NULL), wb = tu_add(g, "vw_bad", F32, 1, w1b, NULL);
    frost_tensor w2t = tu_add(g, "vw2", F32, 2, w2, NULL), wlt = tu_add(g, "vw_lead", F32, 3, wl, NULL);
    frost_tensor wlbt = tu_add(g, "vw_lead_bad", F32, 3, wlb, NULL), wi = tu_add(g, "vw_i32", FROST_I32, 1, w1, NULL);
    frost_tensor wh = tu_add(g, "vw_f16", F16, 1, w1, NULL);
    frost_tensor y = tu_add(g, "vy", F32, 3, d3, NULL), yb = tu_add(g, "vy_bad", F32, 3, d3b, NULL);
    frost_tensor yh = tu_add(g, "vy_f16", F16, 3, d3, NULL), ybc = tu_add(g, "vy_bcast", F32, 3, d3, bc);
    frost_tensor s = tu_add(g, "vstats", F32, 3, st, NULL), sb = tu_add(g, "vstats_bad", F32, 3, d3, NULL);
    frost_tensor sh = tu_add(g, "vstats_f16", F16, 3, st, NULL), srk = tu_add(g, "vstats_rank", F32, 2, sr, NULL);
    frost_tensor dy = tu_add(g, "vdy", F32, 3, d3, NULL), dyb = tu_add(g, "vdy_bad", F32, 3, d3b, NULL);
    frost_tensor dyh = tu_add(g, "vdy_f16", F16, 3, d3, NULL), dsh = tu_add(g, "vdscale_f16", F16, 1, w1, NULL);
    frost_tensor last = dsh;
    const frost_tensor A = FROST_TENSOR_AUTO;
    FO o = {0};
    BG bo = {0};

    TU_EXPECT(frost_graph_add_rmsnorm(NULL, &(FD){.x = x}, &o), INVALID, "graph");
    TU_EXPECT(frost_graph_add_rmsnorm(g, NULL, &o), INVALID, "descriptor");
    TU_EXPECT(frost_graph_add_layernorm(g, &(FD){.x = x}, NULL), INVALID, "output");
    TU_EXPECT(frost_graph_add_layernorm_backward(NULL, &(BD){.x = x, .d_y = dy}, &bo), INVALID, "graph");
    TU_EXPECT(frost_graph_add_rmsnorm_backward(g, NULL, &bo), INVALID, "descriptor");
    TU_EXPECT(fwd(g, LN, (FD){0}, (FO){0}), INVALID, "x");
    TU_EXPECT(fwd(g, RMS, (FD){.x = 999}, (FO){0}), INVALID, "999");
    TU_EXPECT(fwd(g, RMS, (FD){.x = x, .scale = 555}, (FO){0}), INVALID, "555");
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .norm_dims = 4}, (FO){0}), INVALID, "norm_dims");
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .norm_dims = -1}, (FO){0}), INVALID, "norm_dims");
    TU_EXPECT(fwd(g, RMS, (FD){.x = xi}, (FO){0}), INVALID, "vx_i32");
    TU_EXPECT(fwd(g, RMS, (FD){.x = xz}, (FO){0}), INVALID, "vx_zero");
    TU_EXPECT(fwd(g, RMS, (FD){.x = x, .scale = wh}, (FO){0}), INVALID, "vw_f16");
    /* f32 x: one dtype for the parameters, said once */
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .scale = wh}, (FO){0}), INVALID, "dtype expected f32 (x's dtype), got f16");
    TU_EXPECT(fwd(g, RMS, (FD){.x = x, .scale = wi}, (FO){0}), INVALID, "vw_i32");
    TU_EXPECT(fwd(g, RMS, (FD){.x = x, .scale = wb}, (FO){0}), INVALID, "vw_bad");
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .bias = wb}, (FO){0}), INVALID, "vw_bad");
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .scale = wlbt}, (FO){0}), INVALID, "vw_lead_bad");
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .scale = w2t}, (FO){0}), INVALID, "vw2"); /* rank 2 with norm_dims 1 */
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .epsilon = -1.0}, (FO){0}), INVALID, "epsilon");
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .epsilon = NAN}, (FO){0}), INVALID, "epsilon");
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .phase = (frost_norm_phase)7}, (FO){0}), INVALID, "phase");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = yb}), INVALID, "vy_bad");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = yh}), INVALID, "vy_f16");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = ybc}), INVALID, "vy_bcast");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = x}), INVALID, "vx");
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .scale = w}, (FO){.y = w}), INVALID, "vw");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.y = 777}), INVALID, "777");
    TU_EXPECT(fwd(g, RMS, (FD){.x = x}, (FO){.y = A, .mean = A}), INVALID, "mean");
    TU_EXPECT(fwd(g, LN, (FD){.x = x, .phase = FROST_NORM_INFERENCE}, (FO){.y = A, .inv_std = A}), INVALID, "inv_std");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.mean = sb}), INVALID, "vstats_bad");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.inv_std = sh}), INVALID, "vstats_f16");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.inv_std = srk}), INVALID, "vstats_rank");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.mean = s, .inv_std = s}), INVALID, "vstats");
    /* backward */
    TU_EXPECT(bwd(g, LN, (BD){.x = x}, (BG){0}), INVALID, "d_y");
    TU_EXPECT(bwd(g, LN, (BD){.d_y = dy}, (BG){0}), INVALID, "x");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dyb}, (BG){0}), INVALID, "vdy_bad");
    TU_EXPECT(bwd(g, RMS, (BD){.x = x, .d_y = dyh}, (BG){0}), INVALID, "vdy_f16");
    TU_EXPECT(bwd(g, RMS, (BD){.x = x, .d_y = dy, .mean = s}, (BG){0}), INVALID, "mean");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .mean = sb}, (BG){0}), INVALID, "vstats_bad");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .inv_std = sh}, (BG){0}), INVALID, "vstats_f16");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .scale = wb}, (BG){0}), INVALID, "vw_bad");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .norm_dims = 9}, (BG){0}), INVALID, "norm_dims");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .epsilon = -2}, (BG){0}), INVALID, "epsilon");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){.d_scale = A}), INVALID, "d_scale");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_bias = A}), INVALID, "d_bias");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){.d_x = dy}), INVALID, "vdy");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){.d_x = yb}), INVALID, "vy_bad");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_scale = dsh}), INVALID, "vdscale_f16");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_scale = wb}), INVALID, "vw_bad");

    /* a refused call leaves the graph as it was: the next tensor gets the next id */
    TU_CHECK(tu_add(g, "vnext", F32, 1, w1, NULL) == last + 1);

    /* accepted edges: norm_dims == rank, leading-1 scale, rank-2 scale over 2 dims, rows = 0 */
    o = (FO){0};
    TU_OK(frost_graph_add_rmsnorm(g, &(FD){.x = x, .norm_dims = 3}, &o));
    TU_CHECK(o.y != 0 && o.y != A && o.mean == 0 && o.inv_std == 0);
    TU_OK(fwd(g, LN, (FD){.x = x, .scale = wlt, .bias = w}, (FO){0}));
    TU_OK(fwd(g, LN, (FD){.x = x, .scale = w2t, .norm_dims = 2}, (FO){0}));
    TU_OK(fwd(g, RMS, (FD){.x = xr0, .scale = w}, (FO){.inv_std = A}));
    /* one writer per tensor: across nodes and within one call */
    TU_OK(fwd(g, LN, (FD){.x = x}, (FO){.y = y, .mean = s}));
    TU_EXPECT(fwd(g, RMS, (FD){.x = x}, (FO){.y = y}), INVALID, "vy");
    TU_EXPECT(fwd(g, LN, (FD){.x = x}, (FO){.inv_std = s}), INVALID, "vstats");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){.d_x = y}), INVALID, "vy");
    bo = (BG){.d_scale = A, .d_bias = A};
    TU_OK(frost_graph_add_layernorm_backward(g, &(BD){.x = x, .d_y = dy, .scale = wlt, .has_bias = 1}, &bo));
    frost_tensor_desc td;
    TU_OK(frost_graph_tensor_desc(g, bo.d_scale, &td)); /* f32 with scale's dims */
    TU_CHECK(td.dtype == F32 && td.rank == 3 && td.dims[0] == 1 && td.dims[2] == 8);
    TU_OK(frost_graph_tensor_desc(g, bo.d_x, &td));
    TU_CHECK(td.dtype == F32 && td.rank == 3 && td.dims[1] == 6);

    /* after build nothing can be added */
    TU_OK(frost_graph_build(g, NULL));
    TU_EXPECT(fwd(g, RMS, (FD){.x = x}, (FO){0}), FROST_BAD_STATE, "frost_graph_add_rmsnorm");
    TU_EXPECT(bwd(g, LN, (BD){.x = x, .d_y = dy}, (BG){0}), FROST_BAD_STATE, "frost_graph_add_layernorm_backward");
    frost_graph_destroy(g);
}

