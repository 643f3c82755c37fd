/*
 * frost.h — the public C API of frost, a library of deep-learning GPU primitives.
 *
 * A user describes a small graph (tensors and ops such as attention or normalization),
 * builds it for a context (a CPU or a CUDA device), and executes the built graph many
 * times with different data pointers.  frost picks an engine and a kernel configuration
 * for every node, compiles kernels at run time for the exact GPU, caches them on disk, and
 * explains every decision and every refusal in words (frost_graph_explain).
 *
 * Conventions that hold for every function in this header:
 *   - Every function that can fail returns a frost_status.  Nothing aborts, exits or prints
 *     (except through the logger, see frost_set_log_callback).  On failure the thread-local
 *     string returned by frost_last_error() says what was wrong: for INVALID_ARGUMENT it
 *     names the tensor, the dim, the expected and the actual value.
 *   - Objects are opaque; create functions write through an out-pointer; destroy(NULL) is a
 *     harmless no-op.
 *   - Descriptor structs: an all-zero value means the documented defaults.  Fields are only
 *     ever appended; enums have explicit values and only grow.
 *   - Phases are fixed: create -> add_* -> build -> workspace_size -> execute (many times).
 *     A built graph is immutable; frost_graph_execute may be called from several threads at
 *     once on the same graph (each with its own workspace).
 *
 * Layout legend used in comments: b = batch, h = heads (h_q query heads, h_kv key/value
 * heads), s = sequence (s_q, s_kv), d = head dim (d_qk, d_v), C = normalized (hidden) size.
 */
#ifndef FROST_FROST_H
#define FROST_FROST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(FROST_BUILDING_LIBRARY) && defined(__GNUC__)
#define FROST_API __attribute__((visibility("default")))
#else
#define FROST_API
#endif

/* ---------------------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------------------- */
#define FROST_VERSION_MAJOR 0
#define FROST_VERSION_MINOR 1
#define FROST_VERSION_PATCH 0
#define FROST_VERSION_NUMBER (FROST_VERSION_MAJOR * 10000 + FROST_VERSION_MINOR * 100 + FROST_VERSION_PATCH)

/* The library's version as "MAJOR.MINOR.PATCH"; a static string. */
FROST_API const char *frost_version(void);
/* FROST_VERSION_NUMBER of the library actually linked. */
FROST_API int frost_version_number(void);

/* ---------------------------------------------------------------------------------------
 * Status
 * ------------------------------------------------------------------------------------- */
/* X(name, value, description) — the one list that both the enum and the names come from. */
#define FROST_STATUS_MAP(X)                                                                    \
    X(OK, 0, "success")                                                                        \
    X(INVALID_ARGUMENT, 1, "a caller bug: a bad tensor, dim, dtype, pointer or value")         \
    X(NOT_SUPPORTED, 2, "valid, but no engine in this context can run it")                     \
    X(BAD_STATE, 3, "a call out of phase (for example execute before build)")                  \
    X(OUT_OF_MEMORY, 4, "host or device memory could not be allocated")                        \
    X(COMPILE_FAILED, 5, "run-time compilation of a kernel failed")                            \
    X(COMPILE_REQUIRED, 6, "a kernel must be compiled but enforce_precompiled is set")         \
    X(DEVICE_ERROR, 7, "the CUDA driver reported an error")                                    \
    X(NO_DEVICE, 8, "no usable GPU, CUDA driver or NVRTC was found")                           \
    X(CORRUPT_DATA, 9, "serialized or cached bytes are damaged")                               \
    X(INTERNAL, 10, "a frost bug: please report it with the message")

typedef enum frost_status {
#define FROST__STATUS_ENUM(name, value, text) FROST_##name = value,
    FROST_STATUS_MAP(FROST__STATUS_ENUM)
#undef FROST__STATUS_ENUM
} frost_status;

/* "OK", "INVALID_ARGUMENT", ...; "UNKNOWN_STATUS" for a value outside the list. */
FROST_API const char *frost_status_name(frost_status s);
/* Detail of the last failure on this thread ("" if none).  Owned by frost; valid until
 * the next frost call on this thread. */
FROST_API const char *frost_last_error(void);

