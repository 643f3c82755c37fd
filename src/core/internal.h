/*
 * internal.h — what the layers of frost share: the graph IR, tensors, nodes, the op-class
 * and engine tables, errors, logging and a small string builder.
 *
 * Names: internal non-static functions are frost__*; file-local helpers are static and
 * unprefixed.  Nothing here is exported from the shared library.
 *
 * How an op plugs in (one folder + one row):
 *   - src/ops/<family>/ defines a frost__op_class per op kind (validation and shape
 *     inference at add time, a describe function for explain) and, per engine, a
 *     frost__op_impl (select / build / workspace / execute / release).
 *   - src/core/registry.c lists every op class in frost__op_classes[FROST__OP_COUNT];
 *     a static assert keeps the table and the enum in step.
 */
#ifndef FROST_CORE_INTERNAL_H
#define FROST_CORE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "frost/frost.h"

#if defined(__GNUC__)
#define FROST__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FROST__PRINTF(a, b)
#endif

/* ------------------------------------------------------------------------------------ */
/* Errors and logging                                                                    */
/* ------------------------------------------------------------------------------------ */

/* Records a thread-local message for frost_last_error() and returns s.  Logs it at
 * level WARN (INVALID_ARGUMENT, NOT_SUPPORTED...) or ERROR (DEVICE_ERROR, INTERNAL). */
frost_status frost__fail(frost_status s, const char *fmt, ...) FROST__PRINTF(2, 3);
/* Clears the thread-local message (called on entry of every public function). */
void frost__clear_error(void);
void frost__log(frost_log_level level, const char *fmt, ...) FROST__PRINTF(2, 3);
int frost__log_enabled(frost_log_level level);

/* ------------------------------------------------------------------------------------ */
/* A growable string; on allocation failure it stays valid and truncated (oom set).     */
/* ------------------------------------------------------------------------------------ */
typedef struct frost__buf {
    char *data; /* NUL-terminated; NULL until the first append */
    size_t len;
    size_t cap;
    int oom;
} frost__buf;

void frost__buf_printf(frost__buf *b, const char *fmt, ...) FROST__PRINTF(2, 3);
void frost__buf_vprintf(frost__buf *b, const char *fmt, va_list ap);
void frost__buf_free(frost__buf *b);
const char *frost__buf_str(const frost__buf *b); /* "" when empty */
/* Copies b into dst (cap bytes including the NUL; truncates; nothing when cap is 0). */
void frost__buf_copy_out(const frost__buf *b, char *dst, size_t cap);

/* ------------------------------------------------------------------------------------ */
/* Dtypes on the host                                                                    */
/* ------------------------------------------------------------------------------------ */
int frost__dtype_is_float(frost_dtype t); /* f32, f16, bf16, f64 */
double frost__load_elem(const void *base, int64_t index, frost_dtype t);
void frost__store_elem(void *base, int64_t index, frost_dtype t, double value);
/* IEEE half and bfloat16, round to nearest even. */
uint16_t frost__f32_to_f16(float f);
float frost__f16_to_f32(uint16_t h);
uint16_t frost__f32_to_bf16(float f);
float frost__bf16_to_f32(uint16_t h);

/* ------------------------------------------------------------------------------------ */
/* Context                                                                               */
/* ------------------------------------------------------------------------------------ */
struct frost__device; /* src/runtime/runtime.h */

struct frost_context {
    frost_device_kind kind;
    int device_index;
    struct frost__device *device; /* CUDA only */
    char name[256];
};

/* ------------------------------------------------------------------------------------ */
/* Ops and engines                                                                       */
/* ------------------------------------------------------------------------------------ */
typedef enum frost__op {
    FROST__OP_SDPA_FWD = 0,
    FROST__OP_SDPA_BWD = 1,
    FROST__OP_LAYERNORM_FWD = 2,
    FROST__OP_LAYERNORM_BWD = 3,
    FROST__OP_RMSNORM_FWD = 4,
    FROST__OP_RMSNORM_BWD = 5,
    FROST__OP_GROUPNORM_FWD = 6,
    FROST__OP_GROUPNORM_BWD = 7,
    FROST__OP_INSTANCENORM_FWD = 8,
    FROST__OP_INSTANCENORM_BWD = 9,
    FROST__OP_BATCHNORM_FWD = 10,
    FROST__OP_BATCHNORM_BWD = 11,
    FROST__OP_ADALAYERNORM_FWD = 12,
    FROST__OP_ADALAYERNORM_BWD = 13,
    FROST__OP_COUNT
} frost__op;

typedef enum frost__engine_id {
    FROST__ENGINE_CUDA = 0, /* asked first: priority order */
    FROST__ENGINE_REF = 1,
    FROST__ENGINE_COUNT
} frost__engine_id;

/* Tensor slots: each op defines an enum of slot names (see src/ops/ * / *.h) and the node
 * keeps one tensor id per slot.  Execute hands the engine one pointer per slot. */
#define FROST__MAX_SLOTS 24

typedef struct frost__tensor {
    char *name;
    frost_dtype dtype;
    int rank;
    int64_t dims[FROST_MAX_RANK];
    int64_t strides[FROST_MAX_RANK]; /* always explicit after add */
    frost_tensor ragged_offset;      /* 0 = none */
    int producer;                    /* index of the node that writes it, or -1 */
} frost__tensor;

