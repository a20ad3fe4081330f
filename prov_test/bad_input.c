/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The bad-input matrix: every case goes through the public libfabric API (or, where the API
 * has no checked entry, the ops table libfabric's inline functions call), must return the
 * documented result, and must leave the process healthy: after each group a fresh counter
 * still opens, counts and waits (healthy()), and at the end everything closes with 0. A
 * watchdog (alarm) turns a hang into a failure.
 *
 * Runs in every mode: FI_RSCNTR_CORE=none (counters only) and over each core. The cases that
 * need endpoints (bind, close while bound) are skipped only with FI_RSCNTR_CORE=none. The
 * FI_RSCNTR_* garbage cases run this program again as a child with the variable set (rscntr
 * reads its parameters once, when libfabric loads it) and check the warning and the default.
 *
 * Expected results (W = the log line rscntr writes at FI_LOG_LEVEL=warn):
 *
 * | #  | case                                                        | expected             |
 * |----|-------------------------------------------------------------|----------------------|
 * |    | **fi_cntr_open**                                            |                      |
 * | 1  | NULL counter out pointer                                    | -FI_EINVAL, W        |
 * | 2  | NULL attr                                                   | 0: COMP, FI_WAIT_UNSPEC, waitable |
 * | 3  | unknown events (7)                                          | -FI_EINVAL, W        |
 * | 4  | unknown wait_obj (99)                                       | -FI_EINVAL, W        |
 * | 5  | FI_WAIT_SET with a NULL wait_set                            | -FI_EINVAL, W        |
 * | 6  | FI_WAIT_SET with a set (deprecated)                         | -FI_ENOSYS, W        |
 * | 7  | FI_WAIT_MUTEX_COND (deprecated)                             | -FI_ENOSYS, W        |
 * | 8  | FI_WAIT_POLLFD                                              | -FI_ENOSYS, W        |
 * | 9  | unknown flags (bit 3)                                       | -FI_EINVAL, W        |
 * | 10 | FI_XPU (bit 44)                                             | -FI_ENOSYS, W        |
 * | 11 | FI_PEER                                                     | -FI_ENOSYS, W        |
 * | 12 | 2.1-sized attr at the end of a page, next page unmapped     | 0 (reads 24 bytes)   |
 * | 13 | cntr_cnt counters open, one more                            | -FI_ENOSPC, W; 0 after one closes |
 * |    | **counter ops on a bad fid** (ops table called directly)    |                      |
 * | 14 | add/adderr/set/seterr with a NULL fid                       | -FI_EINVAL, W        |
 * | 15 | add with another class's fid (the domain)                   | -FI_EINVAL, W        |
 * | 16 | read/readerr with a NULL fid                                | 0 (no error channel) |
 * | 17 | wait with a NULL fid, timeout -1                            | -FI_EINVAL, no hang  |
 * |    | **fi_cntr_wait**                                            |                      |
 * | 18 | FI_WAIT_NONE counter: met, unmet with timeout 0 and 20 ms   | 0, -FI_ETIMEDOUT (it polls) |
 * | 19 | threshold already met, timeout -1                           | 0                    |
 * | 20 | threshold 0 on a fresh counter, timeout -1                  | 0                    |
 * | 21 | threshold UINT64_MAX, unmet, timeout 0                      | -FI_ETIMEDOUT        |
 * | 22 | threshold UINT64_MAX after set(UINT64_MAX), timeout -1      | 0                    |
 * | 23 | threshold UINT64_MAX - 1, unmet, timeout 20 ms              | -FI_ETIMEDOUT after >= 20 ms |
 * | 24 | timeout 0, unmet                                            | -FI_ETIMEDOUT at once |
 * | 25 | timeout INT_MAX, threshold met                              | 0 at once            |
 * | 26 | timeout INT_MIN (negative: forever), threshold met          | 0                    |
 * | 27 | timeout -1, unmet, another thread adds an error (each waitable wait_obj) | -FI_EAVAIL |
 * | 28 | error count changed before the call                         | not -FI_EAVAIL: -FI_ETIMEDOUT |
 * |    | **fi_control on a counter**                                 |                      |
 * | 29 | unknown command                                             | -FI_ENOSYS, W        |
 * | 30 | FI_GETWAIT / FI_GETWAITOBJ / FI_GETOPSFLAG / FI_SETOPSFLAG with NULL | -FI_EINVAL, W |
 * | 31 | FI_GETWAIT on a counter without an fd                       | -FI_ENODATA, W       |
 * | 32 | FI_GETWAIT into an int at the end of a page                 | 0 (writes sizeof(int)) |
 * | 33 | the panic hook's private command without FI_RSCNTR_TEST_PANIC | -FI_ENOSYS (inert) |
 * |    | **fi_trywait**                                              |                      |
 * | 34 | FI_WAIT_NONE, FI_WAIT_YIELD, FI_WAIT_UNSPEC counters        | -FI_EINVAL, W        |
 * | 35 | count < 0; NULL array with count 1; a NULL entry            | -FI_EINVAL, W        |
 * | 36 | count 0                                                     | 0                    |
 * |    | **fi_open_ops on the domain**                               |                      |
 * | 37 | NULL name                                                   | -FI_EINVAL, W        |
 * | 38 | unknown name                                                | -FI_ENOSYS           |
 * | 39 | FI_RSCNTR_DOMAIN_OPS_V1 with flags                          | -FI_EBADFLAGS        |
 * | 40 | FI_RSCNTR_DOMAIN_OPS_V1 with a NULL out pointer             | -FI_EINVAL, W        |
 * |    | **opening with NULL arguments** (nothing may be left open)  |                      |
 * | 41 | fi_fabric with a NULL out pointer                           | -FI_EINVAL, W        |
 * | 42 | fi_domain with a NULL info / NULL out pointer               | -FI_EINVAL, W; fabric closes |
 * | 43 | core: fi_endpoint with a NULL info / NULL out pointer       | -FI_EINVAL, W; domain closes |
 * | 44 | core: fi_cq_open with a NULL attr / NULL out pointer        | -FI_EINVAL, W        |
 * | 45 | core: fi_mr_reg with a NULL out pointer                     | -FI_EINVAL, W        |
 * | 46 | core: fi_ep_bind of a NULL fid                              | -FI_EINVAL, W        |
 * | 47 | core: fi_ep_bind of a counter of another domain             | -FI_EINVAL, W        |
 * | 48 | core: fi_ep_bind of an FI_CNTR_EVENTS_BYTES counter         | -FI_EOPNOTSUPP, W    |
 * |    | **closing what is in use**                                  |                      |
 * | 49 | core: close a counter bound to an endpoint                  | -FI_EBUSY, W; still counts; 0 after the endpoint closes |
 * |    |   (its reads, before fi_enable, must not crash: shm and rxm crash progressing a bound  |
 * |    |   endpoint that is not enabled, so rscntr drives no core progress until enable)        |
 * | 50 | close a domain with a counter open                          | -FI_EBUSY, W; 0 after the counter closes |
 * | 51 | close a fabric with a domain open                           | -FI_EBUSY, W; 0 after the domain closes |
 * |    | **contradictory fi_getinfo hints**                          |                      |
 * | 52 | prov_name rscntr, fabric name "not-a-fabric"                | -FI_ENODATA          |
 * | 53 | prov_name rscntr, domain name "not-a-domain"                | -FI_ENODATA          |
 * | 54 | caps FI_TRIGGER: counters only (none) / over a core         | -FI_ENODATA / infos with FI_TRIGGER |
 * | 55 | a utility provider's probe "rscntr;^ofi_rxm" (FI_EP_MSG)    | -FI_ENODATA          |
 * |    | **wrap at max_cntr_value (UINT64_MAX)**                     |                      |
 * | 56 | set(UINT64_MAX), add(2)                                     | reads 1              |
 * | 57 | seterr(UINT64_MAX), adderr(1)                               | readerr 0            |
 * | 58 | set(UINT64_MAX - 1): wait(UINT64_MAX, 0), add(1), wait again | -FI_ETIMEDOUT, then 0 |
 * | 59 | libfabric >= 2.5: domain_attr max_cntr_value / max_err_cntr_value | UINT64_MAX  |
 * |    | **FI_RSCNTR_* set to garbage** (child process, FI_LOG_LEVEL=warn) |                |
 * | 60 | FI_RSCNTR_SPIN=abc                                          | W "not an integer; using the default", counters work |
 * | 61 | FI_RSCNTR_SPIN=99                                           | W "outside 0..=16; using the default", counters work |
 * | 62 | FI_RSCNTR_HW=maybe                                          | W "not auto, off or on; using the default (auto)" |
 * | 63 | FI_RSCNTR_HW_POLL_US=0                                      | W "outside 1..=10000" |
 * | 64 | FI_RSCNTR_FAKE_VERBS=colour=blue                            | W "is invalid", software counters |
 * | 65 | FI_RSCNTR_TEST_FAIL=frobnicate                              | W "unknown op", nothing fails |
 * | 66 | FI_RSCNTR_CORE=no-such-core                                 | fi_getinfo -FI_ENODATA, W naming it |
 */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_ext_rscntr.h>
#include "harness.h"
#include "child.h"

#ifndef FI_XPU
#define FI_XPU (1ULL << 44)
#endif
/* src/boundary/testhook.rs: PANIC_CMD */
#define RSCNTR_TEST_PANIC_CMD 0x52537e57
/* Generous bound for "returns at once": never a timing assertion, only a hang detector. */
#define AT_ONCE_MS 2000.0

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static int standalone;

static struct fid_cntr *open_cntr(enum fi_wait_obj wait_obj, enum fi_cntr_events events)
{
	struct fi_cntr_attr attr = { .events = events, .wait_obj = wait_obj };
	struct fid_cntr *c = NULL;
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), 0);
	return c;
}

