/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * FI_RSCNTR_HW policy through the public API: which backend a counter gets, what fi_cntr_open
 * returns when hardware is demanded but cannot be had, the limits getinfo advertises, and
 * device errors surfacing as -FI_E* codes. scripts/test.sh runs it under each detection
 * scenario (no libibverbs, rdma-core 44, rdma-core 65 without a device, the fake device);
 * expectations come from the environment, defaulting to "software" everywhere:
 *
 *   RSCNTR_EXPECT_COMP, RSCNTR_EXPECT_BYTES  software | hardware | a negative fi_cntr_open result
 *   RSCNTR_HW_LIMIT=N                        N completion counters can be hardware; the next is
 *   RSCNTR_EXPECT_OVER                       software | a negative fi_cntr_open result
 *   RSCNTR_EXPECT_CNTR_CNT, RSCNTR_EXPECT_MAX_VALUE   getinfo's domain_attr (max value on API >= 2.5)
 *   RSCNTR_EXPECT_ADD, RSCNTR_EXPECT_CLOSE   fi_cntr_add / fi_close results on a COMP counter
 */
#include <stdint.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_ext_rscntr.h>
#include "harness.h"

static struct fid_domain *domain;
static struct fi_rscntr_domain_ops *ext;
static int domain_busy; /* a counter whose close failed is still open */

/* "software" -> 1, "hardware" -> 2 (the backend enum), a number -> that open result. */
static long expect(const char *var, long dflt)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return dflt;
	if (!strcmp(v, "software"))
		return FI_RSCNTR_BACKEND_SOFTWARE;
	if (!strcmp(v, "hardware"))
		return FI_RSCNTR_BACKEND_HARDWARE;
	return strtol(v, NULL, 0);
}

/* Opens a counter; returns the backend (1, 2) or the negative open result. */
static long open_one(enum fi_cntr_events events, struct fid_cntr **out)
{
	struct fi_cntr_attr attr = { .events = events, .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cntr *c = NULL;
	int ret = fi_cntr_open(domain, &attr, &c, NULL);
	*out = c;
	if (ret)
		return ret;
	enum fi_rscntr_backend b = 0;
	CHECK_RET(ext->cntr_backend(c, &b), 0);
	return b;
}

static void check_open(enum fi_cntr_events events, const char *var)
{
	struct fid_cntr *c;
	long want = expect(var, FI_RSCNTR_BACKEND_SOFTWARE), got = open_one(events, &c);
	CHECK(got == want, "%s: got %ld, expected %ld", var, got, want);
	if (c) {
		/* hardware counters on a device that refuses destroy stay open */
		long close_ret = got == FI_RSCNTR_BACKEND_HARDWARE ? expect("RSCNTR_EXPECT_CLOSE", 0) : 0;
		CHECK_RET(fi_close(&c->fid), close_ret);
		domain_busy |= close_ret != 0;
	}
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fabric = NULL;

	hints->fabric_attr->prov_name = strdup("rscntr");
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	if (!info)
		return finish("hw_policy");
	long want_cnt = expect("RSCNTR_EXPECT_CNTR_CNT", 0);
	if (want_cnt)
		CHECK((long) info->domain_attr->cntr_cnt == want_cnt, "cntr_cnt %zu, expected %ld",
		      info->domain_attr->cntr_cnt, want_cnt);
	const char *want_max = getenv("RSCNTR_EXPECT_MAX_VALUE");
	if (want_max && fi_version() >= FI_VERSION(2, 5)) {
		/* 2.5 appended max_cntr_value and max_err_cntr_value to the 2.1 struct. */
		uint64_t *max = (uint64_t *) ((char *) info->domain_attr + sizeof(struct fi_domain_attr));
		uint64_t want = strtoull(want_max, NULL, 0);
		CHECK(max[0] == want && max[1] == want, "max_cntr_value %#lx/%#lx, expected %#lx",
		      (unsigned long) max[0], (unsigned long) max[1], (unsigned long) want);
	}
	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		return finish("hw_policy");
	CHECK_RET(fi_open_ops(&domain->fid, FI_RSCNTR_DOMAIN_OPS_V1, 0, (void **) &ext, NULL), 0);
	if (!ext)
		return finish("hw_policy");

	check_open(FI_CNTR_EVENTS_COMP, "RSCNTR_EXPECT_COMP");
	check_open(PT_CNTR_EVENTS_BYTES, "RSCNTR_EXPECT_BYTES");

	/* Per-counter fallback (auto) or failure (on) once the device's counters are used up. */
	long limit = expect("RSCNTR_HW_LIMIT", -1);
	if (limit >= 0) {
		struct fid_cntr *held[64] = { 0 }, *over = NULL;
		for (long i = 0; i < limit && i < 64; i++) {
			long got = open_one(FI_CNTR_EVENTS_COMP, &held[i]);
			CHECK(got == FI_RSCNTR_BACKEND_HARDWARE, "counter %ld: %ld, expected hardware", i, got);
		}
		long got = open_one(FI_CNTR_EVENTS_COMP, &over), want = expect("RSCNTR_EXPECT_OVER", 1);
		CHECK(got == want, "counter past the limit: %ld, expected %ld", got, want);
		if (over)
			CHECK_RET(fi_close(&over->fid), 0);
		/* closing a hardware counter frees its slot */
		if (limit > 0) {
			CHECK_RET(fi_close(&held[0]->fid), 0);
			got = open_one(FI_CNTR_EVENTS_COMP, &held[0]);
			CHECK(got == FI_RSCNTR_BACKEND_HARDWARE, "after a close: %ld, expected hardware", got);
		}
		for (long i = 0; i < limit && i < 64; i++)
			if (held[i])
				CHECK_RET(fi_close(&held[i]->fid), 0);
	}

	/* Device errors on an open counter. */
	const char *want_add = getenv("RSCNTR_EXPECT_ADD"), *want_close = getenv("RSCNTR_EXPECT_CLOSE");
	if (want_add || want_close) {
		struct fid_cntr *c;
		long got = open_one(FI_CNTR_EVENTS_COMP, &c);
		CHECK(got == FI_RSCNTR_BACKEND_HARDWARE, "open: %ld, expected hardware", got);
		if (c && want_add) {
			CHECK_RET(fi_cntr_add(c, 1), strtol(want_add, NULL, 0));
			CHECK_RET(fi_cntr_set(c, 1), strtol(want_add, NULL, 0));
			CHECK_RET(fi_cntr_adderr(c, 1), strtol(want_add, NULL, 0));
			CHECK_RET(fi_cntr_seterr(c, 1), strtol(want_add, NULL, 0));
			CHECK_RET(fi_cntr_wait(c, 1, 10), -FI_ETIMEDOUT);
		}
		if (c && want_close) {
			long r = strtol(want_close, NULL, 0);
			CHECK_RET(fi_close(&c->fid), r);
			if (r) {
				/* the counter stays open and usable; the domain cannot close under it */
				CHECK(fi_cntr_read(c) == 0, "read after a failed close");
				CHECK_RET(fi_close(&domain->fid), -FI_EBUSY);
				domain_busy = 1;
			}
		} else if (c) {
			CHECK_RET(fi_close(&c->fid), 0);
		}
	}
	if (!domain_busy) {
		CHECK_RET(fi_close(&domain->fid), 0);
		CHECK_RET(fi_close(&fabric->fid), 0);
	}
	fi_freeinfo(info);
	return finish("hw_policy");
}