/* ---------------------------------------------------------------------------------------
 * Logging.  The environment variable FROST_LOG=error|warn|info|debug sets the level
 * (default: off).  Messages go to stderr unless a callback is installed.
 * ------------------------------------------------------------------------------------- */
typedef enum frost_log_level {
    FROST_LOG_OFF = 0,
    FROST_LOG_ERROR = 1,
    FROST_LOG_WARN = 2,
    FROST_LOG_INFO = 3,
    FROST_LOG_DEBUG = 4,
} frost_log_level;

typedef void (*frost_log_fn)(frost_log_level level, const char *message, void *user);
/* Install (or with fn = NULL remove) the log callback; thread-safe. */
FROST_API void frost_set_log_callback(frost_log_fn fn, void *user);
/* Override the level from FROST_LOG. */
FROST_API void frost_set_log_level(frost_log_level level);

/* ---------------------------------------------------------------------------------------
 * Data types
 * ------------------------------------------------------------------------------------- */
typedef enum frost_dtype {
    FROST_DTYPE_INVALID = 0,
    FROST_F32 = 1,
    FROST_F16 = 2,
    FROST_BF16 = 3,
    FROST_F64 = 4,
    FROST_I32 = 5,
    FROST_I64 = 6,
    FROST_U8 = 7,
    FROST_FP8_E4M3 = 8, /* declared; no op accepts it yet */
    FROST_FP8_E5M2 = 9, /* declared; no op accepts it yet */
} frost_dtype;

FROST_API const char *frost_dtype_name(frost_dtype t);
/* Bytes per element; 0 for FROST_DTYPE_INVALID or an unknown value. */
FROST_API size_t frost_dtype_size(frost_dtype t);

/* ---------------------------------------------------------------------------------------
 * Context: where graphs run.
 * ------------------------------------------------------------------------------------- */
typedef enum frost_device_kind {
    FROST_DEVICE_CPU = 0,  /* the reference engine on host memory */
    FROST_DEVICE_CUDA = 1, /* frost's CUDA kernels on device memory */
} frost_device_kind;

typedef struct frost_context_options {
    frost_device_kind kind; /* default CPU */
    int device_index;       /* CUDA ordinal; default 0 */
} frost_context_options;

typedef struct frost_context frost_context;

/* opt may be NULL (CPU).  A CUDA context needs libcuda.so.1 and NVRTC at run time;
 * without them this returns NO_DEVICE and names what was not found. */
FROST_API frost_status frost_context_create(const frost_context_options *opt, frost_context **out);
FROST_API void frost_context_destroy(frost_context *ctx);
/* One line describing the context's device ("cpu" or "NVIDIA H200, sm_90a, 132 SMs, ..."). */
FROST_API const char *frost_context_device_name(const frost_context *ctx);

/* ---------------------------------------------------------------------------------------
 * Graph and tensors
 * ------------------------------------------------------------------------------------- */
typedef struct frost_graph frost_graph;

/* A tensor is a small integer id inside its graph.  0 means "none". */
typedef uint32_t frost_tensor;
#define FROST_TENSOR_NONE ((frost_tensor)0)
/* In an op's output struct: "frost creates this output" (dims inferred, packed strides). */
#define FROST_TENSOR_AUTO ((frost_tensor)0xFFFFFFFFu)

#define FROST_MAX_RANK 8

typedef struct frost_tensor_desc {
    const char *name;   /* copied; may be NULL (frost names it "t<id>") */
    frost_dtype dtype;
    int rank;           /* 1..FROST_MAX_RANK */
    int64_t dims[FROST_MAX_RANK];
    /* Element strides.  All zero: packed row-major.  Otherwise every stride is explicit;
     * a 0 stride on a dim of size > 1 broadcasts, where the op allows it. */
    int64_t strides[FROST_MAX_RANK];
    /* Packed (THD) layouts: an int32 or int64 tensor [b + 1] of cumulative token counts.
     * Element (b, h, s, d) of a ragged tensor lives at
     *     ragged[b] * strides[2] + h * strides[1] + s * strides[2] + d * strides[3]
     * i.e. the batch stride is replaced by the token offset.  The sequence length of batch
     * b is ragged[b+1] - ragged[b] unless a seq_len tensor says otherwise. */
    frost_tensor ragged_offset;
} frost_tensor_desc;