/* The process is still healthy: a counter opens, counts, waits and closes. */
static void healthy(const char *after)
{
	struct fid_cntr *c = NULL;
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	int ret = fi_cntr_open(domain, &attr, &c, NULL);
	CHECK(ret == 0 && c, "after %s: fi_cntr_open returned %d", after, ret);
	if (!c)
		return;
	CHECK(fi_cntr_add(c, 3) == 0 && fi_cntr_read(c) == 3 && fi_cntr_wait(c, 3, 1000) == 0,
	      "after %s: counter does not count", after);
	CHECK_RET(fi_close(&c->fid), 0);
}

static void on_alarm(int sig)
{
	(void) sig;
	static const char msg[] = "bad_input: HANG (watchdog fired)\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	(void) r;
	_exit(3);
}

/* Memory where `size` bytes end exactly at an unmapped page: touching byte `size` faults. */
static void *page_end(size_t size)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	mprotect(p + pg, pg, PROT_NONE);
	return p + pg - size;
}

static void page_free(void *at)
{
	long pg = sysconf(_SC_PAGESIZE);
	munmap((void *) ((uintptr_t) at & ~(uintptr_t) (pg - 1)), 2 * pg);
}

static void test_cntr_open(void)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cntr *c = NULL;
	int dummy_set;

	CHECK_RET(fi_cntr_open(domain, &attr, NULL, NULL), -FI_EINVAL);		/* 1 */
	CHECK_RET(fi_cntr_open(domain, NULL, &c, NULL), 0);			/* 2 */
	if (c) {
		enum fi_wait_obj w = FI_WAIT_NONE;
		CHECK_RET(fi_control(&c->fid, FI_GETWAITOBJ, &w), 0);
		CHECK(w == FI_WAIT_UNSPEC, "NULL attr gave wait object %d", w);
		CHECK_RET(fi_cntr_wait(c, 0, -1), 0);
		CHECK_RET(fi_close(&c->fid), 0);
		c = NULL;
	}
	attr.events = (enum fi_cntr_events) 7;					/* 3 */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EINVAL);
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.wait_obj = (enum fi_wait_obj) 99;					/* 4 */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_SET;						/* 5 */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EINVAL);
	attr.wait_set = (struct fid_wait *) &dummy_set;				/* 6: never dereferenced */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_ENOSYS);
	attr.wait_set = NULL;
	attr.wait_obj = FI_WAIT_MUTEX_COND;					/* 7 */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_POLLFD;						/* 8 */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_UNSPEC;
	attr.flags = 1ULL << 3;							/* 9 */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EINVAL);
	attr.flags = FI_XPU;							/* 10 */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_ENOSYS);
	attr.flags = FI_PEER;							/* 11 */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_ENOSYS);
	attr.flags = 0;
	CHECK(c == NULL, "a failed open wrote the out pointer");

	/* 12: libfabric 2.7 appends xpu_ctx; rscntr must not read past the 2.1 struct */
	CHECK(sizeof(struct fi_cntr_attr) == 24, "compiled against a %zu-byte fi_cntr_attr",
	      sizeof(struct fi_cntr_attr));
	struct fi_cntr_attr *edge = page_end(sizeof(*edge));
	if (edge) {
		*edge = (struct fi_cntr_attr) { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_YIELD };
		CHECK_RET(fi_cntr_open(domain, edge, &c, NULL), 0);
		if (c)
			CHECK_RET(fi_close(&c->fid), 0);
		c = NULL;
		page_free(edge);
	}

	/* 13: cntr_cnt is enforced, and a slot comes back when a counter closes */
	size_t max = info->domain_attr->cntr_cnt;
	struct fid_cntr **all = calloc(max, sizeof(*all));
	size_t opened = 0;
	attr.wait_obj = FI_WAIT_NONE;
	while (all && opened < max && fi_cntr_open(domain, &attr, &all[opened], NULL) == 0)
		opened++;
	CHECK(opened == max, "opened %zu of cntr_cnt %zu counters", opened, max);
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_ENOSPC);
	if (opened) {
		CHECK_RET(fi_close(&all[--opened]->fid), 0);
		CHECK_RET(fi_cntr_open(domain, &attr, &all[opened], NULL), 0);
		opened++;
	}
	int close_failed = 0;
	while (opened)
		close_failed += fi_close(&all[--opened]->fid) != 0;
	CHECK(close_failed == 0, "%d of cntr_cnt counters did not close", close_failed);
	free(all);
	healthy("fi_cntr_open cases");
}

