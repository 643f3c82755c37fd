/*
 * chan_norm_ref_validation.c — part of test_chan_norm_ref: the validation walk of
 * GroupNorm, InstanceNorm and BatchNorm.  Every refusal of the six add functions is
 * provoked once (NULL pointers, unknown tensors, x, attributes, empty reduction sets,
 * scale and bias, running statistics, statistics, outputs, backward gradients): its
 * status must match and frost_last_error() must name the culprit.  A refused call must
 * leave the graph as it was; the accepted edges (statistics shapes, NHWC in and out, empty
 * ops), the one-writer rule, the op names and the built-graph refusal follow.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "chan_norm_ref.h"
#include "ref_test_util.h"

#define F32 FROST_F32
#define F16 FROST_F16
#define INVALID FROST_INVALID_ARGUMENT

typedef frost_channel_norm_desc CD;
typedef frost_norm_outputs CO;
typedef frost_channel_norm_backward_desc BD;
typedef frost_norm_grads BG;

static frost_status fwd(frost_graph *g, int kind, CD d, CO o)
{
    return chan_norm_ref_add_fwd(g, kind, &d, &o);
}

static frost_status bwd(frost_graph *g, int kind, BD d, BG o)
{
    return chan_norm_ref_add_bwd(g, kind, &d, &o);
}

static void expect_dims(frost_graph *g, frost_tensor t, frost_dtype dt, int rank, int64_t d0, int64_t d1)
{
    frost_tensor_desc td;
    TU_OK(frost_graph_tensor_desc(g, t, &td));
    if (td.dtype != dt || td.rank != rank || td.dims[0] != d0 || (rank > 1 && td.dims[1] != d1))
        tu_failf("tensor '%s': got %s rank %d [%lld, %lld], expected %s rank %d [%lld, %lld]", td.name,
                 frost_dtype_name(td.dtype), td.rank, (long long)td.dims[0], (long long)td.dims[1],
                 frost_dtype_name(dt), rank, (long long)d0, (long long)d1);
}

/* Empty ops over huge extents run at once: no element means no work, however many samples
 * or channels the zero dim multiplies (BatchNorm inference on N = 2^40 samples of 0 pixels,
 * InstanceNorm backward on 0 samples of 2^40 channels).  A walk over N or C would take hours
 * and time the test out. */
static void execute_huge_empty_ops(frost_context *cpu)
{
    const int64_t big = (int64_t)1 << 40, bn_x[] = {big, 3, 0}, bn_c[] = {3}, in_x[] = {0, big, 4};
    float cell[4] = {0};
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(cpu, &g));
    const frost_tensor x = tu_add(g, "ex", F32, 3, bn_x, NULL), rm = tu_add(g, "erm", F32, 1, bn_c, NULL),
                       rv = tu_add(g, "erv", F32, 1, bn_c, NULL), xi = tu_add(g, "exi", F32, 3, in_x, NULL),
                       dyi = tu_add(g, "edyi", F32, 3, in_x, NULL);
    CO o = {0};
    BG bo = {0};
    TU_OK(fwd(g, BN, (CD){.x = x, .phase = FROST_NORM_INFERENCE, .running_mean = rm, .running_var = rv}, o));
    TU_OK(frost_graph_add_instancenorm_backward(g, &(BD){.x = xi, .d_y = dyi}, &bo));
    TU_OK(frost_graph_build(g, NULL));
    frost_binding b[8];
    int nb = 0;
    frost_tensor_desc td;
    for (frost_tensor t = 1; nb < 8 && frost_graph_tensor_desc(g, t, &td) == FROST_OK; ++t)
        b[nb++] = (frost_binding){t, cell}; /* every tensor is empty except the running statistics */
    TU_OK(frost_graph_execute(g, b, nb, NULL, NULL));
    frost_graph_destroy(g);
}

