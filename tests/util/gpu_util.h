/*
 * gpu_util.h — helpers the GPU tests share: whole-allocation device copies of guarded
 * buffers, the whole-allocation comparison of two copies of one output, and graph
 * plumbing (declaring a buffer as a tensor, binding ids, running on host or device).
 *
 * A guarded tu_buf travels to the device whole, guards and stride gaps included, and comes
 * back whole, so an element the kernel should not touch is still NaN after the round trip
 * and an unwritten one is still NaN too: comparing two copies of an output allocation
 * element by element (NaN must meet NaN) catches both.
 */
#ifndef FROST_TEST_GPU_UTIL_H
#define FROST_TEST_GPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"
#include "test_util.h"

/* ---- device copies of guarded buffers ---- */
typedef struct tu_dev_buf {
    void *base;  /* the device allocation */
    char *alloc; /* where the host allocation's first byte lives on the device */
    size_t bytes;
} tu_dev_buf;

/* Bytes of b's whole allocation: the span and both guards. */
size_t tu_buf_bytes(const tu_buf *b);
/* Copies b's whole allocation to a new device allocation; returns the device address of
 * b's element 0 (NULL when b is absent, i.e. b->alloc is NULL).  Element 0 sits `shift`
 * bytes past a 16-byte boundary: 0 keeps 16-byte aligned rows possible, a shift of one
 * element breaks them while keeping natural alignment. */
void *tu_to_device(const frost__device *dev, const tu_buf *b, tu_dev_buf *d, size_t shift);
/* Copies the whole allocation back into `host` (d->bytes bytes); nothing when absent. */
void tu_from_device(const frost__device *dev, const tu_dev_buf *d, void *host);
/* Frees the device allocation (absent: nothing). */
void tu_dev_buf_free(const frost__device *dev, tu_dev_buf *d);

/* ---- comparison ---- */
/* got and ref are two copies of one output (same layout), compared over the whole
 * allocation: NaN (never written) must match NaN, infinities must match exactly, finite
 * values must agree within atol + rtol * |ref|.  Records a failure that prints the worst
 * element; returns the number of bad elements. */
int64_t tu_compare_whole(const char *what, const tu_buf *got, const tu_buf *ref, double atol, double rtol);

/* ---- graph plumbing ---- */
/* Declares b as a tensor of g with b's own dims and strides. */
frost_tensor tu_add_tensor(frost_graph *g, const char *name, const tu_buf *b);
/* Declares a 4-D view of b's storage (dims4, st4), with ragged offsets `ragged` (0 none):
 * a ragged [b, h, s, d] operand stored as [tokens, h, d]. */
frost_tensor tu_add_tensor_4d(frost_graph *g, const char *name, const tu_buf *b, const int64_t dims4[4],
                              const int64_t st4[4], frost_tensor ragged);
/* Appends {ids[k], ptrs[k]} to list for every k < n with ids[k] != 0; returns the count. */
int tu_bind(const frost_tensor *ids, void *const *ptrs, int n, frost_binding *list);
/* Executes a built graph on host pointers, with a malloc'd workspace of the size it asks. */
void tu_execute_host(frost_graph *g, const frost_binding *list, int n);

/* A graph's tensors by slot, for tu_run_ref and tu_run_cuda. */
typedef struct tu_slots {
    int count;                /* slots */
    const frost_tensor *ids;  /* ids[k]: the tensor of slot k, 0 = unused */
    const tu_buf *host;       /* host[k]: an input's data; for tu_run_ref also the outputs */
    tu_buf *device_out;       /* tu_run_cuda: output slot k lands in device_out[k] (poisoned) */
    unsigned output_mask;     /* bit k: slot k is an output */
    const char *const *names; /* slot names, for messages */
    int may_refuse;           /* tu_run_cuda: a NOT_SUPPORTED build (with a message) is no failure */
} tu_slots;
/* Builds g for the ref engine and runs it on the host buffers (outputs land there too). */
void tu_run_ref(frost_graph *g, const tu_slots *s);
/* Builds g for the cuda engine (a refusal is a failure) and runs it `repeat` times on
 * whole-allocation device copies (shifted one element each when `misalign`): an output
 * slot starts from s->device_out[k]'s content (poisoned, or the initial values of an
 * in/out tensor such as a running statistic), run 1's results land there, and every later
 * run starts from the same initial content and must reproduce run 1 bitwise.  Returns 1
 * when it ran, 0 when the build failed, -1 when the cuda engine refused the graph as
 * NOT_SUPPORTED and s->may_refuse allows it. */
int tu_run_cuda(frost_graph *g, const frost__device *dev, const tu_slots *s, int misalign, int repeat);

/* ---- the case loop ---- */
/* The main of a GPU test: exits 77 (skipped) without a CUDA device; otherwise runs cases
 * 0 .. num_cases-1 with a CPU and a CUDA context (only FROST_TEST_CASE's when set; a case
 * for which `skip` returns nonzero is left out), then, unless one case was asked for, the
 * refusal checks.  Each is wrapped in tu_case_begin / tu_case_end; the seed is
 * tu_seed(default_seed).  Returns tu_finish's exit code. */
int tu_gpu_main(uint64_t default_seed, int num_cases, int (*skip)(int index),
                void (*run_one)(int index, uint64_t seed, frost_context *cpu, frost_context *gpu),
                void (*refusals)(frost_context *gpu));

#endif /* FROST_TEST_GPU_UTIL_H */