static void test_bad_fids(void)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC, FI_CNTR_EVENTS_COMP);
	if (!c)
		return;
	struct fi_ops_cntr *ops = c->ops;
	CHECK_RET(ops->add(NULL, 1), -FI_EINVAL);				/* 14 */
	CHECK_RET(ops->adderr(NULL, 1), -FI_EINVAL);
	CHECK_RET(ops->set(NULL, 1), -FI_EINVAL);
	CHECK_RET(ops->seterr(NULL, 1), -FI_EINVAL);
	CHECK_RET(ops->add((struct fid_cntr *) &domain->fid, 1), -FI_EINVAL);	/* 15 */
	CHECK(ops->read(NULL) == 0 && ops->readerr(NULL) == 0, "read of NULL");	/* 16 */
	double t0 = now_ms();
	CHECK_RET(ops->wait(NULL, 1, -1), -FI_EINVAL);				/* 17 */
	CHECK(now_ms() - t0 < AT_ONCE_MS, "wait(NULL) took %.0f ms", now_ms() - t0);
	CHECK(fi_cntr_read(c) == 0, "a bad call changed another counter");
	CHECK_RET(fi_close(&c->fid), 0);
	healthy("bad fids");
}

struct bump {
	struct fid_cntr *c;
	volatile int stop;
	int bumps;
};

