/*
 * sdpa_test_util.h — what the SDPA GPU tests (test_sdpa_fwd_gpu.c, test_sdpa_bwd_gpu.c)
 * share: the case vocabulary (layouts, bias broadcasts, ragged and padded sides) and the
 * random strided layouts of their operands.
 *
 * Layout legend: b = batch, h = heads, s = sequence, d = head dim; an operand is
 * [b, h, s, d] in some stride order; a ragged (THD) one lives in a [tokens, h, d] buffer.
 */
#ifndef FROST_TEST_SDPA_TEST_UTIL_H
#define FROST_TEST_SDPA_TEST_UTIL_H

#include <stdint.h>

#include "test_util.h"

/* BHSD and BSHD: packed in that order; GAPPED: a random order with gaps, rows 16-byte
 * aligned; UNALIGNED: gapped with an odd row stride (the element-wise load path). */
enum { LAYOUT_BHSD, LAYOUT_BSHD, LAYOUT_GAPPED, LAYOUT_UNALIGNED };
enum { BIAS_NONE, BIAS_FULL, BIAS_1H, BIAS_B1, BIAS_11 }; /* bias dims [b|1, h|1, s_q, s_kv] */
enum { RAG_Q = 1, RAG_KV = 2 };
enum { PAD_Q = 1, PAD_KV = 2 };
enum { MAXB = 4 };

/* Strides following `order` (outermost first; the last entry is the head dim, stride 1).
 * Gapped layouts pad every stride; aligned ones keep rows 16 bytes apart, the unaligned
 * one makes the first stride above d odd so that rows are not 16-byte aligned. */
void tu_sdpa_strides(tu_rng *rng, int layout, int rank, const int64_t *dims, const int *order, int64_t *st);

#endif /* FROST_TEST_SDPA_TEST_UTIL_H */