/* Creates an empty graph for ctx.  The graph borrows ctx, which must outlive it. */
FROST_API frost_status frost_graph_create(frost_context *ctx, frost_graph **out);
FROST_API void frost_graph_destroy(frost_graph *g);

/* Declares a tensor that the caller will bind at execute time. */
FROST_API frost_status frost_graph_add_tensor(frost_graph *g, const frost_tensor_desc *d, frost_tensor *out);
/* Reads back a tensor's description (dims and strides resolved; for outputs frost created,
 * what it inferred).  The name pointer stays valid for the graph's lifetime. */
FROST_API frost_status frost_graph_tensor_desc(const frost_graph *g, frost_tensor t, frost_tensor_desc *out);

/* ---------------------------------------------------------------------------------------
 * Scaled dot-product attention
 *
 * Q [b, h_q, s_q, d_qk], K [b, h_kv, s_kv, d_qk], V [b, h_kv, s_kv, d_v], O [b, h_q, s_q, d_v]
 * in any stride order (BHSD, BSHD, ...).  h_q must be a multiple of h_kv (MHA, GQA, MQA);
 * query head i uses KV head i / (h_q / h_kv).  I/O dtype f32, f16 or bf16 (Q, K, V, O, dO
 * and the gradients share one dtype); accumulation fp32 on GPUs, fp64 in the ref engine.
 *
 * Mask: a diagonal band.  Row i of batch b sits on diagonal column c = i (TOP_LEFT) or
 * c = i + s_kv(b) - s_q(b) (BOTTOM_RIGHT), with the actual per-batch lengths.  Key j is
 * admissible iff j <= c + right_bound (when FROST_MASK_RIGHT_BOUND is set) and
 * j > c - left_bound (when FROST_MASK_LEFT_BOUND is set).  Causal = right bound 0.
 * Sliding window of w keys (self included) = left bound w, right bound 0.
 *
 * Rows with no admissible key (and no sink) give O = 0 and LSE = -inf.
 * ------------------------------------------------------------------------------------- */
typedef enum frost_diag_align {
    FROST_DIAG_TOP_LEFT = 0,
    FROST_DIAG_BOTTOM_RIGHT = 1,
} frost_diag_align;

enum {
    FROST_MASK_LEFT_BOUND = 1u << 0,
    FROST_MASK_RIGHT_BOUND = 1u << 1,
};

typedef struct frost_sdpa_attrs {
    double scale;             /* 0 -> 1/sqrt(d_qk); negative allowed */
    uint32_t mask_flags;      /* FROST_MASK_* bits; 0 -> no mask */
    int64_t left_bound;       /* >= 0; used with FROST_MASK_LEFT_BOUND */
    int64_t right_bound;      /* >= 0; used with FROST_MASK_RIGHT_BOUND */
    frost_diag_align align;
} frost_sdpa_attrs;

typedef struct frost_sdpa_desc {
    frost_tensor q, k, v;
    /* Optional additive bias [b or 1, h_q or 1, s_q, s_kv] (f32 or the I/O dtype). */
    frost_tensor bias;
    /* Optional f32 sink logits, one per query head: [1, h_q, 1, 1] (or [h_q]). */
    frost_tensor sink;
    /* Optional int32 [b] (or [b,1,1,1]) actual lengths; each <= the tensor's s dim. */
    frost_tensor seq_len_q, seq_len_kv;
    frost_sdpa_attrs attrs;
} frost_sdpa_desc;

typedef struct frost_sdpa_outputs {
    /* required: 0 or AUTO creates it (Q's dim order, packed, Q's ragged offsets; a ragged O is
     * token-major).  Every row O owns is written: rows past the actual length get 0. */
    frost_tensor o;
    frost_tensor stats; /* optional f32 natural-log LSE [b, h_q, s_q, 1]: 0 none, AUTO creates */
} frost_sdpa_outputs;

FROST_API frost_status frost_graph_add_sdpa(frost_graph *g, const frost_sdpa_desc *d, frost_sdpa_outputs *out);

