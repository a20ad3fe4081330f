/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Trigger latency: the time from the counter increment that meets a threshold to the
 * completion of the operation it releases at the receiver, for a triggered send (rscntr posts
 * it) against the application doing the same itself (a thread of its own waits on the counter,
 * then posts the send). One RDM endpoint sends to itself; the receiver's counter (FI_RECV) is
 * polled with fi_cntr_read, which drives the core's progress.
 *
 *   trigger_lat -p <provider> [-n samples] [-m trigger|app|both]
 *   trigger_lat -p <provider> -m pp [-t 0|1] [-n iterations]
 *
 * -m pp: what an untriggered operation costs on an endpoint opened with FI_TRIGGER (-t 1)
 * against one without (-t 0): fi_send to itself and the receive, both completions read from the
 * CQ with fi_cq_read (which on an FI_TRIGGER endpoint goes through rscntr's CQ filter), n
 * iterations after 1000 warm-up ones. Output: pp_ns <per iteration> n=<iterations> trigger=<t>
 *
 * The core is FI_RSCNTR_CORE's. Both modes run in one process, interleaved in blocks of 50, on
 * the same FI_THREAD_SAFE domain (the application's thread posts beside the main thread, as
 * rscntr's does). Output, one line per mode:
 *   info core=<FI_RSCNTR_CORE> fabric=<name>
 *   trig_us <median> <p99> n=<samples>
 *   app_us <median> <p99> n=<samples>
 * The program never judges timing; its exit status is 0 when every sample completed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_trigger.h>
#include "bench.h"

#define SZ 64
#define BLOCK 50

static struct fid_domain *domain;
static struct fid_ep *ep;
static struct fid_cq *cq;
static struct fid_cntr *rxc, *trig;
static fi_addr_t self;
static char tx[SZ], rx[SZ];
static uint64_t rx_seen, trig_val;

/* The application's own thread (mode app): waits for the counter, then posts. */
static atomic_uint_fast64_t app_target;
static atomic_int app_quit;
static void *app_thread(void *arg)
{
	(void) arg;
	uint64_t done = 0;
	for (;;) {
		uint64_t t;
		while ((t = atomic_load(&app_target)) == done && !atomic_load(&app_quit))
			usleep(50);
		if (atomic_load(&app_quit))
			return NULL;
		done = t;
		while (fi_cntr_wait(trig, t, 1000) == -FI_ETIMEDOUT && !atomic_load(&app_quit))
			;
		while (fi_send(ep, tx, SZ, NULL, self, NULL) == -FI_EAGAIN)
			;
	}
}

static void drain_cq(void)
{
	struct fi_cq_entry e[8];
	while (fi_cq_read(cq, e, 8) > 0)
		;
}

static int wait_rx(void)
{
	uint64_t t0 = now_ns();
	while (fi_cntr_read(rxc) < rx_seen + 1) {
		if (now_ns() - t0 > 5000000000ull)
			return -1;
	}
	rx_seen++;
	drain_cq();
	return 0;
}

static int sample(int triggered, double *us)
{
	static struct fi_triggered_context tc;
	while (fi_recv(ep, rx, SZ, NULL, FI_ADDR_UNSPEC, NULL) == -FI_EAGAIN)
		drain_cq();
	uint64_t threshold = trig_val + 1;
	if (triggered) {
		struct iovec iov = { tx, SZ };
		struct fi_msg msg = { .msg_iov = &iov, .iov_count = 1, .addr = self, .context = &tc };
		tc.event_type = FI_TRIGGER_THRESHOLD;
		tc.trigger.threshold.cntr = trig;
		tc.trigger.threshold.threshold = threshold;
		if (fi_sendmsg(ep, &msg, FI_TRIGGER))
			return -1;
	} else {
		atomic_store(&app_target, threshold);
	}
	usleep(200); /* both waiters asleep */
	uint64_t t0 = now_ns();
	fi_cntr_add(trig, 1);
	trig_val++;
	if (wait_rx())
		return -1;
	*us = (now_ns() - t0) / 1e3;
	return 0;
}

static void report(const char *key, double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	printf("%s %.1f %.1f n=%d\n", key, v[n / 2], v[(int) (n * 0.99)], n);
}

int main(int argc, char **argv)
{
	const char *prov = "rscntr", *mode = "both";
	int n = 500, op, with_trigger = 1;
	while ((op = getopt(argc, argv, "p:n:m:t:")) != -1) {
		switch (op) {
		case 'p': prov = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 'm': mode = optarg; break;
		case 't': with_trigger = atoi(optarg); break;
		default: fprintf(stderr, "usage: trigger_lat -p prov [-n samples] [-m trigger|app|both]\n"); return 2;
		}
	}
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	hints->fabric_attr->prov_name = strdup(prov);
	hints->ep_attr->type = FI_EP_RDM;
	int pp_mode = !strcmp(mode, "pp");
	hints->caps = FI_MSG | (with_trigger || !pp_mode ? FI_TRIGGER : 0);
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	int ret = fi_getinfo(fi_version(), NULL, NULL, 0, hints, &info);
	if (ret) {
		printf("unsupported getinfo=%d(%s)\n", ret, fi_strerror(-ret));
		return 1;
	}
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		printf("unsupported mr_mode=FI_MR_LOCAL\n");
		return 1;
	}
	struct fid_fabric *fabric;
	struct fid_av *av;
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	struct fi_cntr_attr ca = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	char name[256];
	size_t len = sizeof(name);
	if (fi_fabric(info->fabric_attr, &fabric, NULL) || fi_domain(fabric, info, &domain, NULL) ||
	    fi_av_open(domain, &av_attr, &av, NULL) || fi_cq_open(domain, &cq_attr, &cq, NULL) ||
	    fi_cntr_open(domain, &ca, &rxc, NULL) || fi_cntr_open(domain, &ca, &trig, NULL) ||
	    fi_endpoint(domain, info, &ep, NULL) || fi_ep_bind(ep, &av->fid, 0) ||
	    fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) || fi_ep_bind(ep, &rxc->fid, FI_RECV) ||
	    fi_enable(ep) || fi_getname(&ep->fid, name, &len) ||
	    fi_av_insert(av, name, 1, &self, 0, NULL) != 1) {
		printf("noresult setup\n");
		return 1;
	}
	printf("info core=%s fabric=%s\n", getenv("FI_RSCNTR_CORE") ? getenv("FI_RSCNTR_CORE") : "auto",
	       info->fabric_attr->name);
	if (pp_mode) {
		struct fi_cq_entry e[4];
		uint64_t t0 = 0;
		for (int i = 0; i < 1000 + n; i++) {
			if (i == 1000)
				t0 = now_ns();
			while (fi_recv(ep, rx, SZ, NULL, FI_ADDR_UNSPEC, NULL) == -FI_EAGAIN)
				;
			while (fi_send(ep, tx, SZ, NULL, self, NULL) == -FI_EAGAIN)
				(void) fi_cq_read(cq, e, 4);
			int got = 0;
			while (got < 2) {
				ssize_t r = fi_cq_read(cq, e, 4);
				if (r > 0)
					got += (int) r;
				else if (r != -FI_EAGAIN) {
					printf("noresult cq_read=%zd\n", r);
					return 1;
				}
			}
		}
		printf("pp_ns %.1f n=%d trigger=%d\n", (now_ns() - t0) / (double) n, n, with_trigger);
		return 0;
	}
	pthread_t th;
	pthread_create(&th, NULL, app_thread, NULL);
	double *tv = calloc(n, sizeof(double)), *av_ = calloc(n, sizeof(double));
	int nt = 0, na = 0, bad = 0;
	int do_t = strcmp(mode, "app") != 0, do_a = strcmp(mode, "trigger") != 0;
	/* warm-up: connections, both paths */
	for (int i = 0; i < 20 && !bad; i++) {
		double d;
		bad |= do_t && sample(1, &d);
		bad |= do_a && sample(0, &d);
	}
	while (!bad && (nt < n * do_t || na < n * do_a)) {
		for (int i = 0; i < BLOCK && do_t && nt < n && !bad; i++)
			bad |= sample(1, &tv[nt++]);
		for (int i = 0; i < BLOCK && do_a && na < n && !bad; i++)
			bad |= sample(0, &av_[na++]);
	}
	atomic_store(&app_quit, 1);
	pthread_join(th, NULL);
	if (bad) {
		printf("noresult sample %d/%d\n", nt, na);
		return 1;
	}
	if (do_t)
		report("trig_us", tv, nt);
	if (do_a)
		report("app_us", av_, na);
	fi_close(&ep->fid);
	fi_close(&rxc->fid);
	fi_close(&trig->fid);
	fi_close(&cq->fid);
	fi_close(&av->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