void chan_norm_ref_validation_walk(frost_context *cpu)
{
    tu_set_context("test_chan_norm_ref", 0, -1, "validation walk");
    frost_graph *g = NULL;
    TU_OK(frost_graph_create(cpu, &g));
    const int64_t dx[] = {2, 6, 4, 4}, dxb[] = {2, 6, 4, 5}, dxe[] = {2, 6, 0, 4}, dxm1[] = {1, 6, 1, 1};
    const int64_t dc[] = {6}, dcb[] = {7}, dc5[] = {5}, dfull[] = {1, 6, 1, 1}, dlead[] = {2, 6, 1, 1};
    const int64_t dr3[] = {1, 6, 1}, dsg[] = {2, 3}, dsgb[] = {2, 4}, dsnc[] = {2, 6}, d3[] = {3}, dr2[] = {1, 6};
    const int64_t nhwc[] = {96, 1, 24, 6}, bcast[] = {96, 16, 0, 1};
    frost_tensor offs = tu_add(g, "voffs", FROST_I32, 1, d3, NULL);
    frost_tensor_desc rd = {.name = "vx_ragged", .dtype = F32, .rank = 4, .dims = {2, 6, 4, 4}, .ragged_offset = offs};
    frost_tensor xr = 0;
    TU_OK(frost_graph_add_tensor(g, &rd, &xr));
    frost_tensor x = tu_add(g, "vx", F32, 4, dx, NULL), x1 = tu_add(g, "vx_rank1", F32, 1, dc, NULL);
    frost_tensor xi = tu_add(g, "vx_i32", FROST_I32, 4, dx, NULL), xe = tu_add(g, "vx_empty", F32, 4, dxe, NULL);
    frost_tensor xm1 = tu_add(g, "vx_m1", F32, 4, dxm1, NULL), xn = tu_add(g, "vx_nhwc", F16, 4, dx, nhwc);
    frost_tensor dy = tu_add(g, "vdy", F32, 4, dx, NULL), dyb = tu_add(g, "vdy_bad", F32, 4, dxb, NULL);
    frost_tensor dyh = tu_add(g, "vdy_f16", F16, 4, dx, NULL), dyn = tu_add(g, "vdy_nhwc", F16, 4, dx, NULL);
    frost_tensor w = tu_add(g, "vw", F32, 1, dc, NULL), wf = tu_add(g, "vw_full", F32, 4, dfull, NULL);
    frost_tensor wb = tu_add(g, "vw_bad", F32, 1, dcb, NULL), wlb = tu_add(g, "vw_lead_bad", F32, 4, dlead, NULL);
    frost_tensor wr3 = tu_add(g, "vw_rank3", F32, 3, dr3, NULL), wh = tu_add(g, "vw_f16", F16, 1, dc, NULL);
    frost_tensor sg = tu_add(g, "vstats_g", F32, 2, dsg, NULL), sgb = tu_add(g, "vstats_g_bad", F32, 2, dsgb, NULL);
    frost_tensor sc = tu_add(g, "vstats_c", F32, 1, dc, NULL), sh = tu_add(g, "vstats_f16", F16, 2, dsg, NULL);
    frost_tensor snc = tu_add(g, "vstats_nc", F32, 2, dsnc, NULL);
    frost_tensor rm = tu_add(g, "vrm", F32, 1, dc, NULL), rv = tu_add(g, "vrv", F32, 1, dc, NULL);
    frost_tensor rvb = tu_add(g, "vrv_bad", F32, 1, dc5, NULL), rvh = tu_add(g, "vrv_f16", F16, 1, dc, NULL);
    frost_tensor rmr2 = tu_add(g, "vrm_rank2", F32, 2, dr2, NULL);
    frost_tensor y = tu_add(g, "vy", F32, 4, dx, NULL), yb = tu_add(g, "vy_bad", F32, 4, dxb, NULL);
    frost_tensor yh = tu_add(g, "vy_f16", F16, 4, dx, NULL), ybc = tu_add(g, "vy_bcast", F32, 4, dx, bcast);
    frost_tensor last = ybc;
    const frost_tensor A = FROST_TENSOR_AUTO;
    const frost_norm_phase INF = FROST_NORM_INFERENCE;
    CO o = {0};
    BG bo = {0};

    /* NULL pointers, missing and unknown tensors */
    TU_EXPECT(frost_graph_add_groupnorm(NULL, &(CD){.x = x, .num_groups = 3}, &o), INVALID, "graph");
    TU_EXPECT(frost_graph_add_instancenorm(g, NULL, &o), INVALID, "descriptor");
    TU_EXPECT(frost_graph_add_batchnorm(g, &(CD){.x = x}, NULL), INVALID, "output");
    TU_EXPECT(frost_graph_add_batchnorm_backward(NULL, &(BD){.x = x, .d_y = dy}, &bo), INVALID, "graph");
    TU_EXPECT(frost_graph_add_groupnorm_backward(g, NULL, &bo), INVALID, "descriptor");
    TU_EXPECT(frost_graph_add_instancenorm_backward(g, &(BD){.x = x, .d_y = dy}, NULL), INVALID, "output");
    TU_EXPECT(fwd(g, IN, (CD){0}, o), INVALID, "x");
    TU_EXPECT(bwd(g, BN, (BD){.x = x}, bo), INVALID, "d_y");
    TU_EXPECT(bwd(g, GN, (BD){.d_y = dy, .num_groups = 3}, bo), INVALID, "x");
    TU_EXPECT(fwd(g, IN, (CD){.x = 999}, o), INVALID, "999");
    TU_EXPECT(fwd(g, IN, (CD){.x = x, .scale = 555}, o), INVALID, "555");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .running_mean = 444, .running_var = rv}, o), INVALID, "444");
    TU_EXPECT(bwd(g, IN, (BD){.x = x, .d_y = dy, .mean = 333}, bo), INVALID, "333");
    TU_EXPECT(fwd(g, IN, (CD){.x = xr}, o), FROST_NOT_SUPPORTED, "vx_ragged");
    /* x: rank, dtype, attributes */
    TU_EXPECT(fwd(g, IN, (CD){.x = x1}, o), INVALID, "vx_rank1");
    TU_EXPECT(fwd(g, BN, (CD){.x = xi}, o), INVALID, "vx_i32");
    TU_EXPECT(fwd(g, GN, (CD){.x = x}, o), INVALID, "num_groups");
    TU_EXPECT(fwd(g, GN, (CD){.x = x, .num_groups = 4}, o), INVALID, "num_groups");
    TU_EXPECT(fwd(g, GN, (CD){.x = x, .num_groups = -2}, o), INVALID, "num_groups");
    TU_EXPECT(bwd(g, GN, (BD){.x = x, .d_y = dy, .num_groups = 5}, bo), INVALID, "num_groups");
    TU_EXPECT(fwd(g, IN, (CD){.x = x, .epsilon = -1.0}, o), INVALID, "epsilon");
    TU_EXPECT(fwd(g, IN, (CD){.x = x, .epsilon = NAN}, o), INVALID, "epsilon");
    TU_EXPECT(bwd(g, BN, (BD){.x = x, .d_y = dy, .epsilon = -2}, bo), INVALID, "epsilon");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .momentum = 1.5}, o), INVALID, "momentum");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .momentum = -0.1}, o), INVALID, "momentum");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .momentum = NAN}, o), INVALID, "momentum");
    TU_EXPECT(fwd(g, IN, (CD){.x = x, .phase = (frost_norm_phase)7}, o), INVALID, "phase");
    /* empty reduction sets */
    TU_EXPECT(fwd(g, IN, (CD){.x = xe}, o), INVALID, "vx_empty");
    TU_EXPECT(fwd(g, GN, (CD){.x = xe, .num_groups = 2, .phase = INF}, o), INVALID, "vx_empty");
    TU_EXPECT(fwd(g, BN, (CD){.x = xe}, o), INVALID, "vx_empty");
    TU_EXPECT(bwd(g, BN, (BD){.x = xe, .d_y = xe}, bo), INVALID, "vx_empty");
    /* scale and bias */
    TU_EXPECT(fwd(g, IN, (CD){.x = x, .scale = wb}, o), INVALID, "vw_bad");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .bias = wb}, o), INVALID, "vw_bad");
    TU_EXPECT(fwd(g, GN, (CD){.x = x, .num_groups = 3, .scale = wlb}, o), INVALID, "vw_lead_bad");
    TU_EXPECT(fwd(g, IN, (CD){.x = x, .scale = wr3}, o), INVALID, "vw_rank3");
    TU_EXPECT(fwd(g, IN, (CD){.x = x, .bias = wh}, o), INVALID, "vw_f16");
    TU_EXPECT(bwd(g, IN, (BD){.x = x, .d_y = dy, .scale = wb}, bo), INVALID, "vw_bad");
    /* running statistics */
    TU_EXPECT(fwd(g, GN, (CD){.x = x, .num_groups = 3, .running_mean = rm, .running_var = rv}, o), INVALID,
           "running_mean");
    TU_EXPECT(fwd(g, IN, (CD){.x = x, .running_var = rv}, o), INVALID, "running_var");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .phase = INF}, o), INVALID, "running_mean");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .running_mean = rm}, o), INVALID, "running_var");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .running_mean = rm, .running_var = rvb}, o), INVALID, "vrv_bad");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .running_mean = rm, .running_var = rvh}, o), INVALID, "vrv_f16");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .running_mean = rmr2, .running_var = rv}, o), INVALID, "vrm_rank2");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .running_mean = rm, .running_var = rm}, o), INVALID, "vrm");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .scale = w, .running_mean = w, .running_var = rv}, o), INVALID, "vw");
    TU_EXPECT(fwd(g, BN, (CD){.x = xm1, .running_mean = rm, .running_var = rv}, o), INVALID, "running_var");
    /* statistics */
    TU_EXPECT(fwd(g, GN, (CD){.x = x, .num_groups = 3, .phase = INF}, (CO){.mean = A}), INVALID, "mean");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .phase = INF, .running_mean = rm, .running_var = rv}, (CO){.inv_std = A}),
              INVALID, "inv_std");
    TU_EXPECT(fwd(g, GN, (CD){.x = x, .num_groups = 3}, (CO){.mean = sgb}), INVALID, "vstats_g_bad");
    TU_EXPECT(fwd(g, GN, (CD){.x = x, .num_groups = 3}, (CO){.inv_std = sh}), INVALID, "vstats_f16");
    TU_EXPECT(fwd(g, IN, (CD){.x = x}, (CO){.mean = sg}), INVALID, "vstats_g");
    TU_EXPECT(fwd(g, BN, (CD){.x = x}, (CO){.inv_std = snc}), INVALID, "vstats_nc");
    TU_EXPECT(bwd(g, GN, (BD){.x = x, .d_y = dy, .num_groups = 3, .mean = sgb}, bo), INVALID, "vstats_g_bad");
    TU_EXPECT(bwd(g, GN, (BD){.x = x, .d_y = dy, .num_groups = 3, .inv_std = sc}, bo), INVALID, "vstats_c");
    TU_EXPECT(bwd(g, IN, (BD){.x = x, .d_y = dy, .inv_std = sh}, bo), INVALID, "vstats_f16");
    TU_EXPECT(bwd(g, BN, (BD){.x = x, .d_y = dy, .mean = sg}, bo), INVALID, "vstats_g");
    /* outputs */
    TU_EXPECT(fwd(g, IN, (CD){.x = x}, (CO){.y = yb}), INVALID, "vy_bad");
    TU_EXPECT(fwd(g, IN, (CD){.x = x}, (CO){.y = yh}), INVALID, "vy_f16");
    TU_EXPECT(fwd(g, IN, (CD){.x = x}, (CO){.y = ybc}), INVALID, "vy_bcast");
    TU_EXPECT(fwd(g, IN, (CD){.x = x}, (CO){.y = 777}), INVALID, "777");
    TU_EXPECT(fwd(g, IN, (CD){.x = x}, (CO){.y = x}), INVALID, "vx");
    TU_EXPECT(fwd(g, BN, (CD){.x = x, .running_mean = rm, .running_var = rv}, (CO){.mean = rm}), INVALID, "vrm");
    TU_EXPECT(fwd(g, GN, (CD){.x = x, .num_groups = 3}, (CO){.mean = sg, .inv_std = sg}), INVALID, "vstats_g");
    /* backward inputs and gradients */
    TU_EXPECT(bwd(g, IN, (BD){.x = x, .d_y = dyb}, bo), INVALID, "vdy_bad");
    TU_EXPECT(bwd(g, IN, (BD){.x = x, .d_y = dyh}, bo), INVALID, "vdy_f16");
    TU_EXPECT(bwd(g, IN, (BD){.x = x, .d_y = dy}, (BG){.d_scale = A}), INVALID, "d_scale");
    TU_EXPECT(bwd(g, BN, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_bias = A}), INVALID, "d_bias");
    TU_EXPECT(bwd(g, IN, (BD){.x = x, .d_y = dy}, (BG){.d_x = dy}), INVALID, "vdy");
    TU_EXPECT(bwd(g, IN, (BD){.x = x, .d_y = dy}, (BG){.d_x = yh}), INVALID, "vy_f16");
    TU_EXPECT(bwd(g, BN, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_scale = wb}), INVALID, "vw_bad");
    TU_EXPECT(bwd(g, BN, (BD){.x = x, .d_y = dy, .scale = w}, (BG){.d_scale = wh}), INVALID, "vw_f16");

    /* a refused call leaves the graph as it was: the next tensor gets the next id */
    TU_CHECK(tu_add(g, "vnext", F32, 1, dc, NULL) == last + 1);

    /* accepted: ignored num_groups, full-shaped scale, statistics shapes, empty ops */
    o = (CO){.mean = A, .inv_std = A};
    TU_OK(fwd(g, GN, (CD){.x = x, .num_groups = 3, .scale = wf, .bias = w}, o));
    TU_OK(frost_graph_add_groupnorm(g, &(CD){.x = x, .num_groups = 3, .scale = wf}, &o));
    expect_dims(g, o.mean, F32, 2, 2, 3);
    o = (CO){.inv_std = A};
    TU_OK(frost_graph_add_instancenorm(g, &(CD){.x = x, .num_groups = -9, .momentum = 0.5}, &o));
    expect_dims(g, o.inv_std, F32, 2, 2, 6);
    o = (CO){.mean = A};
    TU_OK(frost_graph_add_batchnorm(g, &(CD){.x = x}, &o));
    expect_dims(g, o.mean, F32, 1, 6, 0);
    TU_OK(fwd(g, BN, (CD){.x = xe, .phase = INF, .running_mean = rm, .running_var = rv}, (CO){0}));
    TU_OK(fwd(g, BN, (CD){.x = xm1}, (CO){0})); /* M = 1 without running statistics */
    /* NHWC in, NHWC out, forward and backward */
    o = (CO){0};
    TU_OK(frost_graph_add_groupnorm(g, &(CD){.x = xn, .num_groups = 2}, &o));
    chan_norm_ref_check_made_like_x(g, xn, o.y, "y of an NHWC x");
    bo = (BG){.d_scale = A, .d_bias = A};
    TU_OK(frost_graph_add_groupnorm_backward(g, &(BD){.x = xn, .d_y = dyn, .num_groups = 2, .scale = wf, .has_bias = 1},
                                             &bo));
    chan_norm_ref_check_made_like_x(g, xn, bo.d_x, "d_x of an NHWC x");
    expect_dims(g, bo.d_scale, F32, 4, 1, 6);
    expect_dims(g, bo.d_bias, F32, 4, 1, 6);
    /* one writer per tensor, across nodes */
    TU_OK(fwd(g, IN, (CD){.x = x}, (CO){.y = y, .mean = snc}));
    TU_EXPECT(fwd(g, BN, (CD){.x = x}, (CO){.y = y}), INVALID, "vy");
    TU_EXPECT(fwd(g, IN, (CD){.x = x}, (CO){.inv_std = snc}), INVALID, "vstats_nc");
    TU_EXPECT(bwd(g, IN, (BD){.x = x, .d_y = dy}, (BG){.d_x = y}), INVALID, "vy");
    /* the new ops are listed by name */
    int named = 0;
    for (int i = 0; i < frost_op_count(); ++i)
        for (int k = 0; k < 3; ++k) {
            char fwd_name[32], bwd_name[32];
            snprintf(fwd_name, sizeof fwd_name, "%s_fwd", chan_norm_ref_kind_names[k]);
            snprintf(bwd_name, sizeof bwd_name, "%s_bwd", chan_norm_ref_kind_names[k]);
            named += !strcmp(frost_op_name(i), fwd_name) + !strcmp(frost_op_name(i), bwd_name);
        }
    TU_CHECK(named == 6);

    /* after build nothing can be added */
    TU_OK(frost_graph_build(g, NULL));
    TU_EXPECT(fwd(g, IN, (CD){.x = x}, (CO){0}), FROST_BAD_STATE, "frost_graph_add_instancenorm");
    TU_EXPECT(bwd(g, BN, (BD){.x = x, .d_y = dy}, (BG){0}), FROST_BAD_STATE, "frost_graph_add_batchnorm_backward");
    TU_EXPECT(fwd(g, GN, (CD){.x = x, .num_groups = 3}, (CO){0}), FROST_BAD_STATE, "built");
    frost_graph_destroy(g);
    execute_huge_empty_ops(cpu);
}

