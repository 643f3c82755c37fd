/*
 * sdpa_test_util.c — the random strided layouts of the SDPA GPU tests (see
 * sdpa_test_util.h).
 */
#include "sdpa_test_util.h"

void tu_sdpa_strides(tu_rng *rng, int layout, int rank, const int64_t *dims, const int *order, int64_t *st)
{
    int gapped = layout == LAYOUT_GAPPED || layout == LAYOUT_UNALIGNED;
    int64_t s = 1;
    for (int k = rank - 1; k >= 0; k--) {
        st[order[k]] = s;
        s *= dims[order[k]] > 0 ? dims[order[k]] : 1;
        if (k > 0 && gapped) {
            s += tu_int(rng, 0, 1) ? tu_int(rng, 0, 24) : 0;
            if (layout == LAYOUT_GAPPED)
                s = (s + 7) / 8 * 8;
            else if (k == rank - 1 && s % 8 == 0)
                s += 1 + 2 * tu_int(rng, 0, 2);
        }
    }
}