/* Adds an error every 20 ms until told to stop: whenever the wait begins (a loaded machine
 * may start it late), an error change follows it, so the wait must end with -FI_EAVAIL. */
static void *adderr_until_stopped(void *arg)
{
	struct bump *b = arg;
	while (!__atomic_load_n(&b->stop, __ATOMIC_SEQ_CST)) {
		usleep(20000);
		fi_cntr_adderr(b->c, 1);
		b->bumps++;
	}
	return NULL;
}

static void test_wait(void)
{
	struct fid_cntr *none = open_cntr(FI_WAIT_NONE, FI_CNTR_EVENTS_COMP);
	if (none) {
		fi_cntr_add(none, 5);
		CHECK_RET(fi_cntr_wait(none, 1, 0), 0);					/* 18 */
		CHECK_RET(fi_cntr_wait(none, 1, -1), 0);
		CHECK_RET(fi_cntr_wait(none, 6, 0), -FI_ETIMEDOUT);
		CHECK_RET(fi_cntr_wait(none, 6, 20), -FI_ETIMEDOUT);
		CHECK_RET(fi_close(&none->fid), 0);
	}
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC, FI_CNTR_EVENTS_COMP);
	if (!c)
		return;
	CHECK_RET(fi_cntr_wait(c, 0, -1), 0);					/* 20 */
	fi_cntr_add(c, 5);
	CHECK_RET(fi_cntr_wait(c, 5, -1), 0);					/* 19 */
	double t0 = now_ms();
	CHECK_RET(fi_cntr_wait(c, UINT64_MAX, 0), -FI_ETIMEDOUT);		/* 21 */
	CHECK_RET(fi_cntr_wait(c, 6, 0), -FI_ETIMEDOUT);			/* 24 */
	CHECK(now_ms() - t0 < AT_ONCE_MS, "timeout 0 took %.0f ms", now_ms() - t0);
	t0 = now_ms();
	CHECK_RET(fi_cntr_wait(c, UINT64_MAX - 1, 20), -FI_ETIMEDOUT);		/* 23 */
	double took = now_ms() - t0;
	CHECK(took >= 19.9 && took < 20 + AT_ONCE_MS, "20 ms timeout took %.1f ms", took);
	t0 = now_ms();
	CHECK_RET(fi_cntr_wait(c, 5, INT_MAX), 0);				/* 25 */
	CHECK_RET(fi_cntr_wait(c, 5, INT_MIN), 0);				/* 26 */
	CHECK(now_ms() - t0 < AT_ONCE_MS, "met thresholds took %.0f ms", now_ms() - t0);
	CHECK_RET(fi_cntr_set(c, UINT64_MAX), 0);
	CHECK_RET(fi_cntr_wait(c, UINT64_MAX, -1), 0);				/* 22 */
	CHECK_RET(fi_close(&c->fid), 0);

	const enum fi_wait_obj waitable[] = { FI_WAIT_UNSPEC, FI_WAIT_YIELD, FI_WAIT_FD };
	for (size_t i = 0; i < sizeof(waitable) / sizeof(waitable[0]); i++) {
		c = open_cntr(waitable[i], FI_CNTR_EVENTS_COMP);
		if (!c)
			continue;
		fi_cntr_adderr(c, 1);						/* 28 */
		CHECK_RET(fi_cntr_wait(c, 1, 0), -FI_ETIMEDOUT);
		pthread_t t;
		struct bump b = { .c = c };
		pthread_create(&t, NULL, adderr_until_stopped, &b);
		CHECK_RET(fi_cntr_wait(c, 1, -1), -FI_EAVAIL);			/* 27 */
		__atomic_store_n(&b.stop, 1, __ATOMIC_SEQ_CST);
		pthread_join(t, NULL);
		CHECK(fi_cntr_readerr(c) == 1 + (uint64_t) b.bumps, "wait obj %d: readerr %lu after %d",
		      waitable[i], (unsigned long) fi_cntr_readerr(c), 1 + b.bumps);
		CHECK_RET(fi_close(&c->fid), 0);
	}
	healthy("fi_cntr_wait cases");
}

