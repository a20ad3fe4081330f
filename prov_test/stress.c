/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Stress through the public API: 8 threads mixing fi_cntr_add, adderr, set, read, readerr and
 * fi_cntr_wait with timeouts, for each waitable wait object (UNSPEC, YIELD, FD), at least
 * 10^6 counter operations per wait object (RSCNTR_STRESS_OPS overrides the total).
 *
 * Exact final values despite set, by construction:
 * - phase 1: a shared counter S is only added to (value and errors) and read by everyone;
 *   each thread also owns a counter it alone sets and adds to (it knows its exact value at
 *   every moment and checks every read of it), which the other threads read and wait on;
 * - phase 2 (after a barrier, the main thread having checked S = sum of the adds): the main
 *   thread sets S and its error count, then every thread adds a fixed amount to both, while a
 *   thread blocked in fi_cntr_wait(S, final, -1) must wake (no lost wakeup: the watchdog would
 *   fire), and the final values are checked exactly.
 * Reads of S must never go backwards in phase 1 (no add is lost or torn).
 *
 * Every wait must return 0, -FI_ETIMEDOUT or -FI_EAVAIL, never before its timeout when it
 * timed out, and within timeout + 2 s (a hang detector, not a timing assertion: this machine
 * is shared). The largest overshoot past the timeout is printed.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include "harness.h"

#define THREADS 8
#define HANG_BOUND_MS 2000.0
#define PHASE2_ADDS 1000

static struct fid_domain *domain;
static struct fid_cntr *shared_c, *own[THREADS];
static pthread_barrier_t barrier;
static uint64_t ops_per_thread;

struct result {
	uint64_t adds, errs, ops, waits, timed_out, eavail, woke;
	double max_over_ms;
	int failures;
	char first_failure[200];
};
static struct result results[THREADS];

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

#define FAIL_IF(cond, ...)                                                                \
	do {                                                                              \
		if (cond) {                                                               \
			if (!r->failures++)                                               \
				snprintf(r->first_failure, sizeof(r->first_failure), __VA_ARGS__); \
		}                                                                         \
	} while (0)

static const int timeouts_ms[] = { 0, 0, 1, 2, 5, 10 };

static void timed_wait(struct result *r, struct fid_cntr *c, uint64_t threshold, int timeout)
{
	double t0 = now_ms();
	int ret = fi_cntr_wait(c, threshold, timeout);
	double took = now_ms() - t0;
	r->waits++;
	FAIL_IF(ret != 0 && ret != -FI_ETIMEDOUT && ret != -FI_EAVAIL, "fi_cntr_wait returned %d", ret);
	FAIL_IF(took > timeout + HANG_BOUND_MS, "wait with timeout %d ms took %.1f ms", timeout, took);
	if (ret == -FI_ETIMEDOUT) {
		r->timed_out++;
		/* the clock is read after the provider's deadline: allow the rounding of now_ms */
		FAIL_IF(took < timeout - 0.05, "timed out after %.3f ms of %d", took, timeout);
		if (took - timeout > r->max_over_ms)
			r->max_over_ms = took - timeout;
	} else if (ret == -FI_EAVAIL) {
		r->eavail++;
	} else if (ret == 0) {
		r->woke++;
	}
}

static void *worker(void *arg)
{
	int me = (int) (intptr_t) arg;
	struct result *r = &results[me];
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (me + 1);
	uint64_t own_value = 0, last_s = 0, last_err = 0;

	pthread_barrier_wait(&barrier);
	for (uint64_t n = 0; n < ops_per_thread; n++) {
		uint64_t x = xorshift(&rng);
		unsigned pick = x % 1000;
		r->ops++;
		if (pick < 450) {
			FAIL_IF(fi_cntr_add(shared_c, 1), "add");
			r->adds++;
		} else if (pick < 470) {
			FAIL_IF(fi_cntr_adderr(shared_c, 1), "adderr");
			r->errs++;
		} else if (pick < 650) {
			uint64_t v = fi_cntr_read(shared_c);
			FAIL_IF(v < last_s, "S went back from %lu to %lu", (unsigned long) last_s, (unsigned long) v);
			last_s = v;
		} else if (pick < 700) {
			uint64_t e = fi_cntr_readerr(shared_c);
			FAIL_IF(e < last_err, "S's errors went back");
			last_err = e;
		} else if (pick < 760) {
			FAIL_IF(fi_cntr_set(own[me], own_value = (x >> 20) % 100000), "set");
		} else if (pick < 860) {
			uint64_t k = 1 + (x >> 12) % 7;
			FAIL_IF(fi_cntr_add(own[me], k), "own add");
			own_value += k;
		} else if (pick < 900) {
			FAIL_IF(fi_cntr_adderr(own[me], 1), "own adderr");
		} else if (pick < 990) {
			uint64_t v = fi_cntr_read(own[me]);
			FAIL_IF(v != own_value, "own counter reads %lu, set/added to %lu", (unsigned long) v,
				(unsigned long) own_value);
			(void) fi_cntr_read(own[(me + 1 + (x >> 8) % (THREADS - 1)) % THREADS]);
		} else {
			/* 1 %: a wait, on S (moving fast: usually met by someone's add) or on
			 * another thread's counter (sometimes met, sometimes set back) */
			int timeout = timeouts_ms[(x >> 16) % (sizeof(timeouts_ms) / sizeof(int))];
			if (x & (1 << 10)) {
				timed_wait(r, shared_c, fi_cntr_read(shared_c) + 1 + (x >> 24) % 50, timeout);
			} else {
				struct fid_cntr *c = own[(me + 1 + (x >> 8) % (THREADS - 1)) % THREADS];
				timed_wait(r, c, fi_cntr_read(c) + 1, timeout);
			}
		}
	}
	pthread_barrier_wait(&barrier); /* end of phase 1 */
	pthread_barrier_wait(&barrier); /* main has set S */
	for (int i = 0; i < PHASE2_ADDS; i++) {
		FAIL_IF(fi_cntr_add(shared_c, 1), "phase 2 add");
		if (i % 100 == 0)
			FAIL_IF(fi_cntr_adderr(shared_c, 1), "phase 2 adderr");
	}
	FAIL_IF(fi_cntr_read(own[me]) != own_value, "own counter changed by someone else");
	return NULL;
}

