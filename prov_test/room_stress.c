/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * 64 threads in one domain, each in fi_cntr_wait on a counter of its own bound FI_RECV to an
 * endpoint of its own (FI_RSCNTR_CORE; skipped when it is "none"): the waiters of one core
 * domain, which rscntr lets one of them lead while the others sleep on their own counter
 * (src/engine/source.rs, Room). A sender endpoint in the same domain sends ROUNDS rounds of
 * one message to every endpoint; after each round every waiter must have returned with the
 * count before its timeout: a wakeup lost by the hand-off between leader and followers leaves a
 * waiter asleep until its 10 s timeout, which fails the run.
 *
 * The waiters leave their waits in every way that hands the lead on: a quarter wait with a
 * 2 ms timeout and wait again (the leader leaves on timeout, often); a quarter have errors
 * added to their counter by the main thread (the leader leaves with -FI_EAVAIL); the rest wait
 * 10 s for each message. At the end a thread waits on a counter whose endpoint the main thread
 * closes meanwhile: the wait must end with -FI_ETIMEDOUT, not hang or crash.
 *
 * Then the same again with FI_WAIT_FD counters, each thread in poll() on its counter's fd
 * (fi_trywait, poll, fi_cntr_read: libfabric's fd protocol), where the core's fd that every
 * counter's set holds is shared (tcp's progress fd, shm's doorbell): every message must still
 * reach its poller before its timeout, and the polls that returned per message are printed (the
 * herd: 1 is the poller itself) and must stay under half the pollers: one counter's set holds
 * the core's fd, the others' are made readable by rscntr's watcher (or EPOLLEXCLUSIVE, for the
 * doorbell's socket; see CoreBlocker::hold_in).
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include "harness.h"

#define N 64
/* FD mode's pollers: each counter's epoll set nests the core's fd (over rxm: set, rxm's wait
 * set, tcp's progress set, the sockets), and Linux refuses an fd reachable through more than 50
 * epoll sets at that depth (fs/eventpoll.c, path_limits): fewer counters than N. */
#define N_FD 32
#define ROUNDS 10
#define SIZE 16
#define LONG_MS 10000

enum kind { SHORT_TIMEOUTS, ERRORS, PLAIN };

struct waiter {
	int index;
	enum kind kind;
	struct fid_cntr *cntr;
	atomic_uint_fast64_t seen; /* the count the waiter last returned with */
	atomic_int lost;           /* long waits that timed out with a message sent */
	atomic_int lost_counted;   /* ... of which the counter already held the count */
	atomic_int bad;            /* other unexpected returns */
	atomic_int eavail;
	int fd;                    /* FD mode: the counter's fd */
	uint64_t errs;             /* FD mode: the error count last returned with */
	atomic_int wakes;          /* FD mode: polls that returned the fd readable */
};

static atomic_uint_fast64_t sent[N];
static atomic_int stop;
static struct waiter waiters[N];
static char rbuf[N][ROUNDS][SIZE], sbuf[SIZE];
static int fd_mode;
static struct fid_fabric *fabric;

/* FD mode's fi_cntr_wait: trywait, poll and read until the count, an error or the timeout. */
static int fd_wait(struct waiter *w, uint64_t next, int tmo)
{
	double t0 = now_ms();
	for (;;) {
		if (fi_cntr_read(w->cntr) >= next)
			return 0;
		uint64_t e = fi_cntr_readerr(w->cntr);
		if (e != w->errs) {
			w->errs = e;
			return -FI_EAVAIL;
		}
		double left = tmo - (now_ms() - t0);
		if (left <= 0)
			return -FI_ETIMEDOUT;
		struct fid *f = &w->cntr->fid;
		int tw = fi_trywait(fabric, &f, 1);
		if (tw == -FI_EAGAIN)
			continue;
		if (tw)
			return tw;
		struct pollfd p = { .fd = w->fd, .events = POLLIN };
		if (poll(&p, 1, (int) left + 1) > 0)
			atomic_fetch_add(&w->wakes, 1);
	}
}

static void *wait_loop(void *arg)
{
	struct waiter *w = arg;
	uint64_t next = 1;
	while (next <= ROUNDS && !atomic_load(&stop)) {
		int tmo = w->kind == SHORT_TIMEOUTS ? 2 : LONG_MS;
		int ret = fd_mode ? fd_wait(w, next, tmo) : fi_cntr_wait(w->cntr, next, tmo);
		if (ret == 0) {
			uint64_t v = fi_cntr_read(w->cntr);
			atomic_store(&w->seen, v);
			next = v + 1;
		} else if (ret == -FI_EAVAIL) {
			atomic_fetch_add(&w->eavail, 1);
		} else if (ret == -FI_ETIMEDOUT) {
			if (tmo == LONG_MS && atomic_load(&sent[w->index]) >= next) {
				atomic_fetch_add(&w->lost, 1);
				/* A wake lost for certain, or a count not in yet (not delivered,
				 * or nobody drove the core for it): said, both fail. */
				if (fi_cntr_read(w->cntr) >= next)
					atomic_fetch_add(&w->lost_counted, 1);
			}
		} else {
			atomic_fetch_add(&w->bad, 1);
		}
	}
	return NULL;
}

struct late {
	struct fid_cntr *cntr;
	uint64_t threshold;
	int ret;
};

static void *wait_late(void *arg)
{
	struct late *l = arg;
	l->ret = fi_cntr_wait(l->cntr, l->threshold, 500);
	return NULL;
}

static void drain(struct fid_cq *cq)
{
	struct fi_cq_entry e[16];
	while (fi_cq_read(cq, e, 16) > 0)
		;
}

static void run(struct fi_info *info, const char *core)
{
	const char *mode = fd_mode ? "FD counters in poll()" : "fi_cntr_wait";
	const int nw = fd_mode ? N_FD : N;
	memset(waiters, 0, sizeof(waiters));
	for (int i = 0; i < nw; i++)
		atomic_store(&sent[i], 0);
	atomic_store(&stop, 0);
	fabric = NULL;
	struct fid_domain *domain = NULL;
	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		return;

	struct fid_mr *rmr = NULL, *smr = NULL;
	void *rdesc = NULL, *sdesc = NULL;
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		CHECK_RET(fi_mr_reg(domain, rbuf, sizeof(rbuf), FI_RECV, 0, 1, 0, &rmr, NULL), 0);
		CHECK_RET(fi_mr_reg(domain, sbuf, sizeof(sbuf), FI_SEND, 0, 2, 0, &smr, NULL), 0);
		rdesc = rmr ? fi_mr_desc(rmr) : NULL;
		sdesc = smr ? fi_mr_desc(smr) : NULL;
	}

	/* The waiters' counters first: over shm, an endpoint the domain enables before it has a
	 * counter that waits has no doorbell, and the domain's waits fall back to re-checking every
	 * 1 ms (src/layer/doorbell/bell.rs) instead of sleeping until rung. */
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP,
					  .wait_obj = fd_mode ? FI_WAIT_FD : FI_WAIT_UNSPEC };
	for (int i = 0; i < nw; i++)
		CHECK_RET(fi_cntr_open(domain, &cntr_attr, &waiters[i].cntr, NULL), 0);

	/* The sender: an endpoint with an AV holding every receiver. */
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 2 * N };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = N + 1 };
	struct fid_av *sav = NULL;
	struct fid_cq *scq = NULL;
	struct fid_ep *sep = NULL;
	CHECK_RET(fi_av_open(domain, &av_attr, &sav, NULL), 0);
	CHECK_RET(fi_cq_open(domain, &cq_attr, &scq, NULL), 0);
	CHECK_RET(fi_endpoint(domain, info, &sep, NULL), 0);
	if (!sav || !scq || !sep)
		return;
	CHECK_RET(fi_ep_bind(sep, &sav->fid, 0), 0);
	CHECK_RET(fi_ep_bind(sep, &scq->fid, FI_TRANSMIT | FI_RECV), 0);
	CHECK_RET(fi_enable(sep), 0);
	char sname[256];
	size_t slen = sizeof(sname);
	CHECK_RET(fi_getname(&sep->fid, sname, &slen), 0);

	/* The receivers: an AV (holding the sender), a CQ, a counter and ROUNDS receives each. */
	struct fid_av *avs[N] = { 0 };
	struct fid_cq *cqs[N] = { 0 };
	struct fid_ep *eps[N] = { 0 };
	fi_addr_t addrs[N];
	for (int i = 0; i < nw; i++) {
		struct waiter *w = &waiters[i];
		w->index = i;
		w->kind = i % 4 == 0 ? SHORT_TIMEOUTS : i % 4 == 1 ? ERRORS : PLAIN;
		CHECK_RET(fi_av_open(domain, &av_attr, &avs[i], NULL), 0);
		CHECK_RET(fi_cq_open(domain, &cq_attr, &cqs[i], NULL), 0);
		CHECK_RET(fi_endpoint(domain, info, &eps[i], NULL), 0);
		if (!avs[i] || !cqs[i] || !w->cntr || !eps[i])
			return;
		CHECK_RET(fi_ep_bind(eps[i], &avs[i]->fid, 0), 0);
		CHECK_RET(fi_ep_bind(eps[i], &cqs[i]->fid,
				     FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION), 0);
		/* Over shm, every eighth counter is bound after its endpoint's fi_enable: the
		 * endpoint's doorbell name carries no slot of its, so its waiter sleeps in the
		 * domain's room while the others sleep on their own slots (src/layer/doorbell/bell.rs,
		 * SlotBlocker): both ways in one domain. */
		int late = i % 8 == 7 && strcmp(core, "shm") == 0;
		if (!late)
			CHECK_RET(fi_ep_bind(eps[i], &w->cntr->fid, FI_RECV), 0);
		if (fd_mode)
			CHECK_RET(fi_control(&w->cntr->fid, FI_GETWAIT, &w->fd), 0);
		CHECK_RET(fi_enable(eps[i]), 0);
		if (late)
			CHECK_RET(fi_ep_bind(eps[i], &w->cntr->fid, FI_RECV), 0);
		fi_addr_t from;
		CHECK_RET(fi_av_insert(avs[i], sname, 1, &from, 0, NULL), 1);
		char name[256];
		size_t len = sizeof(name);
		CHECK_RET(fi_getname(&eps[i]->fid, name, &len), 0);
		CHECK_RET(fi_av_insert(sav, name, 1, &addrs[i], 0, NULL), 1);
		for (int r = 0; r < ROUNDS; r++)
			CHECK_RET(POST(fi_recv(eps[i], rbuf[i][r], SIZE, rdesc, FI_ADDR_UNSPEC, NULL),
				       cqs[i]), 0);
	}

	pthread_t threads[N];
	for (int i = 0; i < nw; i++)
		pthread_create(&threads[i], NULL, wait_loop, &waiters[i]);
	usleep(100000);

	double t0 = now_ms();
	int late_rounds = 0;
	for (int r = 1; r <= ROUNDS; r++) {
		for (int i = 0; i < nw; i++) {
			atomic_fetch_add(&sent[i], 1);
			CHECK_RET(POST(fi_send(sep, sbuf, SIZE, sdesc, addrs[i], NULL), scq), 0);
			drain(scq);
		}
		/* Errors for a quarter of the waiters, between rounds. */
		if (r == 3 || r == 7)
			for (int i = 1; i < nw; i += 4)
				CHECK_RET(fi_cntr_adderr(waiters[i].cntr, 1), 0);
		/* Every waiter has returned with this round's count before its timeout. */
		double tr = now_ms();
		int all;
		do {
			drain(scq);
			all = 1;
			for (int i = 0; i < nw; i++)
				all &= atomic_load(&waiters[i].seen) >= (uint64_t) r;
			if (!all)
				usleep(200);
		} while (!all && now_ms() - tr < LONG_MS + 2000);
		if (!all) {
			late_rounds++;
			for (int i = 0; i < nw; i++)
				if (atomic_load(&waiters[i].seen) < (uint64_t) r)
					fprintf(stderr, "room_stress: round %d: waiter %d (kind %d) at %lu\n",
						r, i, waiters[i].kind,
						(unsigned long) atomic_load(&waiters[i].seen));
			break;
		}
	}
	CHECK(late_rounds == 0, "a round's waiters did not all return with its count");
	atomic_store(&stop, 1);
	for (int i = 0; i < nw; i++)
		pthread_join(threads[i], NULL);
	printf("room_stress: core %s, %s: %d waiters, %d rounds in %.0f ms\n", core, mode, nw, ROUNDS,
	       now_ms() - t0);

	int lost = 0, lost_counted = 0, bad = 0, eavail = 0, wrong = 0;
	for (int i = 0; i < nw; i++) {
		lost += atomic_load(&waiters[i].lost);
		lost_counted += atomic_load(&waiters[i].lost_counted);
		bad += atomic_load(&waiters[i].bad);
		eavail += atomic_load(&waiters[i].eavail);
		wrong += fi_cntr_read(waiters[i].cntr) != ROUNDS;
		if (waiters[i].kind == ERRORS)
			wrong += fi_cntr_readerr(waiters[i].cntr) != 2;
	}
	CHECK(lost == 0, "%d waits timed out after their message was sent (lost wakeups; in %d the "
			 "counter held the count, in the others it was not in yet)", lost, lost_counted);
	CHECK(bad == 0, "%d waits returned something other than 0, -FI_EAVAIL, -FI_ETIMEDOUT", bad);
	CHECK(wrong == 0, "%d counters do not read %d (or 2 errors)", wrong, ROUNDS);
	printf("room_stress: %s: %d -FI_EAVAIL returns, %d lost wakes\n", mode, eavail, lost);
	if (fd_mode) {
		long wakes = 0;
		for (int i = 0; i < nw; i++)
			wakes += atomic_load(&waiters[i].wakes);
		/* Each message and each error wakes its own poller once; the rest is the herd. */
		long own = (long) nw * ROUNDS + 2L * ((nw + 2) / 4);
		printf("room_stress: FD: %ld polls returned readable for %ld messages and errors (%.2f "
		       "each; 1.00 is no herd)\n", wakes, own, (double) wakes / (double) own);
		/* A count, not a time: a herd wakes every poller for each message (300 readable
		 * polls per message over tcp;ofi_rxm when each set held its wait set); the bound
		 * is half the pollers, far above the 1 to 7 seen without one, on any load. */
		CHECK(wakes <= own * (nw / 2), "a herd: %ld polls returned readable for %ld messages",
		      wakes, own);
	}

	/* A thread waits on a counter whose endpoint closes meanwhile. */
	struct late l = { .cntr = waiters[0].cntr, .threshold = ROUNDS + 1 };
	pthread_t lt;
	pthread_create(&lt, NULL, wait_late, &l);
	usleep(100000);
	CHECK_RET(fi_close(&eps[0]->fid), 0);
	eps[0] = NULL;
	pthread_join(lt, NULL);
	CHECK(l.ret == -FI_ETIMEDOUT, "the wait on the counter of a closed endpoint returned %d",
	      l.ret);

	for (int i = 0; i < nw; i++) {
		if (eps[i])
			CHECK_RET(fi_close(&eps[i]->fid), 0);
		CHECK_RET(fi_close(&waiters[i].cntr->fid), 0);
		CHECK_RET(fi_close(&cqs[i]->fid), 0);
		CHECK_RET(fi_close(&avs[i]->fid), 0);
	}
	CHECK_RET(fi_close(&sep->fid), 0);
	CHECK_RET(fi_close(&scq->fid), 0);
	CHECK_RET(fi_close(&sav->fid), 0);
	if (rmr)
		CHECK_RET(fi_close(&rmr->fid), 0);
	if (smr)
		CHECK_RET(fi_close(&smr->fid), 0);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
}

int main(void)
{
	const char *core = NULL;
	struct fi_info *info = rdm_thread_safe_info("room_stress", &core);
	if (!info)
		return finish("room_stress");
	for (fd_mode = 0; fd_mode < 2; fd_mode++)
		run(info, core);
	fi_freeinfo(info);
	return finish("room_stress");
}