static void test_control(void)
{
	struct fid_cntr *fd = open_cntr(FI_WAIT_FD, FI_CNTR_EVENTS_COMP);
	struct fid_cntr *y = open_cntr(FI_WAIT_YIELD, FI_CNTR_EVENTS_COMP);
	if (!fd || !y)
		return;
	int w;
	CHECK_RET(fi_control(&fd->fid, 12345, &w), -FI_ENOSYS);			/* 29 */
	CHECK_RET(fi_control(&fd->fid, FI_GETWAIT, NULL), -FI_EINVAL);		/* 30 */
	CHECK_RET(fi_control(&fd->fid, FI_GETWAITOBJ, NULL), -FI_EINVAL);
	CHECK_RET(fi_control(&fd->fid, FI_GETOPSFLAG, NULL), -FI_EINVAL);
	CHECK_RET(fi_control(&fd->fid, FI_SETOPSFLAG, NULL), -FI_EINVAL);
	CHECK_RET(fi_control(&y->fid, FI_GETWAIT, &w), -FI_ENODATA);		/* 31 */
	int *edge = page_end(sizeof(int));					/* 32 */
	if (edge) {
		*edge = -1;
		CHECK_RET(fi_control(&fd->fid, FI_GETWAIT, edge), 0);
		CHECK(*edge >= 0, "FI_GETWAIT gave fd %d", *edge);
		page_free(edge);
	}
	CHECK_RET(fi_control(&y->fid, RSCNTR_TEST_PANIC_CMD, &w), -FI_ENOSYS);	/* 33 */
	CHECK_RET(fi_close(&fd->fid), 0);
	CHECK_RET(fi_close(&y->fid), 0);
	healthy("fi_control cases");
}

static void test_trywait(void)
{
	const enum fi_wait_obj no_fd[] = { FI_WAIT_NONE, FI_WAIT_YIELD, FI_WAIT_UNSPEC };
	for (size_t i = 0; i < sizeof(no_fd) / sizeof(no_fd[0]); i++) {		/* 34 */
		struct fid_cntr *c = open_cntr(no_fd[i], FI_CNTR_EVENTS_COMP);
		if (!c)
			continue;
		struct fid *fids[1] = { &c->fid };
		CHECK_RET(fi_trywait(fabric, fids, 1), -FI_EINVAL);
		CHECK_RET(fi_close(&c->fid), 0);
	}
	struct fid_cntr *fd = open_cntr(FI_WAIT_FD, FI_CNTR_EVENTS_COMP);
	if (!fd)
		return;
	struct fid *fids[2] = { &fd->fid, NULL };
	CHECK_RET(fi_trywait(fabric, fids, -1), -FI_EINVAL);			/* 35 */
	CHECK_RET(fi_trywait(fabric, NULL, 1), -FI_EINVAL);
	CHECK_RET(fi_trywait(fabric, fids, 2), -FI_EINVAL);
	CHECK_RET(fi_trywait(fabric, fids, 0), 0);				/* 36 */
	CHECK_RET(fi_trywait(fabric, fids, 1), 0);	/* the fd counter itself is fine */
	CHECK_RET(fi_close(&fd->fid), 0);
	healthy("fi_trywait cases");
}

static void test_open_ops(void)
{
	void *ops = NULL;
	CHECK_RET(fi_open_ops(&domain->fid, NULL, 0, &ops, NULL), -FI_EINVAL);	/* 37 */
	CHECK_RET(fi_open_ops(&domain->fid, "no_such_ops", 0, &ops, NULL), -FI_ENOSYS); /* 38 */
	CHECK_RET(fi_open_ops(&domain->fid, FI_RSCNTR_DOMAIN_OPS_V1, 1, &ops, NULL), -FI_EBADFLAGS); /* 39 */
	CHECK_RET(fi_open_ops(&domain->fid, FI_RSCNTR_DOMAIN_OPS_V1, 0, NULL, NULL), -FI_EINVAL); /* 40 */
	healthy("fi_open_ops cases");
}