struct blocked {
	uint64_t threshold;
	int ret, eavail;
};

/* Waits forever (retrying on -FI_EAVAIL) for phase 2's final value: it wakes or the
 * watchdog fires. */
static void *blocked_waiter(void *arg)
{
	struct blocked *b = arg;
	while ((b->ret = fi_cntr_wait(shared_c, b->threshold, -1)) == -FI_EAVAIL)
		b->eavail++;
	return NULL;
}

static void run(enum fi_wait_obj wait_obj, const char *name)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = wait_obj };
	CHECK_RET(fi_cntr_open(domain, &attr, &shared_c, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		CHECK_RET(fi_cntr_open(domain, &attr, &own[i], NULL), 0);
	memset(results, 0, sizeof(results));
	pthread_barrier_init(&barrier, NULL, THREADS + 1);
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *) (intptr_t) i);
	double t0 = now_ms();
	pthread_barrier_wait(&barrier); /* go */
	pthread_barrier_wait(&barrier); /* phase 1 done */
	double phase1_ms = now_ms() - t0;

	uint64_t adds = 0, errs = 0, ops = 0;
	for (int i = 0; i < THREADS; i++)
		adds += results[i].adds, errs += results[i].errs, ops += results[i].ops;
	CHECK(fi_cntr_read(shared_c) == adds, "%s: S = %lu after %lu adds", name,
	      (unsigned long) fi_cntr_read(shared_c), (unsigned long) adds);
	CHECK(fi_cntr_readerr(shared_c) == errs, "%s: S's errors = %lu after %lu adderrs", name,
	      (unsigned long) fi_cntr_readerr(shared_c), (unsigned long) errs);

	/* phase 2: set, then everyone adds; a thread blocked forever must wake */
	CHECK_RET(fi_cntr_set(shared_c, 1000), 0);
	CHECK_RET(fi_cntr_seterr(shared_c, 7), 0);
	struct blocked b = { .threshold = 1000 + (uint64_t) THREADS * PHASE2_ADDS };
	pthread_t bt;
	pthread_create(&bt, NULL, blocked_waiter, &b);
	usleep(10000); /* let it block: a wakeup, not an already-met threshold, is what counts */
	pthread_barrier_wait(&barrier);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_join(bt, NULL);
	CHECK(b.ret == 0, "%s: the blocked waiter returned %d", name, b.ret);
	CHECK(fi_cntr_read(shared_c) == b.threshold, "%s: final S %lu, expected %lu", name,
	      (unsigned long) fi_cntr_read(shared_c), (unsigned long) b.threshold);
	uint64_t want_err = 7 + (uint64_t) THREADS * (PHASE2_ADDS / 100);
	CHECK(fi_cntr_readerr(shared_c) == want_err, "%s: final errors %lu, expected %lu", name,
	      (unsigned long) fi_cntr_readerr(shared_c), (unsigned long) want_err);

	uint64_t waits = 0, timed_out = 0, eavail = 0, woke = 0;
	double over = 0;
	for (int i = 0; i < THREADS; i++) {
		struct result *r = &results[i];
		CHECK(r->failures == 0, "%s: thread %d: %d failures, first: %s", name, i, r->failures,
		      r->first_failure);
		waits += r->waits, timed_out += r->timed_out, eavail += r->eavail, woke += r->woke;
		if (r->max_over_ms > over)
			over = r->max_over_ms;
	}
	ops += (uint64_t) THREADS * (PHASE2_ADDS + PHASE2_ADDS / 100 + 1);
	CHECK(ops >= 1000000 || getenv("RSCNTR_STRESS_OPS"), "%s: only %lu operations", name,
	      (unsigned long) ops);
	printf("stress %-6s: %lu ops in %.0f ms (phase 1), %lu waits: %lu met, %lu -FI_ETIMEDOUT, "
	       "%lu -FI_EAVAIL; max overshoot past a timeout %.3f ms (bound %.0f ms); blocked "
	       "waiter saw %d -FI_EAVAIL\n",
	       name, (unsigned long) ops, phase1_ms, (unsigned long) waits, (unsigned long) woke,
	       (unsigned long) timed_out, (unsigned long) eavail, over, HANG_BOUND_MS, b.eavail);
	pthread_barrier_destroy(&barrier);
	CHECK_RET(fi_close(&shared_c->fid), 0);
	for (int i = 0; i < THREADS; i++)
		CHECK_RET(fi_close(&own[i]->fid), 0);
}

static void on_alarm(int sig)
{
	(void) sig;
	static const char msg[] = "stress: HANG (watchdog fired)\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	(void) r;
	_exit(3);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(240);
	const char *ops = getenv("RSCNTR_STRESS_OPS");
	uint64_t total = ops ? strtoull(ops, NULL, 0) : 3000000;
	ops_per_thread = total / THREADS;

	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fabric = NULL;
	hints->fabric_attr->prov_name = strdup("rscntr");
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	if (!info)
		return finish("stress");
	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	if (fabric)
		CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		return finish("stress");

	run(FI_WAIT_UNSPEC, "UNSPEC");
	run(FI_WAIT_YIELD, "YIELD");
	run(FI_WAIT_FD, "FD");

	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	return finish("stress");
}
