/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A reader that only spins on fi_cntr_read sees every completion (FI_RSCNTR_CORE; skipped when
 * it is "none"): N receiving endpoints of one domain (SPIN_READ_EPS, default 64) are bound
 * FI_RECV to ONE counter (FI_WAIT_NONE, so nothing but reads can drive it); an endpoint of
 * another domain sends to them from a thread of its own, which drives only its own domain.
 * The receiving domain is driven by nothing but the reader's fi_cntr_read (its CQs are never
 * read: FI_SELECTIVE_COMPLETION). rscntr's reads drive the core's progress on a duty cycle
 * (src/engine/duty.rs): a read that skipped the progress for good, or one reader's turn that
 * never ended, would leave a message uncounted, and this times out.
 *
 *  1. one message at a time, each to a different endpoint in a scattered order: the reader
 *     spins until the count moves by one (10 s at most each);
 *  2. a burst of messages over every endpoint: the reader spins until it has them all;
 *  3. the same with a second thread reading too (readers racing over whose turn it is);
 *  4. fi_cntr_readerr stays 0 and the count is exact (nothing counted twice).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include "harness.h"

#define SIZE 64
#define ONE_BY_ONE 96
#define BURST 256
#define TIMEOUT_MS 10000.0

static struct fi_info *info;
static int n = 64;

/* the receiving side */
static struct fid_fabric *rfab;
static struct fid_domain *rdom;
static struct fid_av *rav;
static struct fid_ep **reps;
static struct fid_cq **rcqs;
static struct fid_cntr *cntr;
static struct fid_mr *rmr;
static char *rbufs;
static int per_ep;

/* the sending side, driven by its own thread */
static struct fid_fabric *sfab;
static struct fid_domain *sdom;
static struct fid_av *sav;
static struct fid_ep *sep;
static struct fid_cq *scq;
static struct fid_mr *smr;
static char sbuf[SIZE];
static fi_addr_t *peers;
static atomic_int to_send;  /* messages asked of the sender, in order */
static atomic_int stop;
static atomic_int send_failed;
static int target(int i) { return (int) (((unsigned) i * 37u + 11u) % (unsigned) n); }

static void *sender(void *arg)
{
	(void) arg;
	void *desc = smr ? fi_mr_desc(smr) : NULL;
	int sent = 0;
	uint64_t posted = 0, done = 0;
	while (!atomic_load(&stop)) {
		struct fi_cq_entry e[16];
		ssize_t r = fi_cq_read(scq, e, 16);
		if (r > 0)
			done += (uint64_t) r;
		else if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(scq, &err, 0);
			fprintf(stderr, "spin_read: send error %d\n", err.err);
			atomic_store(&send_failed, 1);
			return NULL;
		}
		if (sent < atomic_load(&to_send) && posted - done < 8) {
			r = fi_send(sep, sbuf, SIZE, desc, peers[target(sent)], NULL);
			if (r == 0) {
				sent++;
				posted++;
			} else if (r != -FI_EAGAIN) {
				fprintf(stderr, "spin_read: fi_send=%zd\n", r);
				atomic_store(&send_failed, 1);
				return NULL;
			}
		} else if (sent >= atomic_load(&to_send)) {
			usleep(50);
		}
	}
	return NULL;
}

/* Spins on fi_cntr_read until the count reaches `want`; the count last read. */
static uint64_t spin_until(uint64_t want, double timeout_ms)
{
	double t0 = now_ms();
	uint64_t v = 0;
	for (unsigned long k = 0;; k++) {
		v = fi_cntr_read(cntr);
		if (v >= want || atomic_load(&send_failed))
			break;
		if (!(k & 255) && now_ms() - t0 > timeout_ms)
			break;
	}
	return v;
}

static atomic_uint_fast64_t helper_reads;
static void *helper_reader(void *arg)
{
	uint64_t want = *(uint64_t *) arg;
	double t0 = now_ms();
	while (fi_cntr_read(cntr) < want && now_ms() - t0 < TIMEOUT_MS && !atomic_load(&stop))
		atomic_fetch_add(&helper_reads, 1);
	atomic_fetch_add(&helper_reads, 1); /* started, even when the first read saw them all */
	return NULL;
}