/* 41, 42: a fabric and a domain of their own, so a leak shows as -FI_EBUSY on close. */
static void test_null_opens(void)
{
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	CHECK_RET(fi_fabric(info->fabric_attr, NULL, NULL), -FI_EINVAL);	/* 41 */
	CHECK_RET(fi_fabric(info->fabric_attr, &fab, NULL), 0);
	if (!fab)
		return;
	CHECK_RET(fi_domain(fab, NULL, &dom, NULL), -FI_EINVAL);		/* 42 */
	CHECK_RET(fi_domain(fab, info, NULL, NULL), -FI_EINVAL);
	CHECK_RET(fi_close(&fab->fid), 0);
	healthy("NULL opens");
}

static void *ep_buf;

/* 43-49, over a core only. */
static void test_endpoints(void)
{
	struct fid_ep *ep = NULL;
	struct fid_cq *cq = NULL;
	struct fid_domain *other = NULL;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 16 };

	CHECK_RET(fi_endpoint(domain, NULL, &ep, NULL), -FI_EINVAL);		/* 43 */
	CHECK_RET(fi_endpoint(domain, info, NULL, NULL), -FI_EINVAL);
	CHECK_RET(fi_cq_open(domain, NULL, &cq, NULL), -FI_EINVAL);		/* 44 */
	CHECK_RET(fi_cq_open(domain, &cq_attr, NULL, NULL), -FI_EINVAL);
	ep_buf = calloc(1, 4096);
	CHECK_RET(fi_mr_reg(domain, ep_buf, 4096, FI_SEND | FI_RECV, 0, 0, 0, NULL, NULL), -FI_EINVAL); /* 45 */
	CHECK(ep == NULL && cq == NULL, "a failed open wrote the out pointer");

	CHECK_RET(fi_endpoint(domain, info, &ep, NULL), 0);
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC, FI_CNTR_EVENTS_COMP);
	struct fid_cntr *bytes = open_cntr(FI_WAIT_UNSPEC, PT_CNTR_EVENTS_BYTES);
	CHECK_RET(fi_domain(fabric, info, &other, NULL), 0);
	struct fid_cntr *foreign = NULL;
	if (other) {
		struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
		CHECK_RET(fi_cntr_open(other, &attr, &foreign, NULL), 0);
	}
	if (!ep || !c || !bytes || !foreign)
		return;
	CHECK_RET(fi_ep_bind(ep, NULL, FI_SEND), -FI_EINVAL);			/* 46 */
	CHECK_RET(fi_ep_bind(ep, &foreign->fid, FI_SEND), -FI_EINVAL);		/* 47 */
	CHECK_RET(fi_ep_bind(ep, &bytes->fid, FI_SEND), -FI_EOPNOTSUPP);	/* 48 */

	/* 49: a counter bound to an endpoint cannot close until the endpoint has. A core
	 * without counters of its own (udp) refuses the bind itself, documented -FI_ENOSYS. */
	int ret = fi_ep_bind(ep, &c->fid, FI_SEND | FI_RECV);
	CHECK(ret == 0 || ret == -FI_ENOSYS, "fi_ep_bind returned %d (%s)", ret, fi_strerror(-ret));
	if (ret == 0) {
		CHECK_RET(fi_close(&c->fid), -FI_EBUSY);
		CHECK(fi_cntr_add(c, 2) == 0 && fi_cntr_read(c) == 2, "refused close broke the counter");
	} else {
		printf("bad_input: the core has no counters (bind: %s); case 49 checks that only\n",
		       fi_strerror(-ret));
	}
	CHECK_RET(close_unenabled_ep(ep, domain), 0);
	CHECK_RET(fi_close(&c->fid), 0);
	CHECK_RET(fi_close(&bytes->fid), 0);
	CHECK_RET(fi_close(&foreign->fid), 0);
	CHECK_RET(fi_close(&other->fid), 0);
	free(ep_buf);
	healthy("endpoint cases");
}

