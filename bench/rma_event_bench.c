/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * RMA write pingpong and put bandwidth between two processes (forked, addresses exchanged
 * over pipes), the target learning of each write one of two ways:
 *
 *   -m cq    the initiator writes with remote CQ data (fi_writedata) and the target polls its
 *            CQ: what an application does over a core without remote-access counters
 *            (tcp;ofi_rxm directly, or rscntr over it without FI_RMA_EVENT);
 *   -m cntr  the initiator writes (fi_write) and the target polls a counter bound to its MR
 *            with FI_REMOTE_WRITE (FI_RMA_EVENT: rscntr's own over tcp and tcp;ofi_rxm).
 *
 *   rma_event_bench -p <prov> -m cq|cntr [-s size] [-n iterations] [-w window]
 *
 * Prints "lat_us <size> <median> <p99>" (one-way: half the round trip of a write answered
 * by a write) and "bw_mbs <size> <MB/s>" (windows of `window` writes, each window answered by
 * an 8-byte write). Both sides busy-poll. Timing, never a test.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include "bench.h"

#define MAXSZ (1 << 20)

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cq;
static struct fid_ep *ep;
static struct fid_mr *mr;
static struct fid_cntr *rcntr;
static fi_addr_t peer;
static char *buf;
static int use_cntr;
static uint64_t seen; /* writes from the peer taken in */
static uint64_t peer_addr, peer_key;

#define DIE(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define TRY(call) do { long _r = (long) (call); if (_r) DIE("%s: %ld (%s)", #call, _r, fi_strerror((int) -_r)); } while (0)

static void setup(const char *prov)
{
	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_RMA | FI_MSG | (use_cntr ? FI_RMA_EVENT : 0);
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_LOCAL | FI_MR_RMA_EVENT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->fabric_attr->prov_name = strdup(prov);
	TRY(fi_getinfo(FI_VERSION(1, 18), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
	TRY(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr aa = { .type = FI_AV_TABLE, .count = 2 };
	TRY(fi_av_open(domain, &aa, &av, NULL));
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_DATA, .size = 1024 };
	TRY(fi_cq_open(domain, &ca, &cq, NULL));
	TRY(fi_endpoint(domain, info, &ep, NULL));
	TRY(fi_ep_bind(ep, &av->fid, 0));
	TRY(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
	buf = aligned_alloc(4096, 2 * MAXSZ);
	memset(buf, 0, 2 * MAXSZ);
	TRY(fi_mr_reg(domain, buf, 2 * MAXSZ, FI_REMOTE_WRITE | FI_WRITE | FI_READ, 0, 1, 0, &mr, NULL));
	if (use_cntr) {
		struct fi_cntr_attr c = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
		TRY(fi_cntr_open(domain, &c, &rcntr, NULL));
		TRY(fi_mr_bind(mr, &rcntr->fid, FI_REMOTE_WRITE));
	}
	if (info->domain_attr->mr_mode & FI_MR_RMA_EVENT)
		TRY(fi_mr_enable(mr));
	TRY(fi_enable(ep));
}

/* Addresses and keys over a pipe pair. */
static void exchange(int rfd, int wfd)
{
	char name[256];
	size_t len = sizeof name;
	TRY(fi_getname(&ep->fid, name, &len));
	uint64_t a = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t) (uintptr_t) buf : 0;
	uint64_t k = fi_mr_key(mr);
	if (write(wfd, &len, sizeof len) != sizeof len || write(wfd, name, len) != (ssize_t) len ||
	    write(wfd, &a, 8) != 8 || write(wfd, &k, 8) != 8)
		DIE("pipe write");
	size_t plen;
	char pname[256];
	if (read(rfd, &plen, sizeof plen) != sizeof plen || read(rfd, pname, plen) != (ssize_t) plen ||
	    read(rfd, &peer_addr, 8) != 8 || read(rfd, &peer_key, 8) != 8)
		DIE("pipe read");
	if (fi_av_insert(av, pname, 1, &peer, 0, NULL) != 1)
		DIE("fi_av_insert");
}

/* Takes in what arrived: the peer's writes (CQ entries with remote CQ data, or the counter,
 * whose read drives the progress: a counter-driven application reads nothing else). */
static void poll_once(void)
{
	if (use_cntr) {
		seen = fi_cntr_read(rcntr);
		if (fi_cntr_readerr(rcntr))
			DIE("remote-write counter error");
		return;
	}
	struct fi_cq_data_entry e[16];
	ssize_t n = fi_cq_read(cq, e, 16);
	if (n > 0 && !use_cntr) {
		for (ssize_t i = 0; i < n; i++)
			if (e[i].flags & FI_REMOTE_CQ_DATA)
				seen++;
	} else if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee = { 0 };
		(void) fi_cq_readerr(cq, &ee, 0);
		DIE("CQ error: %s", fi_strerror(ee.err));
	}
}

static void wait_seen(uint64_t v)
{
	while (seen < v)
		poll_once();
}

/* One write of `size` bytes to the peer (its second half of the buffer). */
static void put(size_t size)
{
	ssize_t r;
	void *d = fi_mr_desc(mr);
	for (;;) {
		r = use_cntr ? fi_write(ep, buf, size, d, peer, peer_addr + MAXSZ, peer_key, NULL)
			     : fi_writedata(ep, buf, size, d, 1, peer, peer_addr + MAXSZ, peer_key, NULL);
		if (r != -FI_EAGAIN)
			break;
		poll_once();
	}
	if (r)
		DIE("write: %zd (%s)", r, fi_strerror((int) -r));
}

static void run(int rank, size_t size, int n, int window)
{
	/* warm up (connections) */
	for (int i = 0; i < 20; i++) {
		if (rank == 0) {
			put(8);
			wait_seen(seen + 1);
		} else {
			wait_seen(seen + 1);
			put(8);
		}
	}
	double *lat = calloc(n, sizeof *lat);
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		if (rank == 0) {
			put(size);
			wait_seen(seen + 1);
			lat[i] = (now_ns() - t0) / 2e3;
		} else {
			wait_seen(seen + 1);
			put(size);
		}
	}
	if (rank == 0) {
		qsort(lat, n, sizeof *lat, cmp_double);
		printf("lat_us %zu %.2f %.2f\n", size, lat[n / 2], lat[(int) (n * 0.99)]);
	}
	int windows = n / 10 > 10 ? n / 10 : 10;
	uint64_t t0 = now_ns();
	for (int w = 0; w < windows; w++) {
		if (rank == 0) {
			for (int i = 0; i < window; i++)
				put(size);
			wait_seen(seen + 1);
		} else {
			wait_seen(seen + window);
			put(8);
		}
	}
	if (rank == 0) {
		double s = (now_ns() - t0) / 1e9;
		printf("bw_mbs %zu %.1f\n", size, (double) size * window * windows / s / 1e6);
	}
	free(lat);
	/* a last exchange so that neither closes while the other still writes */
	if (rank == 0) {
		put(8);
		wait_seen(seen + 1);
	} else {
		wait_seen(seen + 1);
		put(8);
	}
	for (int i = 0; i < 1000; i++)
		poll_once();
}

int main(int argc, char **argv)
{
	const char *prov = "rscntr";
	size_t size = 8;
	int n = 2000, window = 64, op;
	while ((op = getopt(argc, argv, "p:m:s:n:w:")) != -1) {
		switch (op) {
		case 'p': prov = optarg; break;
		case 'm': use_cntr = !strcmp(optarg, "cntr"); break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': n = atoi(optarg); break;
		case 'w': window = atoi(optarg); break;
		default: fprintf(stderr, "usage: rma_event_bench -p prov -m cq|cntr [-s size] [-n n] [-w window]\n"); return 2;
		}
	}
	if (size > MAXSZ)
		DIE("size > %d", MAXSZ);
	int a[2], b[2];
	if (pipe(a) || pipe(b))
		DIE("pipe");
	pid_t child = fork();
	int rank = child == 0;
	alarm(120);
	setup(prov);
	if (rank == 0)
		exchange(b[0], a[1]);
	else
		exchange(a[0], b[1]);
	run(rank, size, n, window);
	fi_close(&ep->fid);
	fi_close(&mr->fid);
	if (rcntr)
		fi_close(&rcntr->fid);
	fi_close(&cq->fid);
	fi_close(&av->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	if (rank == 1)
		_exit(0);
	int st = 0;
	waitpid(child, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