static int setup_receivers(void)
{
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE, .size = 16 };
	struct fi_av_attr ava = { .type = FI_AV_TABLE, .count = 4 };
	struct fi_cntr_attr ca = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE };
	CHECK_RET(fi_fabric(info->fabric_attr, &rfab, NULL), 0);
	if (!rfab)
		return -1;
	CHECK_RET(fi_domain(rfab, info, &rdom, NULL), 0);
	if (!rdom)
		return -1;
	CHECK_RET(fi_av_open(rdom, &ava, &rav, NULL), 0);
	CHECK_RET(fi_cntr_open(rdom, &ca, &cntr, NULL), 0);
	if (!rav || !cntr)
		return -1;
	per_ep = (ONE_BY_ONE + 2 * BURST) / n + 3;
	rbufs = calloc((size_t) n * per_ep, SIZE);
	void *desc = NULL;
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		CHECK_RET(fi_mr_reg(rdom, rbufs, (size_t) n * per_ep * SIZE, FI_RECV, 0, 0, 0, &rmr, NULL), 0);
		if (!rmr)
			return -1;
		desc = fi_mr_desc(rmr);
	}
	reps = calloc((size_t) n, sizeof(*reps));
	rcqs = calloc((size_t) n, sizeof(*rcqs));
	for (int i = 0; i < n; i++) {
		int ret = fi_cq_open(rdom, &cqa, &rcqs[i], NULL);
		if (!ret)
			ret = fi_endpoint(rdom, info, &reps[i], NULL);
		if (!ret)
			ret = fi_ep_bind(reps[i], &rav->fid, 0);
		if (!ret)
			ret = fi_ep_bind(reps[i], &rcqs[i]->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION);
		if (!ret)
			ret = fi_ep_bind(reps[i], &cntr->fid, FI_RECV);
		if (!ret)
			ret = fi_enable(reps[i]);
		for (int j = 0; !ret && j < per_ep; j++)
			ret = (int) fi_recv(reps[i], rbufs + ((size_t) i * per_ep + j) * SIZE, SIZE, desc,
					    FI_ADDR_UNSPEC, NULL);
		CHECK(ret == 0, "receiving endpoint %d of %d: %d (%s)", i + 1, n, ret, fi_strerror(-ret));
		if (ret)
			return -1;
	}
	return 0;
}

static int setup_sender(void)
{
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE, .size = 64 };
	struct fi_av_attr ava = { .type = FI_AV_TABLE, .count = (size_t) n };
	CHECK_RET(fi_fabric(info->fabric_attr, &sfab, NULL), 0);
	if (!sfab)
		return -1;
	CHECK_RET(fi_domain(sfab, info, &sdom, NULL), 0);
	if (!sdom)
		return -1;
	CHECK_RET(fi_av_open(sdom, &ava, &sav, NULL), 0);
	CHECK_RET(fi_cq_open(sdom, &cqa, &scq, NULL), 0);
	CHECK_RET(fi_endpoint(sdom, info, &sep, NULL), 0);
	if (!sav || !scq || !sep)
		return -1;
	CHECK_RET(fi_ep_bind(sep, &sav->fid, 0), 0);
	CHECK_RET(fi_ep_bind(sep, &scq->fid, FI_TRANSMIT | FI_RECV), 0);
	CHECK_RET(fi_enable(sep), 0);
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		CHECK_RET(fi_mr_reg(sdom, sbuf, sizeof(sbuf), FI_SEND, 0, 0, 0, &smr, NULL), 0);
		if (!smr)
			return -1;
	}
	peers = calloc((size_t) n, sizeof(*peers));
	for (int i = 0; i < n; i++) {
		char name[256];
		size_t len = sizeof(name);
		CHECK_RET(fi_getname(&reps[i]->fid, name, &len), 0);
		int r = fi_av_insert(sav, name, 1, &peers[i], 0, NULL);
		CHECK(r == 1, "fi_av_insert of receiving endpoint %d: %d", i, r);
		if (r != 1)
			return -1;
	}
	return 0;
}