/* 50, 51 */
static void test_close_busy(void)
{
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	struct fid_cntr *c = NULL;
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	CHECK_RET(fi_fabric(info->fabric_attr, &fab, NULL), 0);
	if (!fab)
		return;
	CHECK_RET(fi_domain(fab, info, &dom, NULL), 0);
	if (dom)
		CHECK_RET(fi_cntr_open(dom, &attr, &c, NULL), 0);
	if (!dom || !c)
		return;
	CHECK_RET(fi_close(&dom->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&fab->fid), -FI_EBUSY);
	CHECK(fi_cntr_add(c, 1) == 0 && fi_cntr_wait(c, 1, 1000) == 0, "refused close broke the counter");
	CHECK_RET(fi_close(&c->fid), 0);
	CHECK_RET(fi_close(&fab->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&dom->fid), 0);
	CHECK_RET(fi_close(&fab->fid), 0);
	healthy("closing what is in use");
}

static void test_getinfo(void)
{
	struct fi_info *hints = fi_allocinfo(), *res = NULL;
	hints->fabric_attr->prov_name = strdup("rscntr");
	hints->fabric_attr->name = strdup("not-a-fabric");			/* 52 */
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), -FI_ENODATA);
	free(hints->fabric_attr->name);
	hints->fabric_attr->name = NULL;
	hints->domain_attr->name = strdup("not-a-domain");			/* 53 */
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), -FI_ENODATA);
	free(hints->domain_attr->name);
	hints->domain_attr->name = NULL;
	hints->caps = FI_TRIGGER;						/* 54 */
	if (standalone) {
		CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), -FI_ENODATA);
	} else {
		CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), 0);
		for (struct fi_info *i = res; i; i = i->next)
			CHECK((i->caps & FI_TRIGGER) && (i->tx_attr->caps & FI_TRIGGER),
			      "an info without FI_TRIGGER for hints asking for it");
		fi_freeinfo(res);
		res = NULL;
	}
	hints->caps = 0;
	free(hints->fabric_attr->prov_name);					/* 55 */
	hints->fabric_attr->prov_name = strdup("rscntr;^ofi_rxm");
	hints->ep_attr->type = FI_EP_MSG;
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), -FI_ENODATA);
	CHECK(res == NULL, "a failed fi_getinfo returned infos");
	fi_freeinfo(hints);
	healthy("contradictory hints");
}

static void test_wrap(void)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC, FI_CNTR_EVENTS_COMP);
	if (!c)
		return;
	CHECK_RET(fi_cntr_set(c, UINT64_MAX), 0);				/* 56 */
	CHECK_RET(fi_cntr_add(c, 2), 0);
	CHECK(fi_cntr_read(c) == 1, "wrap gave %lu", (unsigned long) fi_cntr_read(c));
	CHECK_RET(fi_cntr_seterr(c, UINT64_MAX), 0);				/* 57 */
	CHECK_RET(fi_cntr_adderr(c, 1), 0);
	CHECK(fi_cntr_readerr(c) == 0, "error wrap gave %lu", (unsigned long) fi_cntr_readerr(c));
	CHECK_RET(fi_cntr_set(c, UINT64_MAX - 1), 0);				/* 58 */
	CHECK_RET(fi_cntr_wait(c, UINT64_MAX, 0), -FI_ETIMEDOUT);
	CHECK_RET(fi_cntr_add(c, 1), 0);
	CHECK_RET(fi_cntr_wait(c, UINT64_MAX, 0), 0);
	CHECK_RET(fi_close(&c->fid), 0);
	if (fi_version() >= FI_VERSION(2, 5)) {					/* 59 */
		/* 2.5 appended the two fields to the 2.1 struct this program is compiled against */
		uint64_t *max = (uint64_t *) ((char *) info->domain_attr + sizeof(struct fi_domain_attr));
		CHECK(max[0] == UINT64_MAX && max[1] == UINT64_MAX, "max_cntr_value %#lx/%#lx",
		      (unsigned long) max[0], (unsigned long) max[1]);
	}
	healthy("wrap cases");
}

/* What a child runs with a garbage variable set: load rscntr, count, wait, close. */
static int child_counts(void)
{
	struct fi_info *hints = fi_allocinfo(), *res = NULL;
	hints->fabric_attr->prov_name = strdup("rscntr");
	int ret = fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res);
	fi_freeinfo(hints);
	printf("child: fi_getinfo %d\n", ret);
	if (ret)
		return 10;
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	struct fid_cntr *c = NULL;
	struct fi_rscntr_domain_ops *ext = NULL;
	enum fi_rscntr_backend backend = FI_RSCNTR_BACKEND_HARDWARE;
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	if (fi_fabric(res->fabric_attr, &fab, NULL) || fi_domain(fab, res, &dom, NULL) ||
	    fi_cntr_open(dom, &attr, &c, NULL) ||
	    fi_open_ops(&dom->fid, FI_RSCNTR_DOMAIN_OPS_V1, 0, (void **) &ext, NULL) ||
	    ext->cntr_backend(c, &backend))
		return 11;
	if (fi_cntr_add(c, 2) || fi_cntr_read(c) != 2 || fi_cntr_wait(c, 2, 1000) ||
	    fi_cntr_wait(c, 3, 10) != -FI_ETIMEDOUT)
		return 12;
	printf("child: counted, backend %s\n",
	       backend == FI_RSCNTR_BACKEND_SOFTWARE ? "software" : "hardware");
	if (fi_close(&c->fid) || fi_close(&dom->fid) || fi_close(&fab->fid))
		return 13;
	fi_freeinfo(res);
	printf("child: ok\n");
	return 0;
}

