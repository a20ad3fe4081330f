/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* A tiny test harness for the prov_test programs: CHECK records a failure and goes on; the
 * program ends with "N passed, M failed" and exits non-zero on any failure. */
#ifndef RSCNTR_HARNESS_H
#define RSCNTR_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

static int h_passed, h_failed;

#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		if (cond) {                                                               \
			h_passed++;                                                       \
		} else {                                                                  \
			h_failed++;                                                       \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                     \
			fprintf(stderr, "\n");                                            \
		}                                                                         \
	} while (0)

/* Checks a libfabric call's return code. */
#define CHECK_RET(call, expected)                                                         \
	do {                                                                              \
		long _r = (long) (call);                                                  \
		CHECK(_r == (long) (expected), "%s returned %ld (%s), expected %ld",      \
		      #call, _r, fi_strerror((int) -_r), (long) (expected));              \
	} while (0)

/* Milliseconds on `clock` (CLOCK_MONOTONIC, or a thread's CPU clock). */
static inline double clock_ms(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline double now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

/* Posts until the core takes it, reading `cq` (an fid_cq *) meanwhile, for at most 10 s:
 * connection-based cores answer -FI_EAGAIN until progress (driven by the CQ read) has set the
 * connection up. Needs <rdma/fi_eq.h>. */
#define POST(call, cq)                                                                    \
	({                                                                                \
		ssize_t _ret;                                                             \
		double _t0 = now_ms();                                                    \
		while ((_ret = (call)) == -FI_EAGAIN && now_ms() - _t0 < 10000) {         \
			struct fi_cq_entry _e;                                            \
			(void) fi_cq_read(cq, &_e, 1);                                    \
		}                                                                         \
		_ret;                                                                     \
	})

/* The info of a thread-safe RDM endpoint of rscntr over the core FI_RSCNTR_CORE names, for the
 * tests that need one (bound_wait, room_stress, spin_read): NULL when there is nothing to test
 * (no core, or a core without such endpoints: said on stdout) or fi_getinfo failed (a CHECK
 * failure); the caller then returns finish(name). `core` is set to the core's name. */
static inline struct fi_info *rdm_thread_safe_info(const char *name, const char **core)
{
	*core = getenv("FI_RSCNTR_CORE");
	if (!*core || !strcmp(*core, "none")) {
		printf("%s: FI_RSCNTR_CORE=%s, nothing to test\n", name, *core ? *core : "(unset)");
		return NULL;
	}
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	hints->fabric_attr->prov_name = strdup("rscntr");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	int ret = fi_getinfo(fi_version(), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret == -FI_ENODATA) {
		printf("%s: core %s has no thread-safe RDM endpoints; nothing to test\n", name, *core);
		return NULL;
	}
	CHECK_RET(ret, 0);
	return info;
}

static inline int finish(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, h_passed, h_failed);
	return h_failed ? 1 : 0;
}

#endif