typedef struct frost__graph frost__graph;
typedef struct frost__node frost__node;

/* One engine's implementation of one op kind. */
typedef struct frost__op_impl {
    /* Decides support and the configuration in one place (so the two answers cannot
     * disagree).  On OK, *plan is an engine-private allocation (may be NULL); on
     * NOT_SUPPORTED, why holds a sentence naming the constraint and the nearest supported
     * setting.  Never compiles. */
    frost_status (*select)(const frost_context *ctx, const frost__graph *g, const frost__node *n, void **plan,
                           frost__buf *why);
    /* Prepares the plan (may compile kernels); NULL means nothing to do. */
    frost_status (*build)(const frost_context *ctx, const frost__node *n, void *plan, const frost_build_options *opt);
    /* Workspace in bytes; NULL means 0. */
    size_t (*workspace)(const frost__node *n, const void *plan);
    /* ptrs[slot] is the bound pointer of the node's tensor in that slot (NULL if none). */
    frost_status (*execute)(const frost_context *ctx, const frost__node *n, const void *plan, void *const *ptrs,
                            void *workspace, void *stream);
    /* One line describing the chosen configuration, for explain.  NULL: nothing. */
    void (*describe_plan)(const void *plan, frost__buf *out);
    /* Frees the plan (NULL means free()). */
    void (*release)(void *plan);
    /* A sentence on what this engine covers for the op (for frost-info). */
    const char *coverage;
} frost__op_impl;

typedef struct frost__op_class {
    const char *name; /* "sdpa_fwd" */
    int num_slots;
    const char *const *slot_names; /* num_slots names, for messages */
    /* One line of the node's attributes for explain ("b=2 h_q=8 ... causal"). */
    void (*describe)(const frost__graph *g, const frost__node *n, frost__buf *out);
    /* Engine implementations, indexed by frost__engine_id; NULL = not implemented. */
    const frost__op_impl *impl[FROST__ENGINE_COUNT];
    /* Bit i set: slot i is written by the op (the graph records the producer). */
    uint32_t output_slots;
} frost__op_class;

extern const frost__op_class *const frost__op_classes[FROST__OP_COUNT];
extern const char *const frost__engine_names[FROST__ENGINE_COUNT];

/* Does engine e run in ctx at all?  If not, why says so. */
int frost__engine_available(const frost_context *ctx, frost__engine_id e, frost__buf *why);

/* ------------------------------------------------------------------------------------ */
/* Graph IR                                                                              */
/* ------------------------------------------------------------------------------------ */
struct frost__node {
    frost__op op;
    frost_tensor slot[FROST__MAX_SLOTS]; /* tensor id per slot; 0 = unused */
    void *problem;                       /* op-private validated problem (malloc'd; freed with free) */
    /* after build */
    frost__engine_id engine;
    void *plan;
    size_t workspace;
    frost__buf refusals; /* "engine: reason" lines of engines that said no */
};

struct frost__graph {
    frost_context *ctx;
    frost__tensor *tensors; /* index 0 unused; ids 1..num_tensors */
    uint32_t num_tensors, cap_tensors;
    frost__node *nodes;
    int num_nodes, cap_nodes;
    int built;
    size_t workspace; /* max over nodes (nodes run one after another) */
};

/* frost_graph is the public name of frost__graph. */
struct frost_graph {
    frost__graph g;
};

/* Looks up a tensor; NULL when id is 0 or out of range. */
const frost__tensor *frost__tensor_get(const frost__graph *g, frost_tensor id);
/* Creates an output tensor (strides packed row-major unless given).  Returns 0 on OOM. */
frost_tensor frost__tensor_new_output(frost__graph *g, const char *name, frost_dtype dtype, int rank,
                                      const int64_t *dims, const int64_t *strides, frost_tensor ragged);
/* Appends a node (takes ownership of problem on success and failure).  The op's add
 * function has already validated; slots are copied. */
frost_status frost__graph_add_node(frost__graph *g, frost__op op, const frost_tensor *slots, void *problem);
/* Fails with BAD_STATE if g is already built, INVALID_ARGUMENT if g is NULL. */
frost_status frost__graph_check_mutable(const frost__graph *g, const char *fn);
/* "2,3,4" into buf (truncated to cap), for messages that quote dims. */
void frost__dims_str(char *buf, size_t cap, int rank, const int64_t *dims);
/* Nonzero when two different indices of a tensor of these dims and (non-negative) strides
 * reach the same element: outputs must not, or their writes would race. */
int frost__elements_overlap(int rank, const int64_t *dims, const int64_t *strides);

/* Element offset of index (i0..i_{rank-1}) in tensor t, with ragged offsets resolved:
 * for a ragged tensor (dims [b, h, s, d]) the caller passes ragged_start = offsets[b]. */
static inline int64_t frost__offset4(const int64_t *strides, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return i0 * strides[0] + i1 * strides[1] + i2 * strides[2] + i3 * strides[3];
}

/* Reads element i of an int32 or int64 index tensor on the host. */
static inline int64_t frost__load_index(const void *base, frost_dtype t, int64_t i)
{
    return t == FROST_I64 ? ((const int64_t *)base)[i] : (int64_t)((const int32_t *)base)[i];
}

#define FROST__ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define FROST__STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)

#endif /* FROST_CORE_INTERNAL_H */
