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
#include <stdint.h>

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

/* The API version these programs ask fi_getinfo for. Built against 2.x headers: the running
 * library's, as MPICH does. Built against older headers (PROV_TEST_ABI=1.17, the binaries that
 * run on every libfabric from 1.17 on): at most the headers', as an application built on
 * Debian 12 asks, since its structs are that version's. `at_most` caps it further (0: no cap). */
static inline uint32_t pt_api_at_most(uint32_t at_most)
{
	uint32_t v = fi_version();
#if FI_MAJOR_VERSION < 2
	if (v > FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION))
		v = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
#endif
	return at_most && v > at_most ? at_most : v;
}

static inline uint32_t pt_api(void)
{
	return pt_api_at_most(0);
}

/* FI_CNTR_EVENTS_BYTES (an enumerator, so not #ifdef-able) came with the 2.0 headers; built
 * against older ones the programs name its value, which rscntr takes on every version. */
#if FI_MAJOR_VERSION >= 2
#define PT_CNTR_EVENTS_BYTES FI_CNTR_EVENTS_BYTES
#else
#define PT_CNTR_EVENTS_BYTES ((enum fi_cntr_events) 1)
#endif

/* Closes an endpoint the test never enabled. libfabric 1.17's rxm crashes closing one (in
 * its close, rxm alone as under rscntr; 1.22's does not): there it is enabled first, with an AV
 * and a CQ of its own, as rxm needs. Needs <rdma/fi_domain.h>, <rdma/fi_endpoint.h>,
 * <rdma/fi_eq.h>. Returns fi_close's result. */
#define close_unenabled_ep(ep, domain)                                                     \
	({                                                                                \
		const char *_core = getenv("FI_RSCNTR_CORE");                             \
		struct fid_av *_av = NULL;                                                \
		struct fid_cq *_cq = NULL;                                                \
		if (_core && strstr(_core, "ofi_rxm") && fi_version() < FI_VERSION(1, 22)) { \
			struct fi_av_attr _aa = { .type = FI_AV_TABLE, .count = 4 };      \
			struct fi_cq_attr _ca = { .format = FI_CQ_FORMAT_CONTEXT, .size = 16 }; \
			if (!fi_av_open(domain, &_aa, &_av, NULL) &&                      \
			    !fi_cq_open(domain, &_ca, &_cq, NULL) &&                      \
			    !fi_ep_bind(ep, &_av->fid, 0) &&                              \
			    !fi_ep_bind(ep, &_cq->fid, FI_TRANSMIT | FI_RECV))            \
				(void) fi_enable(ep);                                     \
		}                                                                         \
		int _r = fi_close(&(ep)->fid);                                            \
		if (_cq)                                                                  \
			fi_close(&_cq->fid);                                              \
		if (_av)                                                                  \
			fi_close(&_av->fid);                                              \
		_r;                                                                       \
	})

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

/* Reads one completion from `cq` (an fid_cq *) within `ms` milliseconds: 0, the read's error,
 * or -FI_ETIMEDOUT. Needs <rdma/fi_eq.h> and <unistd.h>. */
#define CQ_WAIT(cq, ms)                                                                   \
	({                                                                                \
		int _rc = -FI_ETIMEDOUT;                                                  \
		double _t0 = now_ms();                                                    \
		struct fi_cq_entry _e;                                                    \
		while (now_ms() - _t0 < (ms)) {                                           \
			ssize_t _r = fi_cq_read(cq, &_e, 1);                              \
			if (_r == 1 || _r != -FI_EAGAIN) {                                \
				_rc = _r == 1 ? 0 : (int) _r;                             \
				break;                                                    \
			}                                                                 \
			usleep(100);                                                      \
		}                                                                         \
		_rc;                                                                      \
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
	int ret = fi_getinfo(pt_api(), NULL, NULL, 0, hints, &info);
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
