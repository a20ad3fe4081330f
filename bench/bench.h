/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* What the benchmarks share: the clock they time with and the order they sort samples in. */
#ifndef RSCNTR_BENCH_H
#define RSCNTR_BENCH_H

#include <stdint.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* qsort order for latency samples (percentiles are read off the sorted array). */
static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;
	return x < y ? -1 : x > y;
}

#endif
