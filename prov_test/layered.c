/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rscntr over a core provider (FI_RSCNTR_CORE; skipped when it is "none"): an RDM endpoint
 * sends to itself and rscntr counters bound to it count the core's completions: sends with
 * and without FI_COMPLETION, injects, receives; set stays exact; a waiter in another thread
 * wakes on traffic; byte counters are refused; closing what is still bound is -FI_EBUSY; CQ
 * wait objects rscntr provides work in domains with triggered ops and automatic progress.
 */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include "harness.h"

#define N 8
#define SIZE 64

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cq;
static struct fid_ep *ep;
static struct fid_cntr *txc, *rxc;
static struct fid_mr *mr;
static fi_addr_t self;
static char buf[2 * N + 4][SIZE];
static void *desc;

static struct fid_cntr *open_cntr(enum fi_cntr_events events)
{
	struct fi_cntr_attr attr = { .events = events, .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cntr *c = NULL;
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), 0);
	return c;
}

static void post_recvs(int n)
{
	static int next;
	for (int i = 0; i < n; i++, next++)
		CHECK_RET(POST(fi_recv(ep, buf[N + 4 + next % N], SIZE, desc, FI_ADDR_UNSPEC, NULL), cq), 0);
}

static void *add_later(void *arg)
{
	(void) arg;
	usleep(20000);
	ssize_t ret = POST(fi_send(ep, buf[0], SIZE, desc, self, NULL), cq);
	CHECK_RET(ret, 0);
	return NULL;
}

/* A CQ whose wait object rscntr provides (tcp and rxm refuse FI_WAIT_YIELD, shm FI_WAIT_FD)
 * in a domain whose CQs rscntr also filters once bound (triggered operations, automatic
 * progress): both patches stay usable, sread/control/close included. */
static void provided_waits_in_filtered_domain(struct fi_info *base)
{
	static const enum fi_wait_obj waits[] = { FI_WAIT_YIELD, FI_WAIT_FD, FI_WAIT_UNSPEC };
	struct fi_info *hints = fi_dupinfo(base), *info = NULL;
	hints->caps |= FI_TRIGGER;
#if FI_MAJOR_VERSION >= 2
	hints->domain_attr->progress = FI_PROGRESS_AUTO;
#else
	hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
#endif
	free(hints->fabric_attr->name);
	hints->fabric_attr->name = NULL;
	free(hints->domain_attr->name);
	hints->domain_attr->name = NULL;
	int ret = fi_getinfo(pt_api(), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	CHECK_RET(ret, 0);
	if (ret)
		return;
	struct fid_fabric *fab = NULL;
	struct fid_domain *dom = NULL;
	CHECK_RET(fi_fabric(info->fabric_attr, &fab, NULL), 0);
	CHECK_RET(fi_domain(fab, info, &dom, NULL), 0);
	for (size_t k = 0; dom && k < sizeof(waits) / sizeof(waits[0]); k++) {
		struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 16, .wait_obj = waits[k] };
		struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
		struct fid_av *a = NULL;
		struct fid_cq *c = NULL;
		struct fid_ep *e = NULL;
		struct fid_mr *m = NULL;
		void *d = NULL;
		fi_addr_t me = FI_ADDR_UNSPEC;
		CHECK_RET(fi_av_open(dom, &av_attr, &a, NULL), 0);
		CHECK_RET(fi_cq_open(dom, &cq_attr, &c, NULL), 0);
		CHECK_RET(fi_endpoint(dom, info, &e, NULL), 0);
		if (!a || !c || !e)
			break;
		CHECK_RET(fi_ep_bind(e, &a->fid, 0), 0);
		CHECK_RET(fi_ep_bind(e, &c->fid, FI_TRANSMIT | FI_RECV), 0);
		CHECK_RET(fi_enable(e), 0);
		if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
			CHECK_RET(fi_mr_reg(dom, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 0, 0, &m, NULL), 0);
			d = m ? fi_mr_desc(m) : NULL;
		}
		char name[256];
		size_t len = sizeof(name);
		CHECK_RET(fi_getname(&e->fid, name, &len), 0);
		CHECK_RET(fi_av_insert(a, name, 1, &me, 0, NULL), 1);
		enum fi_wait_obj got = FI_WAIT_NONE;
		/* rscntr answers for the wait objects it provides; the cores' own CQs may not
		 * (shm: -FI_ENOSYS, sockets: -FI_EINVAL) */
		ret = fi_control(&c->fid, FI_GETWAITOBJ, &got);
		CHECK(ret == -FI_ENOSYS || ret == -FI_EINVAL || got == waits[k] || waits[k] == FI_WAIT_UNSPEC,
		      "FI_GETWAITOBJ: %d, wait object %d, asked %d", ret, got, waits[k]);
		if (waits[k] == FI_WAIT_FD) {
			/* rxd's own FD CQs answer -FI_ENOSYS */
			int fd = -1;
			ret = fi_control(&c->fid, FI_GETWAIT, &fd);
			CHECK(ret == -FI_ENOSYS || (ret == 0 && fd >= 0), "FI_GETWAIT: %d, fd %d", ret, fd);
		}
		int ctx_r, ctx_s;
		CHECK_RET(fi_recv(e, buf[N + 4], SIZE, d, FI_ADDR_UNSPEC, &ctx_r), 0);
		CHECK_RET(POST(fi_send(e, buf[0], SIZE, d, me, &ctx_s), c), 0);
		int seen = 0;
		for (int tries = 0; seen < 2 && tries < 100; tries++) {
			struct fi_cq_entry ent;
			ssize_t n = fi_cq_sread(c, &ent, 1, NULL, 100);
			if (n == 1)
				seen++;
			else
				CHECK(n == -FI_EAGAIN, "fi_cq_sread (wait %d): %zd", waits[k], n);
		}
		CHECK(seen == 2, "wait %d: %d of 2 completions read by fi_cq_sread", waits[k], seen);
		if (m)
			CHECK_RET(fi_close(&m->fid), 0);
		CHECK_RET(fi_close(&e->fid), 0);
		CHECK_RET(fi_close(&c->fid), 0);
		CHECK_RET(fi_close(&a->fid), 0);
	}
	if (dom)
		CHECK_RET(fi_close(&dom->fid), 0);
	if (fab)
		CHECK_RET(fi_close(&fab->fid), 0);
	fi_freeinfo(info);
}