static char child_out[1 << 16];

/* Runs the child with `var` set (and FI_LOG_LEVEL=warn); checks its exit code and that its
 * output holds every one of `want` (NULL-terminated). */
static void garbage(const char *var, int exit_code, const char *const *want)
{
	const char *env[] = { var, "FI_LOG_LEVEL=warn", NULL };
	int rc = run_self("--child-counts", env, child_out, sizeof(child_out), 60);
	int ok = rc == exit_code;
	CHECK(rc == exit_code, "%s: child exited %d, expected %d", var, rc, exit_code);
	for (; *want; want++) {
		CHECK(strstr(child_out, *want) != NULL, "%s: no \"%s\" in the child's output", var, *want);
		ok &= strstr(child_out, *want) != NULL;
	}
	if (!ok)
		show_child(var, child_out);
}

static void test_garbage_variables(void)
{
	garbage("FI_RSCNTR_SPIN=abc", 0, (const char *const[]) {				/* 60 */
		"FI_RSCNTR_SPIN = \"abc\" is not an integer; using the default", "child: ok", NULL });
	garbage("FI_RSCNTR_SPIN=99", 0, (const char *const[]) {				/* 61 */
		"FI_RSCNTR_SPIN = 99 is outside 0..=16; using the default", "child: ok", NULL });
	garbage("FI_RSCNTR_HW=maybe", 0, (const char *const[]) {				/* 62 */
		"FI_RSCNTR_HW = \"maybe\" is not auto, off or on; using the default (auto)",
		"child: ok", NULL });
	garbage("FI_RSCNTR_HW_POLL_US=0", 0, (const char *const[]) {			/* 63 */
		"FI_RSCNTR_HW_POLL_US = 0 is outside 1..=10000; using the default", "child: ok", NULL });
	garbage("FI_RSCNTR_FAKE_VERBS=colour=blue", 0, (const char *const[]) {		/* 64 */
		"FI_RSCNTR_FAKE_VERBS=\"colour=blue\": unknown key \"colour\"", "backend software", "child: ok", NULL });
	garbage("FI_RSCNTR_TEST_FAIL=frobnicate", 0, (const char *const[]) {		/* 65 */
		"FI_RSCNTR_TEST_FAIL: unknown op \"frobnicate\" ignored", "child: ok", NULL });
	garbage("FI_RSCNTR_CORE=no-such-core", 10, (const char *const[]) {		/* 66 */
		"no-such-core", "child: fi_getinfo -61", NULL });
}

static struct fi_info *get_info(void)
{
	struct fi_info *hints = fi_allocinfo(), *res = NULL;
	hints->fabric_attr->prov_name = strdup("rscntr");
	if (!standalone) {
		/* an endpoint the cases can bind to; cores without RDM (udp) answer the plain hints */
		hints->ep_attr->type = FI_EP_RDM;
		hints->caps = FI_MSG;
		hints->mode = FI_CONTEXT | FI_CONTEXT2;
		hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
		if (fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res) == 0) {
			fi_freeinfo(hints);
			return res;
		}
		fi_freeinfo(hints);
		hints = fi_allocinfo();
		hints->fabric_attr->prov_name = strdup("rscntr");
	}
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), 0);
	fi_freeinfo(hints);
	return res;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--child-counts"))
		return child_counts();
	signal(SIGALRM, on_alarm);
	alarm(240);
	CHECK(child_init() == 0, "cannot resolve /proc/self/exe");
	const char *core = getenv("FI_RSCNTR_CORE");
	standalone = core && !strcmp(core, "none");
	printf("bad_input: FI_RSCNTR_CORE=%s\n", core ? core : "(unset)");

	info = get_info();
	if (!info)
		return finish("bad_input");
	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	if (fabric)
		CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		return finish("bad_input");

	test_cntr_open();
	test_bad_fids();
	test_wait();
	test_control();
	test_trywait();
	test_open_ops();
	test_null_opens();
	if (standalone)
		printf("bad_input: FI_RSCNTR_CORE=none: no endpoints, cases 43-49 skipped\n");
	else
		test_endpoints();
	test_close_busy();
	test_getinfo();
	test_wrap();
	test_garbage_variables();

	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	return finish("bad_input");
}
