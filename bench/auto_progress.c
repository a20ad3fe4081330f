/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What automatic progress costs where rscntr provides it (src/layer/progress.rs): a domain
 * opened from an info asking data_progress FI_PROGRESS_AUTO (-a 1) against the same without
 * (-a 0), over FI_RSCNTR_CORE.
 *
 *   auto_progress -p <provider> -a 0|1 -m pp [-n iterations]
 *   auto_progress -p <provider> -a 0|1 -m idle [-s seconds]
 *
 * -m pp: one RDM endpoint sends 64 B to itself and reads both completions from its CQ
 *  (fi_cq_read), n iterations after 1000 warm-up ones: the application's own calls beside
 *  rscntr's progress thread. Output: pp_ns <per iteration> n=<n> auto=<a>
 * -m idle: the endpoint enabled with a receive posted, then the process sleeps s seconds making
 *  no call: the CPU time the process used meanwhile (its progress thread's). Output:
 *  idle_cpu_us_per_s <CPU microseconds per second> s=<s> auto=<a>
 * The program never judges timing; its exit status is 0 when everything completed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_eq.h>
#include "bench.h"

#define SZ 64

static double cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_sec * 1e6 +
	       ru.ru_stime.tv_usec;
}

/* Completions read so far. */
static long done;

/* Reads the CQ once (the core's progress runs); counts what it got. */
static int poll_cq(struct fid_cq *cq)
{
	struct fi_cq_entry e[4];
	ssize_t r = fi_cq_read(cq, e, 4);
	if (r > 0)
		done += r;
	return r > 0 || r == -FI_EAGAIN ? 0 : (int) r;
}

/* Reads until `target` completions in all, for at most 10 s. */
static int reap(struct fid_cq *cq, long target)
{
	double t0 = now_ns();
	while (done < target) {
		int r = poll_cq(cq);
		if (r)
			return r;
		if (now_ns() - t0 > 10e9)
			return -FI_ETIMEDOUT;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *prov = "rscntr", *mode = "pp";
	int n = 100000, with_auto = 0, seconds = 5, op;
	while ((op = getopt(argc, argv, "p:a:m:n:s:")) != -1) {
		switch (op) {
		case 'p': prov = optarg; break;
		case 'a': with_auto = atoi(optarg); break;
		case 'm': mode = optarg; break;
		case 'n': n = atoi(optarg); break;
		case 's': seconds = atoi(optarg); break;
		default: return 2;
		}
	}
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->fabric_attr->prov_name = strdup(prov);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->domain_attr->data_progress = with_auto ? FI_PROGRESS_AUTO : FI_PROGRESS_MANUAL;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	int ret = fi_getinfo(FI_VERSION(2, 0), NULL, NULL, 0, hints, &info);
	if (ret) {
		fprintf(stderr, "fi_getinfo: %s\n", fi_strerror(-ret));
		return 1;
	}
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr = NULL;
	struct fi_av_attr av_attr = { .type = FI_AV_UNSPEC };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	static char buf[2 * SZ];
	void *desc = NULL;
	fi_addr_t self;
	char name[256];
	size_t len = sizeof(name);
	if ((ret = fi_fabric(info->fabric_attr, &fabric, NULL)) ||
	    (ret = fi_domain(fabric, info, &domain, NULL)) ||
	    (ret = fi_av_open(domain, &av_attr, &av, NULL)) ||
	    (ret = fi_cq_open(domain, &cq_attr, &cq, NULL)) ||
	    (ret = fi_endpoint(domain, info, &ep, NULL)) ||
	    (ret = fi_ep_bind(ep, &av->fid, 0)) ||
	    (ret = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) || (ret = fi_enable(ep)) ||
	    (ret = fi_getname(&ep->fid, name, &len)) ||
	    (ret = fi_av_insert(av, name, 1, &self, 0, NULL)) != 1) {
		fprintf(stderr, "setup: %s\n", fi_strerror(-ret));
		return 1;
	}
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		if ((ret = fi_mr_reg(domain, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL)))
			return 1;
		desc = fi_mr_desc(mr);
	}
	printf("info core=%s data_progress=%d\n", getenv("FI_RSCNTR_CORE") ? getenv("FI_RSCNTR_CORE") : "-",
	       info->domain_attr->data_progress);
	fflush(stdout);
	if (!strcmp(mode, "idle")) {
		while ((ret = fi_recv(ep, buf + SZ, SZ, desc, self, NULL)) == -FI_EAGAIN)
			;
		usleep(100000);
		double c0 = cpu_us(), t0 = now_ns();
		sleep(seconds);
		double c1 = cpu_us(), t1 = now_ns();
		printf("idle_cpu_us_per_s %.1f s=%d auto=%d\n", (c1 - c0) / ((t1 - t0) / 1e9), seconds,
		       with_auto);
	} else {
		double t0 = 0;
		for (int i = 0; i < n + 1000; i++) {
			if (i == 1000)
				t0 = now_ns();
			while ((ret = fi_recv(ep, buf + SZ, SZ, desc, self, NULL)) == -FI_EAGAIN)
				poll_cq(cq);
			while ((ret = fi_send(ep, buf, SZ, desc, self, NULL)) == -FI_EAGAIN)
				poll_cq(cq);
			if (ret || (ret = reap(cq, 2L * (i + 1)))) {
				fprintf(stderr, "iteration %d: %s\n", i, fi_strerror(-ret));
				return 1;
			}
		}
		printf("pp_ns %.1f n=%d auto=%d\n", (now_ns() - t0) / n, n, with_auto);
	}
	if (mr)
		fi_close(&mr->fid);
	fi_close(&ep->fid);
	fi_close(&cq->fid);
	fi_close(&av->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