int main(void)
{
	const char *core = getenv("FI_RSCNTR_CORE");
	if (core && !strcmp(core, "none")) {
		printf("layered: FI_RSCNTR_CORE=none, nothing to test\n");
		return finish("layered");
	}
	printf("layered: FI_RSCNTR_CORE=%s\n", core ? core : "(unset)");

	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	hints->fabric_attr->prov_name = strdup("rscntr");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	int ret = fi_getinfo(pt_api(), NULL, NULL, 0, hints, &info);
	if (ret == -FI_ENODATA) {
		/* a datagram-only core (udp) or a connection-only one (libfabric 1.17's tcp) has no
		 * RDM endpoint to test: say so, but only if it really answers for DGRAM or MSG */
		struct fi_info *other = NULL;
		hints->ep_attr->type = FI_EP_DGRAM;
		hints->domain_attr->mr_mode = 0;
		int dgram = fi_getinfo(pt_api(), NULL, NULL, 0, hints, &other) == 0;
		if (!dgram) {
			hints->ep_attr->type = FI_EP_MSG;
			CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &other), 0);
		}
		printf("layered: the core has no RDM endpoints (only %s); nothing to count over\n",
		       dgram ? "DGRAM" : "MSG");
		fi_freeinfo(other);
		fi_freeinfo(hints);
		return finish("layered");
	}
	CHECK_RET(ret, 0);
	fi_freeinfo(hints);
	if (!info)
		return finish("layered");
	CHECK(!strcmp(info->fabric_attr->prov_name, "rscntr"), "prov_name %s", info->fabric_attr->prov_name);
	/* a primary capability: only when asked for (rscntr's own, over every core) */
	CHECK(!(info->caps & FI_TRIGGER), "FI_TRIGGER in an info for hints without it");

	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	CHECK_RET(fi_av_open(domain, &av_attr, &av, NULL), 0);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 64 };
	CHECK_RET(fi_cq_open(domain, &cq_attr, &cq, NULL), 0);
	txc = open_cntr(FI_CNTR_EVENTS_COMP);
	rxc = open_cntr(FI_CNTR_EVENTS_COMP);
	struct fid_cntr *bytes = open_cntr(PT_CNTR_EVENTS_BYTES);
	CHECK_RET(fi_endpoint(domain, info, &ep, NULL), 0);
	if (!ep || !txc || !rxc || !bytes)
		return finish("layered");
	CHECK_RET(fi_ep_bind(ep, &av->fid, 0), 0);
	CHECK_RET(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION), 0);
	CHECK_RET(fi_ep_bind(ep, &txc->fid, FI_SEND), 0);
	CHECK_RET(fi_ep_bind(ep, &rxc->fid, FI_RECV), 0);
	CHECK_RET(fi_ep_bind(ep, &bytes->fid, FI_SEND), -FI_EOPNOTSUPP);
	CHECK_RET(fi_enable(ep), 0);
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		CHECK_RET(fi_mr_reg(domain, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL), 0);
		desc = mr ? fi_mr_desc(mr) : NULL;
	}

	char name[256];
	size_t len = sizeof(name);
	CHECK_RET(fi_getname(&ep->fid, name, &len), 0);
	CHECK_RET(fi_av_insert(av, name, 1, &self, 0, NULL), 1);

	/* a send with a completion, an inject, and a sendmsg without FI_COMPLETION: all counted */
	post_recvs(3);
	CHECK_RET(POST(fi_send(ep, buf[0], SIZE, desc, self, NULL), cq), 0);
	CHECK_RET(POST(fi_inject(ep, buf[1], 8, self), cq), 0);
	struct iovec iov = { .iov_base = buf[2], .iov_len = SIZE };
	struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = self };
	CHECK_RET(POST(fi_sendmsg(ep, &msg, 0), cq), 0);
	CHECK_RET(fi_cntr_wait(txc, 3, 10000), 0);
	CHECK_RET(fi_cntr_wait(rxc, 3, 10000), 0);
	CHECK(fi_cntr_read(txc) == 3, "tx counted %lu of 3", (unsigned long) fi_cntr_read(txc));
	CHECK(fi_cntr_read(rxc) == 3, "rx counted %lu of 3", (unsigned long) fi_cntr_read(rxc));
	CHECK(fi_cntr_readerr(txc) == 0 && fi_cntr_readerr(rxc) == 0, "errors counted");

	/* set stays exact: completions after it add to the new value */
	CHECK_RET(fi_cntr_set(txc, 100), 0);
	CHECK(fi_cntr_read(txc) == 100, "set gave %lu", (unsigned long) fi_cntr_read(txc));
	post_recvs(1);
	CHECK_RET(POST(fi_send(ep, buf[0], SIZE, desc, self, NULL), cq), 0);
	CHECK_RET(fi_cntr_wait(txc, 101, 10000), 0);
	CHECK_RET(fi_cntr_wait(rxc, 4, 10000), 0);
	CHECK(fi_cntr_read(txc) == 101, "tx %lu after set", (unsigned long) fi_cntr_read(txc));

	/* a waiter wakes on traffic started by another thread (the waiter drives progress) */
	post_recvs(1);
	pthread_t t;
	pthread_create(&t, NULL, add_later, NULL);
	CHECK_RET(fi_cntr_wait(rxc, 5, 10000), 0);
	pthread_join(t, NULL);
	CHECK_RET(fi_cntr_wait(txc, 102, 10000), 0);

	/* what is still bound or open cannot close */
	CHECK_RET(fi_close(&txc->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&domain->fid), -FI_EBUSY);
	CHECK_RET(fi_close(&bytes->fid), 0);

	if (mr)
		CHECK_RET(fi_close(&mr->fid), 0);
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&txc->fid), 0);
	CHECK_RET(fi_close(&rxc->fid), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	provided_waits_in_filtered_domain(info);
	fi_freeinfo(info);
	return finish("layered");
}