static void run(void)
{
	pthread_t st;
	pthread_create(&st, NULL, sender, NULL);

	/* 1. one at a time */
	int lost = -1;
	double worst = 0;
	for (int i = 0; i < ONE_BY_ONE && lost < 0; i++) {
		atomic_store(&to_send, i + 1);
		double t0 = now_ms();
		uint64_t v = spin_until((uint64_t) i + 1, TIMEOUT_MS);
		double took = now_ms() - t0;
		if (took > worst)
			worst = took;
		if (v != (uint64_t) i + 1)
			lost = i;
	}
	CHECK(lost < 0, "one at a time: message %d (to endpoint %d of %d) not seen by reads within "
	      "%.0f s (count %lu)", lost, lost >= 0 ? target(lost) : -1, n, TIMEOUT_MS / 1e3,
	      (unsigned long) fi_cntr_read(cntr));
	printf("spin_read: %d messages one at a time to %d endpoints on one counter: %s (slowest "
	       "%.2f ms)\n", ONE_BY_ONE, n, lost < 0 ? "each seen by reads alone" : "LOST", worst);

	/* 2. a burst */
	uint64_t want = ONE_BY_ONE + BURST;
	if (lost < 0) {
		atomic_store(&to_send, (int) want);
		double t0 = now_ms();
		uint64_t v = spin_until(want, TIMEOUT_MS);
		CHECK(v == want, "burst: %lu of %lu counted by reads within %.0f s", (unsigned long) v,
		      (unsigned long) want, TIMEOUT_MS / 1e3);
		printf("spin_read: a burst of %d: %lu of %lu in %.2f ms\n", BURST, (unsigned long) v,
		       (unsigned long) want, now_ms() - t0);
	}

	/* 3. two readers */
	if (!h_failed) {
		uint64_t want2 = want + BURST;
		pthread_t h;
		pthread_create(&h, NULL, helper_reader, &want2);
		/* both readers spin before the burst starts */
		for (double t = now_ms(); !atomic_load(&helper_reads) && now_ms() - t < 1000;)
			(void) fi_cntr_read(cntr);
		atomic_store(&to_send, (int) want2);
		double t0 = now_ms();
		uint64_t v = spin_until(want2, TIMEOUT_MS);
		pthread_join(h, NULL);
		CHECK(v == want2, "two readers: %lu of %lu counted within %.0f s", (unsigned long) v,
		      (unsigned long) want2, TIMEOUT_MS / 1e3);
		printf("spin_read: a burst of %d with two readers: %lu of %lu in %.2f ms (the other "
		       "read %lu times)\n", BURST, (unsigned long) v, (unsigned long) want2,
		       now_ms() - t0, (unsigned long) atomic_load(&helper_reads));
		want = want2;
	}

	atomic_store(&stop, 1);
	pthread_join(st, NULL);
	CHECK(!atomic_load(&send_failed), "the sender failed");
	/* 4. exact */
	if (!h_failed) {
		usleep(20000);
		CHECK(fi_cntr_read(cntr) == want, "count %lu, expected %lu (counted twice?)",
		      (unsigned long) fi_cntr_read(cntr), (unsigned long) want);
		CHECK_RET(fi_cntr_readerr(cntr), 0);
	}
}

static void teardown(void)
{
	if (sep)
		fi_close(&sep->fid);
	if (smr)
		fi_close(&smr->fid);
	if (scq)
		fi_close(&scq->fid);
	if (sav)
		fi_close(&sav->fid);
	if (sdom)
		fi_close(&sdom->fid);
	if (sfab)
		fi_close(&sfab->fid);
	for (int i = 0; reps && i < n; i++) {
		if (reps[i])
			CHECK_RET(fi_close(&reps[i]->fid), 0);
		if (rcqs[i])
			fi_close(&rcqs[i]->fid);
	}
	if (rmr)
		fi_close(&rmr->fid);
	if (cntr)
		CHECK_RET(fi_close(&cntr->fid), 0);
	if (rav)
		fi_close(&rav->fid);
	if (rdom)
		CHECK_RET(fi_close(&rdom->fid), 0);
	if (rfab)
		fi_close(&rfab->fid);
}

int main(void)
{
	if (getenv("SPIN_READ_EPS"))
		n = atoi(getenv("SPIN_READ_EPS"));
	if (n < 1)
		n = 1;
	const char *core = NULL;
	info = rdm_thread_safe_info("spin_read", &core);
	if (!info)
		return finish("spin_read");
	printf("spin_read: core %s, %d receiving endpoints on one counter (%s progress)\n", core, n,
	       info->domain_attr->data_progress == FI_PROGRESS_AUTO ? "auto" : "manual");
	if (!setup_receivers() && !setup_sender())
		run();
	teardown();
	fi_freeinfo(info);
	return finish("spin_read");
}