typedef struct frost_sdpa_backward_desc {
    frost_tensor q, k, v, o, d_o;
    frost_tensor stats;     /* required: the forward's LSE [b, h_q, s_q, 1] f32 */
    frost_tensor bias, sink, seq_len_q, seq_len_kv;
    frost_sdpa_attrs attrs; /* must equal the forward's */
    int deterministic;      /* nonzero: bitwise-identical results run to run */
} frost_sdpa_backward_desc;

typedef struct frost_sdpa_grads {
    frost_tensor d_q, d_k, d_v; /* required: 0 or AUTO creates them */
    frost_tensor d_bias;        /* optional (needs bias): 0 none, AUTO creates with bias's dims, f32 */
    frost_tensor d_sink;        /* optional (needs sink): 0 none, AUTO creates [1, h_q, 1, 1] f32 */
} frost_sdpa_grads;

FROST_API frost_status frost_graph_add_sdpa_backward(frost_graph *g, const frost_sdpa_backward_desc *d,
                                                     frost_sdpa_grads *out);

/* ---------------------------------------------------------------------------------------
 * Normalization: LayerNorm and RMSNorm over the last norm_dims dims of X.
 *
 * X [R..., C...] where C... are the last norm_dims dims (any strides).  Scale and bias have
 * the normalized shape: rank norm_dims, or rank(X) with leading dims 1.  Saved statistics
 * (mean, inv_std) are f32 with X's dims and the normalized dims set to 1.
 * The ref engine takes every tensor at any strides; the cuda engine takes the row dims R...
 * of X, Y, dY, dX and the statistics at any strides too (frost_graph_explain says how it
 * walks them) and needs the normalized dims of every tensor, scale and bias included, packed
 * (one run of stride 1): it refuses other layouts with FROST_NOT_SUPPORTED, naming the
 * tensor and its strides.
 *   LayerNorm: y = (x - mean) * inv_std * w + b,   inv_std = 1/sqrt(var + eps)
 *   RMSNorm:   y = x * inv_std * w + b,             inv_std = 1/sqrt(mean(x^2) + eps)
 * ------------------------------------------------------------------------------------- */
typedef enum frost_norm_phase {
    FROST_NORM_TRAINING = 0,  /* output plus saved statistics when asked for */
    FROST_NORM_INFERENCE = 1, /* output only */
} frost_norm_phase;

typedef struct frost_norm_desc {
    frost_tensor x;
    frost_tensor scale;   /* optional (absent: 1) */
    frost_tensor bias;    /* optional (absent: 0) */
    double epsilon;       /* 0 -> 1e-5 */
    int norm_dims;        /* 0 -> 1 */
    frost_norm_phase phase;
    int zero_centered_scale; /* nonzero: y uses (1 + w) instead of w */
} frost_norm_desc;

typedef struct frost_norm_outputs {
    frost_tensor y;       /* required: 0 or AUTO creates it (X's dims and dtype, packed) */
    frost_tensor mean;    /* LayerNorm training only: 0 none, AUTO creates */
    frost_tensor inv_std; /* training only: 0 none, AUTO creates */
} frost_norm_outputs;

FROST_API frost_status frost_graph_add_layernorm(frost_graph *g, const frost_norm_desc *d, frost_norm_outputs *out);
FROST_API frost_status frost_graph_add_rmsnorm(frost_graph *g, const frost_norm_desc *d, frost_norm_outputs *out);

typedef struct frost_norm_backward_desc {
    frost_tensor x, d_y;
    frost_tensor scale;   /* optional; must match the forward */
    frost_tensor mean;    /* LayerNorm: saved mean (optional: recomputed when absent) */
    frost_tensor inv_std; /* saved inverse std (optional: recomputed when absent) */
    double epsilon;       /* 0 -> 1e-5; used only when statistics are recomputed */
    int norm_dims;        /* 0 -> 1 */
    int has_bias;         /* nonzero: produce d_bias as well */
    int zero_centered_scale;
    int deterministic;    /* nonzero: bitwise-repeatable d_scale / d_bias */
} frost_norm_backward_desc;

typedef struct frost_norm_grads {
    frost_tensor d_x;     /* required: 0 or AUTO creates it */
    frost_tensor d_scale; /* optional (needs scale): 0 none, AUTO creates (f32, scale's dims) */
    frost_tensor d_bias;  /* optional (needs has_bias): 0 none, AUTO creates (f32) */
} frost_norm_grads;

