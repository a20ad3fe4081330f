/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A chain of triggered sends: each send starts by itself once the one before it has completed.
 *
 * An RDM endpoint sends N messages to itself. Only the first is posted as an ordinary send; the
 * other N - 1 are queued beforehand with FI_TRIGGER, each waiting on the endpoint's send counter:
 *
 *     struct fi_triggered_context2 ctx = {
 *             .event_type = FI_TRIGGER_THRESHOLD,
 *             .trigger.threshold = { .cntr = txcntr, .threshold = i },
 *     };
 *     msg.context = &ctx;                         // the triggered context is the op's context
 *     fi_sendmsg(ep, &msg, FI_TRIGGER);           // send i: starts when txcntr reaches i
 *
 * Why one counter and thresholds 1..N-1: the counter is bound with FI_SEND, so its value is
 * "how many sends of this endpoint have completed". Send i waits for the value i, i.e. for
 * sends 0..i-1 to have completed: each send is started by the completion of the one before
 * it, with no application code in between. (A counter per stage would say the same thing less
 * directly: counters count per endpoint, not per operation, so it would take one endpoint per
 * stage, or the application bumping each stage's counter itself.) Operations waiting on one
 * counter start in threshold order, whatever order they were queued in: this program queues
 * them backwards on purpose, and checks that the messages still arrive 0, 1, ..., N-1.
 *
 * Build: cc trigger_chain.c -o trigger_chain $(pkg-config --cflags --libs libfabric)
 * Run:   FI_PROVIDER=rscntr ./trigger_chain
 *        (add FI_PROVIDER_PATH=<directory of librscntr-fi.so> unless rscntr is installed in
 *        libfabric's provider directory; FI_RSCNTR_CORE picks the provider underneath).
 *        Exits 0 when every check passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_trigger.h>

#define N 8            /* sends in the chain */
#define SIZE 32
#define TIMEOUT_MS 10000

#define DIE(...)                                                                          \
	do {                                                                              \
		fprintf(stderr, "trigger_chain: FAIL: " __VA_ARGS__);                     \
		fprintf(stderr, "\n");                                                    \
		exit(1);                                                                  \
	} while (0)
#define TRY(call)                                                                         \
	do {                                                                              \
		int _ret = (int) (call);                                                  \
		if (_ret)                                                                 \
			DIE("%s: %s", #call, fi_strerror(-_ret));                         \
	} while (0)

static struct {
	char tx[N][SIZE];
	char rx[N][SIZE];
} buf;

int main(void)
{
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_cntr *txcntr, *rxcntr;
	struct fid_mr *mr = NULL;
	void *desc = NULL;
	fi_addr_t self;

	/* An RDM endpoint of rscntr with triggered operations; sends arrive in the order they
	 * start (FI_ORDER_SAS). */
	hints = fi_allocinfo();
	if (!hints)
		DIE("fi_allocinfo");
	hints->fabric_attr->prov_name = strdup("rscntr");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TRIGGER;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	int ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &info);
	if (ret)
		DIE("fi_getinfo(FI_MSG | FI_TRIGGER): %s (is rscntr installed, or FI_PROVIDER_PATH "
		    "set?)", fi_strerror(-ret));

	TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
	TRY(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 1 };
	TRY(fi_av_open(domain, &av_attr, &av, NULL));
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 4 * N };
	TRY(fi_cq_open(domain, &cq_attr, &cq, NULL));
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	TRY(fi_cntr_open(domain, &cntr_attr, &txcntr, NULL));
	TRY(fi_cntr_open(domain, &cntr_attr, &rxcntr, NULL));

	TRY(fi_endpoint(domain, info, &ep, NULL));
	TRY(fi_ep_bind(ep, &av->fid, 0));
	TRY(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_ep_bind(ep, &txcntr->fid, FI_SEND)); /* counts completed sends: the trigger */
	TRY(fi_ep_bind(ep, &rxcntr->fid, FI_RECV));
	TRY(fi_enable(ep));
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		TRY(fi_mr_reg(domain, &buf, sizeof(buf), FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL));
		desc = fi_mr_desc(mr);
	}

	/* Send to ourselves. */
	char name[256];
	size_t len = sizeof(name);
	TRY(fi_getname(&ep->fid, name, &len));
	if (fi_av_insert(av, name, 1, &self, 0, NULL) != 1)
		DIE("fi_av_insert of the endpoint's own address");

	/* The receives, in order: message i lands in buf.rx[i]. */
	static struct fi_context2 rx_ctx[N];
	for (int i = 0; i < N; i++)
		TRY(fi_recv(ep, buf.rx[i], SIZE, desc, FI_ADDR_UNSPEC, &rx_ctx[i]));

	/* Sends N-1 down to 1, queued backwards: send i starts when txcntr reaches i. The context
	 * must stay valid until the send completes. fi_triggered_context2 is the larger of the two
	 * kinds, so it serves whether or not the provider's mode asks for FI_CONTEXT2. */
	static struct fi_triggered_context2 trig_ctx[N];
	for (int i = N - 1; i >= 1; i--) {
		snprintf(buf.tx[i], SIZE, "stage %d", i);
		trig_ctx[i].event_type = FI_TRIGGER_THRESHOLD;
		trig_ctx[i].trigger.threshold.cntr = txcntr;
		trig_ctx[i].trigger.threshold.threshold = i;
		struct iovec iov = { .iov_base = buf.tx[i], .iov_len = SIZE };
		struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = self,
				      .context = &trig_ctx[i] };
		TRY(fi_sendmsg(ep, &msg, FI_TRIGGER));
	}
	if (fi_cntr_read(txcntr) != 0 || fi_cntr_read(rxcntr) != 0)
		DIE("a triggered send started before the chain did");

	/* Start the chain: an ordinary send. (A connection-based core may ask us to retry while
	 * it connects; reading the CQ drives that progress.) */
	static struct fi_context2 first_ctx;
	snprintf(buf.tx[0], SIZE, "stage 0");
	struct fi_cq_entry entries[4 * N];
	int n_entries = 0;
	while ((ret = (int) fi_send(ep, buf.tx[0], SIZE, desc, self, &first_ctx)) == -FI_EAGAIN) {
		ssize_t n = fi_cq_read(cq, &entries[n_entries], 4 * N - n_entries);
		if (n > 0)
			n_entries += (int) n;
	}
	if (ret)
		DIE("fi_send: %s", fi_strerror(-ret));

	/* Wait for the whole chain: N sends completed, N messages received. fi_cntr_wait drives
	 * the provider's progress while it waits. */
	if ((ret = fi_cntr_wait(txcntr, N, TIMEOUT_MS)))
		DIE("the chain stopped: %lu of %d sends completed (%s)",
		    (unsigned long) fi_cntr_read(txcntr), N, fi_strerror(-ret));
	if ((ret = fi_cntr_wait(rxcntr, N, TIMEOUT_MS)))
		DIE("%lu of %d messages received (%s)", (unsigned long) fi_cntr_read(rxcntr), N,
		    fi_strerror(-ret));

	/* The messages arrived in chain order, though the sends were queued backwards. */
	for (int i = 0; i < N; i++) {
		char want[SIZE];
		snprintf(want, SIZE, "stage %d", i);
		if (strcmp(buf.rx[i], want))
			DIE("message %d is \"%.*s\", expected \"%s\"", i, SIZE, buf.rx[i], want);
	}

	/* Every triggered send completed like an ordinary one: its CQ entry carries the triggered
	 * context as op_context. 2 * N entries in all (N sends, N receives). */
	for (int tries = 0; n_entries < 2 * N && tries < TIMEOUT_MS; tries++) {
		ssize_t n = fi_cq_read(cq, &entries[n_entries], 4 * N - n_entries);
		if (n > 0)
			n_entries += (int) n;
		else if (n != -FI_EAGAIN)
			DIE("fi_cq_read: %s", fi_strerror((int) -n));
		else
			fi_cntr_wait(txcntr, N + 1, 1); /* a 1 ms pause that keeps progress going */
	}
	for (int i = 1; i < N; i++) {
		int found = 0;
		for (int k = 0; k < n_entries; k++)
			found += entries[k].op_context == &trig_ctx[i];
		if (found != 1)
			DIE("send %d: %d CQ entries with its triggered context, expected 1", i, found);
	}

	printf("trigger_chain: %d sends, %d of them triggered by the send counter reaching 1..%d, "
	       "arrived in order: PASS\n", N, N - 1, N - 1);

	fi_close(&ep->fid);
	if (mr)
		fi_close(&mr->fid);
	fi_close(&txcntr->fid);
	fi_close(&rxcntr->fid);
	fi_close(&cq->fid);
	fi_close(&av->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