FROST_API frost_status frost_graph_add_layernorm_backward(frost_graph *g, const frost_norm_backward_desc *d,
                                                          frost_norm_grads *out);
FROST_API frost_status frost_graph_add_rmsnorm_backward(frost_graph *g, const frost_norm_backward_desc *d,
                                                        frost_norm_grads *out);

/* ---------------------------------------------------------------------------------------
 * AdaLayerNorm: LayerNorm whose scale and shift vary per sample (modulation computed from
 * a conditioning tensor, as in diffusion transformers).  Same descriptor as LayerNorm, but
 * scale and bias have rank(X) and may carry X's outer dims: each outer dim is 1
 * (broadcast) or equal to X's, the normalized dims equal X's.  Typically X [B, S, C] with
 * scale, bias [B, 1, C].  y = x_hat * w[b] + b[b]  (zero_centered_scale: x_hat * (1 + w[b]) + b[b]).
 * Backward gives d_scale and d_bias (f32): d_scale with the scale's dims; a d_bias the caller
 * declares may take any valid parameter shape, while an AUTO d_bias takes the scale's dims (so
 * it needs a scale: the backward descriptor carries no bias tensor to copy dims from).
 * ------------------------------------------------------------------------------------- */
FROST_API frost_status frost_graph_add_adalayernorm(frost_graph *g, const frost_norm_desc *d, frost_norm_outputs *out);
FROST_API frost_status frost_graph_add_adalayernorm_backward(frost_graph *g, const frost_norm_backward_desc *d,
                                                             frost_norm_grads *out);

/* ---------------------------------------------------------------------------------------
 * Channel normalization: GroupNorm, InstanceNorm and BatchNorm over X [N, C, spatial...]
 * (rank 2..8; the logical dim order is always N, C, then the spatial dims).  The memory
 * layout comes from the strides: contiguous NCHW, channels-last NHWC (C fastest), or any
 * other; outputs frost creates keep X's layout (dim order), so NHWC stays NHWC through
 * forward and backward without a transpose.
 *   GroupNorm:    statistics per (n, group) over C/G channels x spatial; mean, inv_std [N, G]
 *   InstanceNorm: statistics per (n, c) over spatial;                     mean, inv_std [N, C]
 *   BatchNorm:    statistics per c over N x spatial;                      mean, inv_std [C]
 * Scale and bias are per channel: [C] or [1, C, 1, ...] (f32 or X's dtype).
 * BatchNorm running statistics, f32 [C]: inference normalizes with them (required there);
 * training normalizes with batch statistics and, when running_mean / running_var are
 * given, updates them in place:  running = (1 - momentum) * running + momentum * batch,
 * with the batch variance unbiased (times M / (M - 1), M = N x spatial).
 * ------------------------------------------------------------------------------------- */
typedef struct frost_channel_norm_desc {
    frost_tensor x;
    frost_tensor scale;        /* optional (absent: 1) */
    frost_tensor bias;         /* optional (absent: 0) */
    double epsilon;            /* 0 -> 1e-5 */
    int num_groups;            /* GroupNorm: C % num_groups == 0; ignored by the others */
    frost_norm_phase phase;
    int zero_centered_scale;   /* nonzero: y uses (1 + w) */
    frost_tensor running_mean; /* BatchNorm only: f32 [C], read and (training) updated in place */
    frost_tensor running_var;  /* BatchNorm only: f32 [C] */
    double momentum;           /* BatchNorm training: 0 -> 0.1 */
} frost_channel_norm_desc;

FROST_API frost_status frost_graph_add_groupnorm(frost_graph *g, const frost_channel_norm_desc *d,
                                                 frost_norm_outputs *out);
FROST_API frost_status frost_graph_add_instancenorm(frost_graph *g, const frost_channel_norm_desc *d,
                                                    frost_norm_outputs *out);
FROST_API frost_status frost_graph_add_batchnorm(frost_graph *g, const frost_channel_norm_desc *d,
                                                 frost_norm_outputs *out);

/* Backward of the training forward: gradients through the batch statistics. */
typedef struct frost_channel_norm_backward_desc {
    frost_tensor x, d_y;
    frost_tensor scale;    /* optional; must match the forward */
    frost_tensor mean;     /* saved statistics (optional: recomputed from x when absent) */
    frost_tensor inv_std;
    double epsilon;        /* 0 -> 1e-5; used only when statistics are recomputed */
    int num_groups;        /* GroupNorm */
    int has_bias;          /* nonzero: produce d_bias */
    int zero_centered_scale;
    int deterministic;     /* nonzero: bitwise-repeatable d_scale / d_bias */
} frost_channel_norm_backward_desc;

FROST_API frost_status frost_graph_add_groupnorm_backward(frost_graph *g, const frost_channel_norm_backward_desc *d,
                                                          frost_norm_grads *out);
FROST_API frost_status frost_graph_add_instancenorm_backward(frost_graph *g,
                                                             const frost_channel_norm_backward_desc *d,
                                                             frost_norm_grads *out);
FROST_API frost_status frost_graph_add_batchnorm_backward(frost_graph *g, const frost_channel_norm_backward_desc *d,
                                                          frost_norm_grads *out);

/* ---------------------------------------------------------------------------------------
 * Build, explain, execute
 * ------------------------------------------------------------------------------------- */
typedef enum frost_build_policy {
    FROST_BUILD_HEURISTIC = 0, /* build the best-ranked configuration of each node */
    FROST_BUILD_ALL = 1,       /* build every candidate (for autotuning) */
} frost_build_policy;

typedef struct frost_build_options {
    frost_build_policy policy;
    int enforce_precompiled; /* nonzero: a kernel missing from the cache is COMPILE_REQUIRED */
    const char *engine;      /* NULL: any; else only the engine of that name ("ref", "cuda") */
} frost_build_options;

/* Validates, selects an engine and configuration per node, and compiles what is needed.
 * opt may be NULL.  After success the graph is immutable. */
FROST_API frost_status frost_graph_build(frost_graph *g, const frost_build_options *opt);

/* Writes a human-readable report: per node the engine and configuration chosen and every
 * refusal with its reason.  Works before build too (shows validation state).  Writes at
 * most cap bytes including the terminating NUL; *len (if not NULL) receives the full
 * length without the NUL, so a call with cap = 0 sizes the buffer. */
FROST_API frost_status frost_graph_explain(const frost_graph *g, char *buf, size_t cap, size_t *len);

/* Workspace the graph needs at execute time, in bytes (device memory for CUDA contexts,
 * host memory for CPU contexts).  Only after build. */
FROST_API frost_status frost_graph_workspace_size(const frost_graph *g, size_t *bytes);

typedef struct frost_binding {
    frost_tensor tensor;
    void *ptr; /* device pointer (CUDA context) or host pointer (CPU context) */
} frost_binding;

/* Runs the built graph.  Every tensor the graph reads or writes must be bound exactly once
 * (ragged-offset and seq_len tensors included).  workspace may be NULL when the size is 0.
 * stream is a CUstream (NULL: the default stream); ignored for CPU contexts.
 * Thread-safe; does not allocate. */
FROST_API frost_status frost_graph_execute(const frost_graph *g, const frost_binding *bindings, int num_bindings,
                                           void *workspace, void *stream);

/* ---------------------------------------------------------------------------------------
 * Introspection
 * ------------------------------------------------------------------------------------- */
/* Number of engines compiled into the library, and each one's name ("ref", "cuda"). */
FROST_API int frost_engine_count(void);
FROST_API const char *frost_engine_name(int index);

/* Number of op kinds and each one's name ("sdpa_fwd", "rmsnorm_bwd", ...). */
FROST_API int frost_op_count(void);
FROST_API const char *frost_op_name(int index);

/* A sentence saying whether engine `engine_index` can run op `op_index` in ctx, and with
 * which limits.  Returns OK (supported, possibly with limits), NOT_SUPPORTED or
 * INVALID_ARGUMENT.  The sentence is written to buf like frost_graph_explain. */
FROST_API frost_status frost_engine_op_support(const frost_context *ctx, int engine_index, int op_index, char *buf,
                                               size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* FROST_FROST_H */
