/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Triggered operations (FI_TRIGGER, fi_trigger(3)) and the deferred work queue
 * (fi_control(domain, FI_QUEUE_WORK)) over a core provider (FI_RSCNTR_CORE). One RDM endpoint
 * sends to itself (FI_ORDER_SAS, so messages arrive in the order they start), as layered.c does.
 *
 * | part        | checks                                                                        |
 * |-------------|-------------------------------------------------------------------------------|
 * | order       | triggered fi_sendmsg with thresholds 3,1,2,2,5 submitted in that order start   |
 * |             | in threshold order (ties in submission order) when fi_cntr_add(c, 5) meets all |
 * |             | at once; nothing starts before; one CQ entry each, op_context = the triggered  |
 * |             | context; then thresholds met one step at a time by add, adderr, set            |
 * | met         | a threshold already met at submission starts with no further counter change   |
 * | completion  | a counter bound FI_SEND (FI_RECV) releases a triggered send when a normal      |
 * |             | send (receive) completes                                                       |
 * | calls       | fi_recvmsg, fi_trecvmsg, fi_tsendmsg, fi_writemsg, fi_readmsg, fi_atomicmsg,   |
 * |             | fi_fetch_atomicmsg, fi_compare_atomicmsg with FI_TRIGGER: nothing happens      |
 * |             | before the threshold, the data is right after, CQ entry with the context       |
 * | alias       | fi_ep_alias(FI_TRANSMIT | FI_TRIGGER): fi_send and fi_write through it are     |
 * |             | triggered (the context argument is the triggered context); the alias closes    |
 * | errors      | FI_TRIGGER|FI_INJECT, threshold.cntr NULL, another domain's counter, unknown   |
 * |             | event_type: -FI_EINVAL; FI_TRIGGER_XPU: -FI_ENOSYS; nothing queued             |
 * | cancel      | closing an endpoint / counter with unfired triggered ops: -FI_EBUSY;           |
 * |             | fi_cancel removes one (0, one FI_ECANCELED error entry) and then both close    |
 * | work        | FI_QUEUE_WORK with FI_OP_CNTR_SET / FI_OP_CNTR_ADD: deferred, already met,     |
 * |             | errors count, completion_cntr / unknown op_type / NULL triggering_cntr refused,|
 * |             | FI_CANCEL_WORK (0, then -FI_ENOENT), FI_FLUSH_WORK, a chain of three works     |
 * | data work   | FI_OP_SEND/RECV/TSEND/TRECV/WRITE/READ/                                        |
 * |             | ATOMIC: completion_cntr +1 each, no CQ entry, bound counters unmoved, unless   |
 * |             | FI_COMPLETION; 200 times a completion counter closed as soon as it reads its  |
 * |             | count: never -FI_EBUSY                                                        |
 * | refused     | (FI_RSCNTR_TEST_FAIL=post only, instead of the rest) a deferred send the core |
 * |             | refuses: one error of its completion counter; a refused triggered send: none  |
 * | stress      | 4 threads add 1 x 10000 while 200 deferred FI_OP_CNTR_ADD (thresholds 1..40000 |
 * |             | with ties) and 20 triggered sends wait: each fires exactly once, in order      |
 * | queueing    | 8 threads fi_cntr_add / fi_cntr_adderr (1 in 8) 5000 times while 2000         |
 * |             | triggered sends with increasing thresholds 1..40000 (pairs tied) are queued,  |
 * |             | in step with them: blocks of 50 by turns met at submission (started in the    |
 * |             | submitting thread, beside the trigger thread) and waiting for the adds; one   |
 * |             | CQ entry each with its triggered context, and the receives (a window of 64,   |
 * |             | reposted) get them in threshold order (payload = sequence number)             |
 *
 * Skipped, with the reason printed: FI_RSCNTR_CORE=none, a core without RDM endpoints (udp),
 * a provider without counters, and the parts whose capabilities (FI_RMA, FI_ATOMIC, FI_TAGGED)
 * the returned info lacks. A provider that has RDM endpoints but refuses FI_TRIGGER is a failure.
 *
 * RSCNTR_TEST_PROV names the provider (default rscntr), so that the test's own logic can be
 * checked against a provider with native triggered operations, e.g. RSCNTR_TEST_PROV=sockets.
 * Every wait is bounded (TMO); a watchdog alarm turns a hang into a failure exit.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_trigger.h>
#include "harness.h"

#define NAME "trigger"
#define SZ 64
#define TMO 5000   /* ms: the longest any single wait may take */
#define QUIET 100  /* ms: how long "nothing happens" is watched */
#define NSLOT 256
#define NCTX 2560
#define QA_SENDS 2000 /* the "queueing" part's triggered sends, and its receive window */
#define QA_WIN 64
#define QA_SZ 16

static const char *prov;
static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cq;
static struct fid_ep *ep;
static struct fid_cntr *txc, *rxc; /* bound to ep: FI_SEND, FI_RECV */
static struct fid_mr *mr;
static fi_addr_t self;
static int need_ctx2, has_tagged, has_rma, has_atomic;
static void *desc;
static uint64_t rkey;

/* Everything the endpoint touches, registered as one region. */
static struct {
	char tx[NSLOT][SZ];
	char rx[NSLOT][SZ];
	char rma[16][SZ];
	char rd[16][SZ];
	uint64_t atom[16];
	uint64_t operand[16];
	uint64_t res[16];
	uint64_t cmp[16];
	char qa_tx[QA_SENDS][QA_SZ];
	char qa_rx[QA_WIN][QA_SZ];
} mem;
static int next_tx, next_rx;
static struct fi_context2 rctx[NSLOT], nctx[NSLOT]; /* contexts of normal receives, sends */
static int next_nctx;
static int pending_rx[NSLOT], npending_rx; /* receives posted since the last settle() */

/* ---------------------------------------------------------------------------------------- */
/* triggered contexts: both kinds; fi_triggered_context2 wherever the mode has FI_CONTEXT2 */

static struct fi_triggered_context tc1[NCTX];
static struct fi_triggered_context2 tc2[NCTX];
static int n_tc1, n_tc2, toggle;

static void *tctx_kind(int kind, enum fi_trigger_event ev, struct fid_cntr *c, size_t thr)
{
	if (kind == 2 && n_tc2 < NCTX) {
		struct fi_triggered_context2 *t = &tc2[n_tc2++];
		memset(t, 0, sizeof(*t));
		t->event_type = ev;
		t->trigger.threshold.cntr = c;
		t->trigger.threshold.threshold = thr;
		return t;
	}
	if (kind == 1 && n_tc1 < NCTX) {
		struct fi_triggered_context *t = &tc1[n_tc1++];
		memset(t, 0, sizeof(*t));
		t->event_type = ev;
		t->trigger.threshold.cntr = c;
		t->trigger.threshold.threshold = thr;
		return t;
	}
	fprintf(stderr, NAME ": out of triggered contexts\n");
	exit(2);
}

/* A threshold context on c: fi_triggered_context2 if the mode asks FI_CONTEXT2, else the two
 * kinds by turns. */
static void *tctx(struct fid_cntr *c, size_t thr)
{
	int kind = need_ctx2 ? 2 : (toggle++ & 1) + 1;
	return tctx_kind(kind, FI_TRIGGER_THRESHOLD, c, thr);
}

/* ---------------------------------------------------------------------------------------- */
/* the CQ, read into a log                                                                   */

struct ent {
	void *ctx;
	uint64_t flags;
	int err;
};
#define CQLOG 16384
static struct ent cqlog[CQLOG];
static int ncqlog;
static pthread_mutex_t cqlock = PTHREAD_MUTEX_INITIALIZER;

/* Reads everything the CQ has now; returns the last fi_cq_read result. */
static ssize_t cq_poll(void)
{
	struct fi_cq_tagged_entry e[16];
	ssize_t n;
	pthread_mutex_lock(&cqlock);
	for (int rounds = 0; rounds < 64; rounds++) {
		n = fi_cq_read(cq, e, 16);
		if (n > 0) {
			for (ssize_t i = 0; i < n && ncqlog < CQLOG; i++)
				cqlog[ncqlog++] = (struct ent) { e[i].op_context, e[i].flags, 0 };
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry ee;
			memset(&ee, 0, sizeof(ee));
			if (fi_cq_readerr(cq, &ee, 0) == 1 && ncqlog < CQLOG)
				cqlog[ncqlog++] = (struct ent) { ee.op_context, ee.flags, ee.err ? ee.err : -1 };
			continue;
		}
		break;
	}
	pthread_mutex_unlock(&cqlock);
	return n;
}

static int cq_count(void *ctx)
{
	int k = 0;
	pthread_mutex_lock(&cqlock);
	for (int i = 0; i < ncqlog; i++)
		k += cqlog[i].ctx == ctx;
	pthread_mutex_unlock(&cqlock);
	return k;
}

static struct ent *cq_find(void *ctx)
{
	struct ent *r = NULL;
	pthread_mutex_lock(&cqlock);
	for (int i = 0; i < ncqlog && !r; i++)
		if (cqlog[i].ctx == ctx)
			r = &cqlog[i];
	pthread_mutex_unlock(&cqlock);
	return r;
}

/* Before a context is used again: its old entries no longer count. */
static void cq_forget(void *ctx)
{
	pthread_mutex_lock(&cqlock);
	for (int i = 0; i < ncqlog; i++)
		if (cqlog[i].ctx == ctx)
			cqlog[i].ctx = NULL;
	pthread_mutex_unlock(&cqlock);
}

/* Reads the CQ until ctx has an entry, at most TMO; returns the entry or NULL. */
static struct ent *cq_wait(void *ctx)
{
	double t0 = now_ms();
	struct ent *e;
	while (!(e = cq_find(ctx)) && now_ms() - t0 < TMO) {
		cq_poll();
		usleep(100);
	}
	return e;
}

/* Reads the CQ (driving progress) for ms milliseconds. */
static void quiet(int ms)
{
	double t0 = now_ms();
	while (now_ms() - t0 < ms) {
		cq_poll();
		usleep(500);
	}
}

static uint64_t cval(struct fid_cntr *c)
{
	return fi_cntr_read(c) + fi_cntr_readerr(c);
}

/* Waits until c's success + error count reaches v (reading the CQ meanwhile), at most ms. */
static int wait_cntr_ms(struct fid_cntr *c, uint64_t v, int ms)
{
	double t0 = now_ms();
	for (;;) {
		cq_poll();
		if (cval(c) >= v)
			return 1;
		if (now_ms() - t0 > ms)
			return 0;
		(void) fi_cntr_wait(c, v, 1);
	}
}
#define WAIT_CNTR(c, v)                                                                   \
	CHECK(wait_cntr_ms(c, v, TMO), "counter %s reached %" PRIu64 " of %" PRIu64, #c,   \
	      cval(c), (uint64_t) (v))

static struct fid_cntr *open_cntr_in(struct fid_domain *d)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cntr *c = NULL;
	CHECK_RET(fi_cntr_open(d, &attr, &c, NULL), 0);
	return c;
}
static struct fid_cntr *open_cntr(void)
{
	return open_cntr_in(domain);
}
static void close_cntr(struct fid_cntr *c)
{
	if (c)
		CHECK_RET(fi_close(&c->fid), 0);
}

static uint64_t raddr(const void *p)
{
	return (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t) (uintptr_t) p
							       : (uint64_t) ((uintptr_t) p - (uintptr_t) &mem);
}

/* ---------------------------------------------------------------------------------------- */
/* posting                                                                                   */

static int post_recv(void)
{
	int s = next_rx++ % NSLOT;
	memset(mem.rx[s], 0, SZ);
	cq_forget(&rctx[s]);
	CHECK_RET(POST(fi_recv(ep, mem.rx[s], SZ, desc, FI_ADDR_UNSPEC, &rctx[s]), cq), 0);
	pending_rx[npending_rx++ % NSLOT] = s;
	return s;
}

static int post_trecv(uint64_t tag)
{
	int s = next_rx++ % NSLOT;
	memset(mem.rx[s], 0, SZ);
	cq_forget(&rctx[s]);
	CHECK_RET(POST(fi_trecv(ep, mem.rx[s], SZ, desc, FI_ADDR_UNSPEC, tag, 0, &rctx[s]), cq), 0);
	pending_rx[npending_rx++ % NSLOT] = s;
	return s;
}

static int fill_tx(const char *payload)
{
	int s = next_tx++ % NSLOT;
	memset(mem.tx[s], 0, SZ);
	snprintf(mem.tx[s], SZ, "%s", payload);
	return s;
}

static void send_now(const char *payload)
{
	int s = fill_tx(payload);
	void *ctx = &nctx[next_nctx++ % NSLOT];
	cq_forget(ctx);
	CHECK_RET(POST(fi_send(ep, mem.tx[s], SZ, desc, self, ctx), cq), 0);
}

/* fi_sendmsg of payload with the given context and flags (FI_TRIGGER added). */
static ssize_t trig_send_on(struct fid_ep *e, const char *payload, void *ctx, uint64_t flags)
{
	int s = fill_tx(payload);
	struct iovec iov = { .iov_base = mem.tx[s], .iov_len = SZ };
	struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = self,
			      .context = ctx };
	return POST(fi_sendmsg(e, &msg, flags | FI_TRIGGER), cq);
}
static ssize_t trig_send(const char *payload, void *ctx)
{
	return trig_send_on(ep, payload, ctx, 0);
}

/* fi_tsendmsg, for the cases that must not reach an untagged receive by accident. */
static ssize_t trig_tsend_on(struct fid_ep *e, uint64_t tag, void *ctx, uint64_t flags)
{
	int s = fill_tx("stray");
	struct iovec iov = { .iov_base = mem.tx[s], .iov_len = SZ };
	struct fi_msg_tagged msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = self,
				     .tag = tag, .context = ctx };
	return POST(fi_tsendmsg(e, &msg, flags | FI_TRIGGER), cq);
}

/* A stray triggered op for the error and cancel parts: tagged where possible. */
static ssize_t trig_stray(struct fid_ep *e, void *ctx, uint64_t flags)
{
	if (has_tagged)
		return trig_tsend_on(e, 0xBAD, ctx, flags);
	return trig_send_on(e, "stray", ctx, flags);
}

/* After a part: takes the messages nobody received (a triggered send that started late, or a
 * part that failed) and cancels the receives the part posted that got nothing, so that one
 * failure does not shift every later part's messages. */
static void settle(void)
{
	int canceled = 0, strays = 0, drain[4], ncan = 0;
	void *can[NSLOT + 4];
	quiet(10);
	for (int i = 0; i < npending_rx && i < NSLOT; i++) {
		int s = pending_rx[i];
		if (!cq_find(&rctx[s]) && fi_cancel(&ep->fid, &rctx[s]) == 0) {
			canceled++;
			can[ncan++] = &rctx[s];
		}
	}
	npending_rx = 0;
	for (int i = 0; i < 4; i++) {
		drain[i] = next_rx++ % NSLOT;
		memset(mem.rx[drain[i]], 0, SZ);
		cq_forget(&rctx[drain[i]]);
		if (fi_recv(ep, mem.rx[drain[i]], SZ, desc, FI_ADDR_UNSPEC, &rctx[drain[i]]))
			drain[i] = -1;
	}
	quiet(QUIET);
	for (int i = 0; i < 4; i++) {
		if (drain[i] < 0)
			continue;
		if (cq_find(&rctx[drain[i]])) {
			strays++;
			printf(NAME ": (a stray message arrived between parts: \"%.*s\")\n", SZ,
			       mem.rx[drain[i]]);
		} else if (fi_cancel(&ep->fid, &rctx[drain[i]]) == 0) {
			can[ncan++] = &rctx[drain[i]];
		}
	}
	/* the canceled receives complete (in error, counted on rxc) before the next part starts */
	double t0 = now_ms();
	for (int i = 0; i < ncan && now_ms() - t0 < 2000; i++)
		while (!cq_find(can[i]) && now_ms() - t0 < 2000)
			quiet(1);
	quiet(10);
	CHECK(strays == 0, "%d messages arrived that no part received", strays);
	if (canceled)
		printf(NAME ": (canceled %d receives left unmatched by the part that failed)\n", canceled);
}

#define CHECK_RX(slot, want)                                                              \
	CHECK(!strcmp(mem.rx[slot], want), "receive slot %d holds \"%.*s\", expected \"%s\"",  \
	      slot, SZ, mem.rx[slot], want)

/* ---------------------------------------------------------------------------------------- */

/* Thresholds 3,1,2,2,5 submitted in that order start as 1,2,2,3,5 when add(5) meets all. */
static void test_order(void)
{
	printf(NAME ": order: thresholds 3,1,2,2,5 released at once by fi_cntr_add(c, 5)\n");
	struct fid_cntr *c = open_cntr();
	if (!c)
		return;
	static const size_t thr[5] = { 3, 1, 2, 2, 5 };
	static const char *pay[5] = { "thr3-a", "thr1-b", "thr2-c", "thr2-d", "thr5-e" };
	static const char *want[5] = { "thr1-b", "thr2-c", "thr2-d", "thr3-a", "thr5-e" };
	void *ctx[5];
	int slot[5];
	uint64_t rx0 = cval(rxc), tx0 = cval(txc);
	for (int i = 0; i < 5; i++)
		slot[i] = post_recv();
	for (int i = 0; i < 5; i++) {
		ctx[i] = tctx(c, thr[i]);
		CHECK_RET(trig_send(pay[i], ctx[i]), 0);
	}
	quiet(QUIET);
	CHECK(cval(rxc) == rx0 && cval(txc) == tx0, "triggered sends started before the counter "
	      "moved: rx %" PRIu64 " tx %" PRIu64, cval(rxc) - rx0, cval(txc) - tx0);
	for (int i = 0; i < 5; i++)
		CHECK(cq_count(ctx[i]) == 0, "send %s completed before its threshold", pay[i]);
	CHECK_RET(fi_cntr_add(c, 5), 0);
	WAIT_CNTR(rxc, rx0 + 5);
	WAIT_CNTR(txc, tx0 + 5);
	for (int i = 0; i < 5; i++)
		CHECK_RX(slot[i], want[i]);
	for (int i = 0; i < 5; i++) {
		struct ent *e = cq_wait(ctx[i]);
		CHECK(e != NULL, "no CQ entry with the triggered context of %s", pay[i]);
		if (e)
			CHECK(e->err == 0 && (e->flags & FI_SEND), "CQ entry of %s: err %d flags %#" PRIx64,
			      pay[i], e->err, e->flags);
	}
	quiet(QUIET);
	for (int i = 0; i < 5; i++)
		CHECK(cq_count(ctx[i]) == 1, "%d CQ entries for %s", cq_count(ctx[i]), pay[i]);
	CHECK(cval(rxc) == rx0 + 5, "%" PRIu64 " receives, expected 5", cval(rxc) - rx0);
	CHECK(cval(c) == 5, "the triggering counter moved by itself: %" PRIu64, cval(c));
	close_cntr(c);

	printf(NAME ": order: thresholds 2,1,4,3 met step by step by add, adderr, set\n");
	c = open_cntr();
	if (!c)
		return;
	static const size_t thr2[4] = { 2, 1, 4, 3 };
	static const char *pay2[4] = { "s2", "s1", "s4", "s3" };
	rx0 = cval(rxc);
	for (int i = 0; i < 4; i++)
		slot[i] = post_recv();
	for (int i = 0; i < 4; i++) {
		ctx[i] = tctx(c, thr2[i]);
		CHECK_RET(trig_send(pay2[i], ctx[i]), 0);
	}
	CHECK_RET(fi_cntr_add(c, 1), 0); /* 1: s1 */
	WAIT_CNTR(rxc, rx0 + 1);
	quiet(QUIET);
	CHECK(cval(rxc) == rx0 + 1, "add(1) released %" PRIu64 " sends, expected 1", cval(rxc) - rx0);
	CHECK_RX(slot[0], "s1");
	CHECK_RET(fi_cntr_adderr(c, 1), 0); /* 1 + 1 error = 2: s2 */
	WAIT_CNTR(rxc, rx0 + 2);
	quiet(QUIET);
	CHECK(cval(rxc) == rx0 + 2, "adderr(1) released %" PRIu64 " sends in all, expected 2",
	      cval(rxc) - rx0);
	CHECK_RX(slot[1], "s2");
	CHECK_RET(fi_cntr_set(c, 3), 0); /* 3 + 1 error = 4: s3 then s4 */
	WAIT_CNTR(rxc, rx0 + 4);
	CHECK_RX(slot[2], "s3");
	CHECK_RX(slot[3], "s4");
	for (int i = 0; i < 4; i++)
		CHECK(cq_wait(ctx[i]) != NULL, "no CQ entry for %s", pay2[i]);
	close_cntr(c);
}

/* A threshold met at submission starts at once. */
static void test_already_met(void)
{
	printf(NAME ": met: thresholds already met at submission\n");
	struct fid_cntr *c = open_cntr();
	if (!c)
		return;
	CHECK_RET(fi_cntr_add(c, 3), 0);
	CHECK_RET(fi_cntr_adderr(c, 1), 0);
	uint64_t rx0 = cval(rxc);
	int s0 = post_recv(), s1 = post_recv(), s2 = post_recv();
	void *a = tctx(c, 2), *b = tctx(c, 4), *z = tctx(c, 0);
	CHECK_RET(trig_send("below", a), 0);
	CHECK_RET(trig_send("equal-with-error", b), 0); /* 3 + 1 error = 4 */
	CHECK_RET(trig_send("zero", z), 0);
	WAIT_CNTR(rxc, rx0 + 3);
	CHECK_RX(s0, "below");
	CHECK_RX(s1, "equal-with-error");
	CHECK_RX(s2, "zero");
	CHECK(cq_wait(a) && cq_wait(b) && cq_wait(z), "no CQ entries for the met triggers");
	CHECK(fi_cntr_read(c) == 3 && fi_cntr_readerr(c) == 1, "the counter changed");
	close_cntr(c);
}

/* Completions the core counts release triggered operations. */
static void test_completion_release(void)
{
	printf(NAME ": completion: a normal send's (receive's) completion releases a triggered send\n");
	uint64_t tx0 = cval(txc), rx0 = cval(rxc);
	int s0 = post_recv(), s1 = post_recv();
	void *x = tctx(txc, tx0 + 1);
	CHECK_RET(trig_send("after-send", x), 0);
	quiet(QUIET);
	CHECK(cval(rxc) == rx0 && cq_count(x) == 0, "the triggered send started early");
	send_now("first");
	WAIT_CNTR(rxc, rx0 + 2);
	WAIT_CNTR(txc, tx0 + 2);
	CHECK_RX(s0, "first");
	CHECK_RX(s1, "after-send");
	CHECK(cq_wait(x) != NULL, "no CQ entry for the released send");

	/* the classic use: send once something has been received */
	rx0 = cval(rxc);
	s0 = post_recv();
	s1 = post_recv();
	void *y = tctx(rxc, rx0 + 1);
	CHECK_RET(trig_send("after-recv", y), 0);
	quiet(QUIET);
	CHECK(cval(rxc) == rx0 && cq_count(y) == 0, "the triggered send started early");
	send_now("input");
	WAIT_CNTR(rxc, rx0 + 2);
	CHECK_RX(s0, "input");
	CHECK_RX(s1, "after-recv");
	CHECK(cq_wait(y) != NULL, "no CQ entry for the send released by a receive");

	/* an error completion counted by the application counts as well: adderr on txc */
	tx0 = cval(txc);
	rx0 = cval(rxc);
	s0 = post_recv();
	void *w = tctx(txc, tx0 + 1);
	CHECK_RET(trig_send("after-error", w), 0);
	quiet(QUIET);
	CHECK(cq_count(w) == 0, "started early");
	CHECK_RET(fi_cntr_adderr(txc, 1), 0);
	WAIT_CNTR(rxc, rx0 + 1);
	CHECK_RX(s0, "after-error");
	CHECK(cq_wait(w) != NULL, "no CQ entry for the send released by an error");
}

/* The other *msg calls with FI_TRIGGER. Each waits on c for threshold k, then add(c, 1). */
static struct fid_cntr *calls_c;
static size_t calls_k;

static void *calls_next(void)
{
	return tctx(calls_c, ++calls_k);
}

static void calls_release(void *ctx, const char *what)
{
	quiet(QUIET);
	CHECK(cq_count(ctx) == 0, "%s completed before its threshold", what);
	CHECK_RET(fi_cntr_add(calls_c, 1), 0);
	struct ent *e = cq_wait(ctx);
	CHECK(e != NULL, "%s: no CQ entry with the triggered context", what);
	if (e)
		CHECK(e->err == 0, "%s completed with error %d", what, e->err);
}

static void test_calls(void)
{
	printf(NAME ": calls: the *msg calls with FI_TRIGGER\n");
	calls_c = open_cntr();
	calls_k = 0;
	if (!calls_c)
		return;

	{	/* fi_recvmsg: the send comes first and waits as unexpected */
		int s = next_rx++ % NSLOT;
		memset(mem.rx[s], 0, SZ);
		void *ctx = calls_next();
		struct iovec iov = { .iov_base = mem.rx[s], .iov_len = SZ };
		struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
				      .addr = FI_ADDR_UNSPEC, .context = ctx };
		CHECK_RET(POST(fi_recvmsg(ep, &msg, FI_TRIGGER), cq), 0);
		send_now("to-recvmsg");
		calls_release(ctx, "fi_recvmsg");
		CHECK_RX(s, "to-recvmsg");
		struct ent *e = cq_find(ctx);
		CHECK(!e || (e->flags & FI_RECV), "fi_recvmsg entry flags %#" PRIx64, e ? e->flags : 0);
	}
	if (has_tagged) {
		int s = next_rx++ % NSLOT;
		memset(mem.rx[s], 0, SZ);
		void *ctx = calls_next();
		struct iovec iov = { .iov_base = mem.rx[s], .iov_len = SZ };
		struct fi_msg_tagged msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
					     .addr = FI_ADDR_UNSPEC, .tag = 0x71, .context = ctx };
		CHECK_RET(POST(fi_trecvmsg(ep, &msg, FI_TRIGGER), cq), 0);
		int t = fill_tx("tagged-0x71");
		CHECK_RET(POST(fi_tsend(ep, mem.tx[t], SZ, desc, self, 0x71, &nctx[next_nctx++ % NSLOT]), cq), 0);
		calls_release(ctx, "fi_trecvmsg");
		CHECK_RX(s, "tagged-0x71");

		s = post_trecv(0x72);
		ctx = calls_next();
		t = fill_tx("tagged-0x72");
		struct iovec tiov = { .iov_base = mem.tx[t], .iov_len = SZ };
		struct fi_msg_tagged tmsg = { .msg_iov = &tiov, .desc = &desc, .iov_count = 1,
					      .addr = self, .tag = 0x72, .context = ctx };
		CHECK_RET(POST(fi_tsendmsg(ep, &tmsg, FI_TRIGGER), cq), 0);
		calls_release(ctx, "fi_tsendmsg");
		CHECK(cq_wait(&rctx[s]) != NULL, "the tagged receive did not complete");
		CHECK_RX(s, "tagged-0x72");
	} else {
		printf(NAME ": calls: skipped fi_trecvmsg, fi_tsendmsg: no FI_TAGGED in the info\n");
	}
	if (has_rma) {
		memset(mem.rma[0], 0, SZ);
		int t = fill_tx("written");
		void *ctx = calls_next();
		struct iovec iov = { .iov_base = mem.tx[t], .iov_len = SZ };
		struct fi_rma_iov riov = { .addr = raddr(mem.rma[0]), .len = SZ, .key = rkey };
		struct fi_msg_rma msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = self,
					  .rma_iov = &riov, .rma_iov_count = 1, .context = ctx };
		CHECK_RET(POST(fi_writemsg(ep, &msg, FI_TRIGGER), cq), 0);
		quiet(QUIET);
		CHECK(mem.rma[0][0] == 0, "fi_writemsg wrote before its threshold");
		calls_release(ctx, "fi_writemsg");
		CHECK(!strcmp(mem.rma[0], "written"), "fi_writemsg target holds \"%.*s\"", SZ, mem.rma[0]);

		snprintf(mem.rma[1], SZ, "read-me");
		memset(mem.rd[0], 0, SZ);
		ctx = calls_next();
		struct iovec liov = { .iov_base = mem.rd[0], .iov_len = SZ };
		struct fi_rma_iov rriov = { .addr = raddr(mem.rma[1]), .len = SZ, .key = rkey };
		struct fi_msg_rma rmsg = { .msg_iov = &liov, .desc = &desc, .iov_count = 1, .addr = self,
					   .rma_iov = &rriov, .rma_iov_count = 1, .context = ctx };
		CHECK_RET(POST(fi_readmsg(ep, &rmsg, FI_TRIGGER), cq), 0);
		quiet(QUIET);
		CHECK(mem.rd[0][0] == 0, "fi_readmsg read before its threshold");
		calls_release(ctx, "fi_readmsg");
		CHECK(!strcmp(mem.rd[0], "read-me"), "fi_readmsg got \"%.*s\"", SZ, mem.rd[0]);
	} else {
		printf(NAME ": calls: skipped fi_writemsg, fi_readmsg: no FI_RMA in the info\n");
	}
	if (has_atomic) {
		size_t count = 0;
		int ok_sum = fi_atomicvalid(ep, FI_UINT64, FI_SUM, &count) == 0 && count >= 1;
		int ok_fetch = fi_fetch_atomicvalid(ep, FI_UINT64, FI_SUM, &count) == 0 && count >= 1;
		int ok_cswap = fi_compare_atomicvalid(ep, FI_UINT64, FI_CSWAP, &count) == 0 && count >= 1;
		struct fi_rma_ioc rioc = { .count = 1, .key = rkey };
		struct fi_ioc ioc = { .addr = &mem.operand[0], .count = 1 };
		struct fi_msg_atomic msg = { .msg_iov = &ioc, .desc = &desc, .iov_count = 1, .addr = self,
					     .rma_iov = &rioc, .rma_iov_count = 1, .datatype = FI_UINT64,
					     .op = FI_SUM };
		if (ok_sum) {
			mem.atom[0] = 10;
			mem.operand[0] = 5;
			rioc.addr = raddr(&mem.atom[0]);
			msg.context = calls_next();
			CHECK_RET(POST(fi_atomicmsg(ep, &msg, FI_TRIGGER), cq), 0);
			quiet(QUIET);
			CHECK(mem.atom[0] == 10, "fi_atomicmsg ran before its threshold");
			calls_release(msg.context, "fi_atomicmsg");
			CHECK(mem.atom[0] == 15, "fi_atomicmsg: %" PRIu64 ", expected 15", mem.atom[0]);
		} else {
			printf(NAME ": calls: skipped fi_atomicmsg: FI_SUM on FI_UINT64 not valid\n");
		}
		if (ok_fetch) {
			mem.atom[1] = 100;
			mem.operand[1] = 1;
			mem.res[0] = 0;
			ioc.addr = &mem.operand[1];
			rioc.addr = raddr(&mem.atom[1]);
			struct fi_ioc rres = { .addr = &mem.res[0], .count = 1 };
			msg.context = calls_next();
			CHECK_RET(POST(fi_fetch_atomicmsg(ep, &msg, &rres, &desc, 1, FI_TRIGGER), cq), 0);
			quiet(QUIET);
			CHECK(mem.atom[1] == 100, "fi_fetch_atomicmsg ran before its threshold");
			calls_release(msg.context, "fi_fetch_atomicmsg");
			CHECK(mem.atom[1] == 101 && mem.res[0] == 100, "fi_fetch_atomicmsg: target %" PRIu64
			      " fetched %" PRIu64 ", expected 101 and 100", mem.atom[1], mem.res[0]);
		} else {
			printf(NAME ": calls: skipped fi_fetch_atomicmsg: FI_SUM on FI_UINT64 not valid\n");
		}
		if (ok_cswap) {
			mem.atom[2] = 7;
			mem.operand[2] = 9;
			mem.cmp[0] = 7;
			mem.res[1] = 0;
			ioc.addr = &mem.operand[2];
			rioc.addr = raddr(&mem.atom[2]);
			msg.op = FI_CSWAP;
			struct fi_ioc rres = { .addr = &mem.res[1], .count = 1 };
			struct fi_ioc rcmp = { .addr = &mem.cmp[0], .count = 1 };
			msg.context = calls_next();
			CHECK_RET(POST(fi_compare_atomicmsg(ep, &msg, &rcmp, &desc, 1, &rres, &desc, 1,
							    FI_TRIGGER), cq), 0);
			quiet(QUIET);
			CHECK(mem.atom[2] == 7, "fi_compare_atomicmsg ran before its threshold");
			calls_release(msg.context, "fi_compare_atomicmsg");
			CHECK(mem.atom[2] == 9 && mem.res[1] == 7, "fi_compare_atomicmsg: target %" PRIu64
			      " fetched %" PRIu64 ", expected 9 and 7", mem.atom[2], mem.res[1]);
		} else {
			printf(NAME ": calls: skipped fi_compare_atomicmsg: FI_CSWAP on FI_UINT64 not valid\n");
		}
	} else {
		printf(NAME ": calls: skipped the atomics: no FI_ATOMIC in the info\n");
	}
	close_cntr(calls_c);
}

/* fi_ep_alias(FI_TRANSMIT | FI_TRIGGER): the plain calls are triggered. */
static void test_alias(void)
{
	printf(NAME ": alias: fi_send and fi_write through an FI_TRANSMIT | FI_TRIGGER alias\n");
	struct fid_ep *alias = NULL;
	CHECK_RET(fi_ep_alias(ep, &alias, FI_TRANSMIT | FI_TRIGGER), 0);
	struct fid_cntr *c = open_cntr();
	if (!alias || !c) {
		close_cntr(c);
		return;
	}
	uint64_t rx0 = cval(rxc);
	int s = post_recv();
	int t = fill_tx("via-alias");
	void *sctx = tctx(c, 1);
	CHECK_RET(POST(fi_send(alias, mem.tx[t], SZ, desc, self, sctx), cq), 0);
	void *wctx = NULL;
	if (has_rma) {
		memset(mem.rma[2], 0, SZ);
		int w = fill_tx("alias-write");
		wctx = tctx(c, 2);
		CHECK_RET(POST(fi_write(alias, mem.tx[w], SZ, desc, self, raddr(mem.rma[2]), rkey, wctx), cq), 0);
	} else {
		printf(NAME ": alias: skipped fi_write: no FI_RMA in the info\n");
	}
	quiet(QUIET);
	CHECK(cval(rxc) == rx0 && cq_count(sctx) == 0, "the alias's fi_send was not deferred");
	CHECK_RET(fi_cntr_add(c, 1), 0);
	WAIT_CNTR(rxc, rx0 + 1);
	CHECK_RX(s, "via-alias");
	CHECK(cq_wait(sctx) != NULL, "no CQ entry with the alias send's triggered context");
	if (wctx) {
		quiet(QUIET);
		CHECK(mem.rma[2][0] == 0 && cq_count(wctx) == 0, "the alias's fi_write ran at threshold 1 "
		      "although it waits for 2");
		CHECK_RET(fi_cntr_add(c, 1), 0);
		CHECK(cq_wait(wctx) != NULL, "no CQ entry with the alias write's triggered context");
		CHECK(!strcmp(mem.rma[2], "alias-write"), "alias write target \"%.*s\"", SZ, mem.rma[2]);
	}
	CHECK_RET(fi_close(&alias->fid), 0);
	close_cntr(c);
}

/* Runs fn(arg) in a child process and returns its result, or 1000 + the signal if it crashed,
 * 2000 if it hung: a provider that trusts a pointer it should check (sockets with
 * threshold.cntr NULL, an XPU trigger, a NULL triggering_cntr) kills the child, not this test.
 * Only for calls that must be refused: whatever the child queues dies with it. */
static long in_child(long (*fn)(void *), void *arg)
{
	/* The result comes back through a pipe, not the exit status: under valgrind the child
	 * exits with valgrind's error code for what it leaves behind (it exits without closing). */
	int fds[2];
	if (pipe(fds))
		return 3000;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(0);
		close(fds[0]);
		long r = fn(arg);
		if (write(fds[1], &r, sizeof(r)) != (ssize_t) sizeof(r))
			_exit(251);
		_exit(0);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return 3000;
	}
	int st = 0;
	double t0 = now_ms();
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_ms() - t0 > TMO) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return 2000;
		}
		usleep(1000);
	}
	long r = 0;
	ssize_t got = read(fds[0], &r, sizeof(r));
	close(fds[0]);
	if (got == (ssize_t) sizeof(r))
		return r;
	if (WIFSIGNALED(st))
		return 1000 + WTERMSIG(st);
	return 250;
}

static long stray_fn(void *ctx)
{
	return (long) trig_stray(ep, ctx, 0);
}

static int queue(struct fi_deferred_work *w);
static long queue_fn(void *w)
{
	return queue(w);
}

static void test_errors(void)
{
	printf(NAME ": errors: FI_INJECT, NULL cntr, foreign counter, bad event type, XPU\n");
	struct fid_cntr *c = open_cntr();
	struct fid_domain *d2 = NULL;
	CHECK_RET(fi_domain(fabric, info, &d2, NULL), 0);
	struct fid_cntr *foreign = d2 ? open_cntr_in(d2) : NULL;
	if (!c || !foreign)
		goto out;
	uint64_t tx0 = cval(txc);
	void *inj = tctx(c, 1);
	CHECK_RET(trig_stray(ep, inj, FI_INJECT), -FI_EINVAL);
	CHECK_RET(in_child(stray_fn, tctx(NULL, 1)), -FI_EINVAL); /* 1000 + signal: it crashed */
	void *fo = tctx(foreign, 1);
	CHECK_RET(trig_stray(ep, fo, 0), -FI_EINVAL);
	void *bad = need_ctx2 ? tctx_kind(2, (enum fi_trigger_event) 12345, c, 1)
			      : tctx_kind(1, (enum fi_trigger_event) 12345, c, 1);
	CHECK_RET(trig_stray(ep, bad, 0), -FI_EINVAL);
	void *xpu = tctx_kind(need_ctx2 ? 2 : 1, FI_TRIGGER_XPU, NULL, 0);
	CHECK_RET(in_child(stray_fn, xpu), -FI_ENOSYS);
	/* nothing was queued: meeting the thresholds starts nothing, and the counters close */
	CHECK_RET(fi_cntr_add(c, 1), 0);
	CHECK_RET(fi_cntr_add(foreign, 1), 0);
	quiet(QUIET * 2);
	CHECK(cval(txc) == tx0, "a refused triggered op was sent: tx %" PRIu64, cval(txc) - tx0);
	CHECK(!cq_count(inj) && !cq_count(fo) && !cq_count(bad) && !cq_count(xpu),
	      "a refused triggered op completed");
out:
	close_cntr(c);
	close_cntr(foreign);
	if (d2)
		CHECK_RET(fi_close(&d2->fid), 0);
}

/* Unfired triggered ops keep the endpoint and the counter open; fi_cancel removes one. */
static void test_cancel(void)
{
	printf(NAME ": cancel: close with unfired triggered ops is -FI_EBUSY; fi_cancel\n");
	struct fid_ep *ep2 = NULL;
	struct fid_cntr *c = open_cntr();
	CHECK_RET(fi_endpoint(domain, info, &ep2, NULL), 0);
	if (!ep2 || !c) {
		close_cntr(c);
		return;
	}
	CHECK_RET(fi_ep_bind(ep2, &av->fid, 0), 0);
	CHECK_RET(fi_ep_bind(ep2, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	CHECK_RET(fi_enable(ep2), 0);
	void *ctx = tctx(c, 1);
	CHECK_RET(trig_stray(ep2, ctx, 0), 0);
	int r = fi_close(&ep2->fid);
	CHECK(r == -FI_EBUSY, "closing an endpoint with an unfired triggered op returned %d (%s)",
	      r, fi_strerror(-r));
	if (r == 0) {
		/* the provider dropped (or kept) the op with the endpoint gone: touch nothing */
		printf(NAME ": cancel: the endpoint closed, the rest of this part is skipped\n");
		return;
	}
	r = fi_close(&c->fid);
	CHECK(r == -FI_EBUSY, "closing a counter an unfired triggered op waits on returned %d (%s)",
	      r, fi_strerror(-r));
	if (r == 0) {
		printf(NAME ": cancel: the counter closed, the rest of this part is skipped\n");
		return;
	}
	CHECK_RET(fi_cancel(&ep2->fid, ctx), 0);
	CHECK_RET(fi_cntr_add(c, 1), 0);
	quiet(QUIET);
	/* fi_endpoint(3): a canceled operation completes with an FI_ECANCELED error entry */
	struct ent *ce = cq_find(ctx);
	CHECK(cq_count(ctx) == 1 && ce && ce->err == FI_ECANCELED && (ce->flags & FI_SEND),
	      "the canceled triggered op left %d CQ entries (err %d, flags %#" PRIx64 "), expected "
	      "one FI_ECANCELED error entry", cq_count(ctx), ce ? ce->err : 0, ce ? ce->flags : 0);
	CHECK_RET(fi_close(&ep2->fid), 0);
	close_cntr(c);

	/* on the main endpoint: cancel, then the threshold starts nothing */
	c = open_cntr();
	if (!c)
		return;
	uint64_t tx0 = cval(txc);
	ctx = tctx(c, 1);
	CHECK_RET(trig_stray(ep, ctx, 0), 0);
	CHECK_RET(fi_cancel(&ep->fid, ctx), 0);
	CHECK_RET(fi_cntr_add(c, 1), 0);
	quiet(QUIET);
	ce = cq_find(ctx);
	CHECK(cq_count(ctx) == 1 && ce && ce->err == FI_ECANCELED && cval(txc) == tx0,
	      "the canceled op ran, or did not complete with one FI_ECANCELED error entry");
	close_cntr(c);
}

/* ---------------------------------------------------------------------------------------- */
/* the deferred work queue                                                                   */

static int queue(struct fi_deferred_work *w)
{
	return fi_control(&domain->fid, FI_QUEUE_WORK, w);
}

static void cntr_work(struct fi_deferred_work *w, struct fi_op_cntr *op, enum fi_op_type type,
		      struct fid_cntr *trig, uint64_t thr, struct fid_cntr *target, uint64_t value)
{
	memset(w, 0, sizeof(*w));
	op->cntr = target;
	op->value = value;
	w->threshold = thr;
	w->triggering_cntr = trig;
	w->op_type = type;
	w->op.cntr = op;
}

static void test_work(void)
{
	printf(NAME ": work: FI_QUEUE_WORK with FI_OP_CNTR_SET / FI_OP_CNTR_ADD\n");
	struct fid_cntr *wc = open_cntr(), *tgt = open_cntr(), *c1 = open_cntr(), *c2 = open_cntr();
	if (!wc || !tgt || !c1 || !c2)
		goto out;
	static struct fi_deferred_work w[16];
	static struct fi_op_cntr op[16];

	/* deferred SET: not before the threshold, then exactly */
	cntr_work(&w[0], &op[0], FI_OP_CNTR_SET, wc, 2, tgt, 42);
	CHECK_RET(queue(&w[0]), 0);
	CHECK_RET(fi_cntr_add(wc, 1), 0);
	CHECK(fi_cntr_read(tgt) == 0, "FI_OP_CNTR_SET ran at 1 of 2: %" PRIu64, fi_cntr_read(tgt));
	CHECK_RET(fi_cntr_add(wc, 1), 0);
	CHECK(wait_cntr_ms(tgt, 42, TMO) && fi_cntr_read(tgt) == 42, "FI_OP_CNTR_SET gave %" PRIu64,
	      fi_cntr_read(tgt));
	CHECK_RET(fi_control(&domain->fid, FI_CANCEL_WORK, &w[0]), -FI_ENOENT); /* fired */

	/* deferred ADD, threshold already met: at once */
	cntr_work(&w[1], &op[1], FI_OP_CNTR_ADD, wc, 2, tgt, 5);
	CHECK_RET(queue(&w[1]), 0);
	CHECK(wait_cntr_ms(tgt, 47, TMO) && fi_cntr_read(tgt) == 47, "met FI_OP_CNTR_ADD gave %" PRIu64,
	      fi_cntr_read(tgt));

	/* errors count toward the threshold */
	cntr_work(&w[2], &op[2], FI_OP_CNTR_ADD, wc, 4, tgt, 1);
	CHECK_RET(queue(&w[2]), 0);
	CHECK_RET(fi_cntr_adderr(wc, 1), 0);
	CHECK(fi_cntr_read(tgt) == 47, "ran at 3 of 4");
	CHECK_RET(fi_cntr_adderr(wc, 1), 0);
	CHECK(wait_cntr_ms(tgt, 48, TMO) && fi_cntr_read(tgt) == 48, "FI_OP_CNTR_ADD after errors gave %"
	      PRIu64, fi_cntr_read(tgt));

	/* refused: completion_cntr set, unknown op_type, NULL triggering_cntr; none queued */
	cntr_work(&w[3], &op[3], FI_OP_CNTR_ADD, wc, 5, tgt, 100);
	w[3].completion_cntr = c1;
	CHECK_RET(queue(&w[3]), -FI_EINVAL);
	cntr_work(&w[4], &op[4], (enum fi_op_type) 999, wc, 5, tgt, 100);
	CHECK_RET(queue(&w[4]), -FI_EINVAL);
	cntr_work(&w[5], &op[5], FI_OP_CNTR_ADD, NULL, 0, tgt, 100);
	CHECK_RET(in_child(queue_fn, &w[5]), -FI_EINVAL); /* 1000 + signal: it crashed */
	CHECK_RET(fi_cntr_add(wc, 1), 0); /* 5 */
	quiet(QUIET);
	CHECK(fi_cntr_read(tgt) == 48 && fi_cntr_read(c1) == 0, "a refused work ran: tgt %" PRIu64,
	      fi_cntr_read(tgt));

	/* FI_CANCEL_WORK: 0 for a queued one, then -FI_ENOENT */
	cntr_work(&w[6], &op[6], FI_OP_CNTR_ADD, wc, 1000, tgt, 1000);
	CHECK_RET(queue(&w[6]), 0);
	CHECK_RET(fi_control(&domain->fid, FI_CANCEL_WORK, &w[6]), 0);
	CHECK_RET(fi_control(&domain->fid, FI_CANCEL_WORK, &w[6]), -FI_ENOENT);
	CHECK_RET(fi_cntr_set(wc, 1000), 0);
	quiet(QUIET);
	CHECK(fi_cntr_read(tgt) == 48, "a canceled work ran: tgt %" PRIu64, fi_cntr_read(tgt));

	/* FI_FLUSH_WORK(NULL): everything queued on the domain, on several counters */
	cntr_work(&w[7], &op[7], FI_OP_CNTR_ADD, wc, 5000, tgt, 1);
	cntr_work(&w[8], &op[8], FI_OP_CNTR_SET, wc, 5001, tgt, 1);
	cntr_work(&w[9], &op[9], FI_OP_CNTR_ADD, c1, 10, tgt, 1);
	CHECK_RET(queue(&w[7]), 0);
	CHECK_RET(queue(&w[8]), 0);
	CHECK_RET(queue(&w[9]), 0);
	CHECK_RET(fi_control(&domain->fid, FI_FLUSH_WORK, NULL), 0);
	CHECK_RET(fi_cntr_set(wc, 6000), 0);
	CHECK_RET(fi_cntr_set(c1, 10), 0);
	quiet(QUIET);
	CHECK(fi_cntr_read(tgt) == 48, "a flushed work ran: tgt %" PRIu64, fi_cntr_read(tgt));
	CHECK_RET(fi_control(&domain->fid, FI_CANCEL_WORK, &w[9]), -FI_ENOENT);

	/* a chain queued last-first: wc -> add c1 -> set c2 = 7 -> add tgt */
	CHECK_RET(fi_cntr_set(c1, 0), 0);
	uint64_t base = cval(wc);
	cntr_work(&w[10], &op[10], FI_OP_CNTR_ADD, c2, 7, tgt, 2);
	cntr_work(&w[11], &op[11], FI_OP_CNTR_SET, c1, 1, c2, 7);
	cntr_work(&w[12], &op[12], FI_OP_CNTR_ADD, wc, base + 1, c1, 1);
	CHECK_RET(queue(&w[10]), 0);
	CHECK_RET(queue(&w[11]), 0);
	CHECK_RET(queue(&w[12]), 0);
	quiet(QUIET / 2);
	CHECK(fi_cntr_read(c1) == 0 && fi_cntr_read(c2) == 0 && fi_cntr_read(tgt) == 48,
	      "the chain started early: c1 %" PRIu64 " c2 %" PRIu64, fi_cntr_read(c1), fi_cntr_read(c2));
	CHECK_RET(fi_cntr_add(wc, 1), 0);
	CHECK(wait_cntr_ms(tgt, 50, TMO), "the chain's last work did not run: c1 %" PRIu64 " c2 %"
	      PRIu64 " tgt %" PRIu64, fi_cntr_read(c1), fi_cntr_read(c2), fi_cntr_read(tgt));
	CHECK(fi_cntr_read(c1) == 1 && fi_cntr_read(c2) == 7 && fi_cntr_read(tgt) == 50,
	      "chain: c1 %" PRIu64 " c2 %" PRIu64 " tgt %" PRIu64 ", expected 1, 7, 50",
	      fi_cntr_read(c1), fi_cntr_read(c2), fi_cntr_read(tgt));
	for (int i = 10; i <= 12; i++)
		CHECK_RET(fi_control(&domain->fid, FI_CANCEL_WORK, &w[i]), -FI_ENOENT);
out:
	(void) fi_control(&domain->fid, FI_FLUSH_WORK, NULL);
	close_cntr(wc);
	close_cntr(tgt);
	close_cntr(c1);
	close_cntr(c2);
}

/* Run only under FI_RSCNTR_TEST_FAIL=post (the core refuses every triggered and deferred post
 * with -FI_EIO, src/boundary/testhook.rs): a refused deferred send completes in error, counted
 * as one error of its completion counter and nothing else; a refused triggered send leaves no
 * completion and nothing queued (the endpoint and counter close). */
static void test_refused_posts(void)
{
	printf(NAME ": refused: every post refused by the core (FI_RSCNTR_TEST_FAIL=post)\n");
	struct fid_cntr *wc = open_cntr(), *cc = open_cntr();
	if (!wc || !cc) {
		close_cntr(wc);
		close_cntr(cc);
		return;
	}
	static struct fi_deferred_work w;
	static struct fi_op_msg om;
	static struct iovec iov;
	int ts = fill_tx("refused");
	uint64_t tx0 = cval(txc);
	memset(&w, 0, sizeof(w));
	w.threshold = 1;
	w.triggering_cntr = wc;
	w.completion_cntr = cc;
	w.op_type = FI_OP_SEND;
	w.op.msg = &om;
	iov = (struct iovec) { mem.tx[ts], SZ };
	om = (struct fi_op_msg) { .ep = ep, .msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
		.addr = self, .context = &w.context } };
	CHECK_RET(fi_control(&domain->fid, FI_QUEUE_WORK, &w), 0);
	CHECK_RET(fi_cntr_add(wc, 1), 0);
	CHECK(wait_cntr_ms(cc, 1, TMO), "the refused deferred send did not complete");
	CHECK(fi_cntr_read(cc) == 0 && fi_cntr_readerr(cc) == 1,
	      "completion counter %" PRIu64 " + %" PRIu64 " errors, expected 0 + 1",
	      fi_cntr_read(cc), fi_cntr_readerr(cc));
	void *x = tctx(wc, 2);
	CHECK_RET(trig_send("refused-trigger", x), 0);
	CHECK_RET(fi_cntr_add(wc, 1), 0);
	quiet(QUIET);
	CHECK(cq_count(&w.context) == 0 && cq_count(x) == 0 && cval(txc) == tx0,
	      "a refused post left a completion or moved the send counter");
	close_cntr(wc);
	close_cntr(cc);
}

/* Deferred data transfers. The op's context is the work's own
 * fi_context2, as fabtests rdm_deferred_wq uses it. */
static void test_work_data(void)
{
	printf(NAME ": data work: FI_OP_SEND/RECV/TSEND/TRECV/WRITE/READ/ATOMIC\n");
	struct fid_cntr *wc = open_cntr(), *cc = open_cntr();
	if (!wc || !cc) {
		close_cntr(wc);
		close_cntr(cc);
		return;
	}
	static struct fi_deferred_work w[16];
	static struct fi_op_msg om[4];
	static struct fi_op_tagged ot[2];
	static struct fi_op_rma orma[2];
	static struct fi_op_atomic oat;
	static struct iovec iov[16];
	static struct fi_rma_iov riov[4];
	static struct fi_ioc ioc;
	static struct fi_rma_ioc rioc;
	uint64_t thr = 0, ccn = 0;
	uint64_t tx0 = cval(txc), rx0 = cval(rxc);

#define WORK(i, type, field, opp)                                                         \
	do {                                                                              \
		memset(&w[i], 0, sizeof(w[i]));                                           \
		w[i].threshold = ++thr;                                                   \
		w[i].triggering_cntr = wc;                                                \
		w[i].completion_cntr = cc;                                                \
		w[i].op_type = type;                                                      \
		w[i].op.field = opp;                                                      \
	} while (0)

	/* RECV (threshold 1) then SEND (2) */
	int rs = next_rx++ % NSLOT, ts = fill_tx("work-send");
	memset(mem.rx[rs], 0, SZ);
	WORK(0, FI_OP_RECV, msg, &om[0]);
	iov[0] = (struct iovec) { mem.rx[rs], SZ };
	om[0] = (struct fi_op_msg) { .ep = ep, .msg = { .msg_iov = &iov[0], .desc = &desc, .iov_count = 1,
		.addr = FI_ADDR_UNSPEC, .context = &w[0].context } };
	WORK(1, FI_OP_SEND, msg, &om[1]);
	iov[1] = (struct iovec) { mem.tx[ts], SZ };
	om[1] = (struct fi_op_msg) { .ep = ep, .msg = { .msg_iov = &iov[1], .desc = &desc, .iov_count = 1,
		.addr = self, .context = &w[1].context } };
	CHECK_RET(queue(&w[0]), 0);
	CHECK_RET(queue(&w[1]), 0);
	ccn += 2;
	int trs = -1;
	if (has_tagged) {
		trs = next_rx++ % NSLOT;
		int tts = fill_tx("work-tsend");
		memset(mem.rx[trs], 0, SZ);
		WORK(2, FI_OP_TRECV, tagged, &ot[0]);
		iov[2] = (struct iovec) { mem.rx[trs], SZ };
		ot[0] = (struct fi_op_tagged) { .ep = ep, .msg = { .msg_iov = &iov[2], .desc = &desc,
			.iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 0xD1, .context = &w[2].context } };
		WORK(3, FI_OP_TSEND, tagged, &ot[1]);
		iov[3] = (struct iovec) { mem.tx[tts], SZ };
		ot[1] = (struct fi_op_tagged) { .ep = ep, .msg = { .msg_iov = &iov[3], .desc = &desc,
			.iov_count = 1, .addr = self, .tag = 0xD1, .context = &w[3].context } };
		CHECK_RET(queue(&w[2]), 0);
		CHECK_RET(queue(&w[3]), 0);
		ccn += 2;
	}
	if (has_rma) {
		memset(mem.rma[4], 0, SZ);
		snprintf(mem.rma[5], SZ, "work-read-src");
		memset(mem.rd[4], 0, SZ);
		int wt = fill_tx("work-write");
		WORK(4, FI_OP_WRITE, rma, &orma[0]);
		iov[4] = (struct iovec) { mem.tx[wt], SZ };
		riov[0] = (struct fi_rma_iov) { raddr(mem.rma[4]), SZ, rkey };
		orma[0] = (struct fi_op_rma) { .ep = ep, .msg = { .msg_iov = &iov[4], .desc = &desc,
			.iov_count = 1, .addr = self, .rma_iov = &riov[0], .rma_iov_count = 1,
			.context = &w[4].context } };
		WORK(5, FI_OP_READ, rma, &orma[1]);
		iov[5] = (struct iovec) { mem.rd[4], SZ };
		riov[1] = (struct fi_rma_iov) { raddr(mem.rma[5]), SZ, rkey };
		orma[1] = (struct fi_op_rma) { .ep = ep, .msg = { .msg_iov = &iov[5], .desc = &desc,
			.iov_count = 1, .addr = self, .rma_iov = &riov[1], .rma_iov_count = 1,
			.context = &w[5].context } };
		CHECK_RET(queue(&w[4]), 0);
		CHECK_RET(queue(&w[5]), 0);
		ccn += 2;
	}
	size_t count = 0;
	int atomic = has_atomic && fi_atomicvalid(ep, FI_UINT64, FI_SUM, &count) == 0 && count >= 1;
	if (atomic) {
		mem.atom[8] = 1;
		mem.operand[8] = 2;
		WORK(6, FI_OP_ATOMIC, atomic, &oat);
		ioc = (struct fi_ioc) { &mem.operand[8], 1 };
		rioc = (struct fi_rma_ioc) { raddr(&mem.atom[8]), 1, rkey };
		oat = (struct fi_op_atomic) { .ep = ep, .msg = { .msg_iov = &ioc, .desc = &desc,
			.iov_count = 1, .addr = self, .rma_iov = &rioc, .rma_iov_count = 1,
			.datatype = FI_UINT64, .op = FI_SUM, .context = &w[6].context } };
		CHECK_RET(queue(&w[6]), 0);
		ccn += 1;
	}
	quiet(QUIET);
	CHECK(cval(cc) == 0 && mem.rx[rs][0] == 0, "data work ran before its threshold");
	CHECK_RET(fi_cntr_add(wc, thr), 0);
	WAIT_CNTR(cc, ccn);
	quiet(QUIET);
	CHECK(cval(cc) == ccn, "completion_cntr %" PRIu64 ", expected %" PRIu64, cval(cc), ccn);
	CHECK_RX(rs, "work-send");
	if (trs >= 0)
		CHECK_RX(trs, "work-tsend");
	if (has_rma) {
		CHECK(!strcmp(mem.rma[4], "work-write"), "FI_OP_WRITE target \"%.*s\"", SZ, mem.rma[4]);
		CHECK(!strcmp(mem.rd[4], "work-read-src"), "FI_OP_READ got \"%.*s\"", SZ, mem.rd[4]);
	}
	if (atomic)
		CHECK(mem.atom[8] == 3, "FI_OP_ATOMIC: %" PRIu64 ", expected 3", mem.atom[8]);
	for (int i = 0; i < 7; i++)
		CHECK(cq_count(&w[i].context) == 0, "work %d wrote a CQ entry without FI_COMPLETION", i);
	CHECK_RET(cq_poll(), -FI_EAGAIN); /* the CQ is empty */
	CHECK(cval(txc) == tx0 && cval(rxc) == rx0, "the endpoint's counters moved: tx +%" PRIu64
	      " rx +%" PRIu64, cval(txc) - tx0, cval(rxc) - rx0);

	/* with FI_COMPLETION: CQ entries and the bound counters */
	rs = next_rx++ % NSLOT;
	ts = fill_tx("work-completion");
	memset(mem.rx[rs], 0, SZ);
	WORK(8, FI_OP_RECV, msg, &om[2]);
	iov[8] = (struct iovec) { mem.rx[rs], SZ };
	om[2] = (struct fi_op_msg) { .ep = ep, .msg = { .msg_iov = &iov[8], .desc = &desc, .iov_count = 1,
		.addr = FI_ADDR_UNSPEC, .context = &w[8].context }, .flags = FI_COMPLETION };
	WORK(9, FI_OP_SEND, msg, &om[3]);
	iov[9] = (struct iovec) { mem.tx[ts], SZ };
	om[3] = (struct fi_op_msg) { .ep = ep, .msg = { .msg_iov = &iov[9], .desc = &desc, .iov_count = 1,
		.addr = self, .context = &w[9].context }, .flags = FI_COMPLETION };
	CHECK_RET(queue(&w[8]), 0);
	CHECK_RET(queue(&w[9]), 0);
	ccn += 2;
	CHECK_RET(fi_cntr_add(wc, 2), 0);
	WAIT_CNTR(cc, ccn);
	CHECK(cq_wait(&w[8].context) != NULL, "FI_COMPLETION receive work: no CQ entry");
	CHECK(cq_wait(&w[9].context) != NULL, "FI_COMPLETION send work: no CQ entry");
	WAIT_CNTR(txc, tx0 + 1);
	WAIT_CNTR(rxc, rx0 + 1);
	CHECK_RX(rs, "work-completion");

	/* The application may close a completion counter as soon as it reads the count (MPICH's
	 * triggered broadcasts do): 200 times a receive and a send met at submission, their
	 * completion counter read until it says 2 (the watcher counts them) and closed at once:
	 * never -FI_EBUSY (rscntr once let go of the counter only after counting). */
	int busy = 0, round;
	for (round = 0; round < 200 && !busy; round++) {
		struct fid_cntr *c2 = open_cntr();
		if (!c2)
			break;
		int rs2 = next_rx++ % NSLOT, ts2 = fill_tx("close-at-count");
		memset(mem.rx[rs2], 0, SZ);
		WORK(10, FI_OP_RECV, msg, &om[0]);
		w[10].threshold = 0;
		w[10].completion_cntr = c2;
		iov[10] = (struct iovec) { mem.rx[rs2], SZ };
		om[0] = (struct fi_op_msg) { .ep = ep, .msg = { .msg_iov = &iov[10], .desc = &desc,
			.iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &w[10].context } };
		WORK(11, FI_OP_SEND, msg, &om[1]);
		w[11].threshold = 0;
		w[11].completion_cntr = c2;
		iov[11] = (struct iovec) { mem.tx[ts2], SZ };
		om[1] = (struct fi_op_msg) { .ep = ep, .msg = { .msg_iov = &iov[11], .desc = &desc,
			.iov_count = 1, .addr = self, .context = &w[11].context } };
		CHECK_RET(queue(&w[10]), 0);
		CHECK_RET(queue(&w[11]), 0);
		double t0 = now_ms();
		while (fi_cntr_read(c2) < 2 && now_ms() - t0 < TMO)
			;
		CHECK(fi_cntr_read(c2) == 2, "round %d: completion counter %" PRIu64 ", expected 2",
		      round, fi_cntr_read(c2));
		int r = fi_close(&c2->fid);
		if (r) {
			busy = r;
			while (r == -FI_EBUSY && now_ms() - t0 < 2 * TMO)
				r = fi_close(&c2->fid);
		}
		CHECK_RX(rs2, "close-at-count");
	}
	CHECK(busy == 0, "closing a completion counter that just read its count: %d (%s) in round %d",
	      busy, fi_strerror(-busy), round);
#undef WORK
	(void) fi_control(&domain->fid, FI_FLUSH_WORK, NULL);
	close_cntr(wc);
	close_cntr(cc);
}

/* ---------------------------------------------------------------------------------------- */
/* stress                                                                                    */

#define ST_THREADS 4
#define ST_ADDS 10000
#define ST_WORKS 200
#define ST_SENDS 20
static struct fid_cntr *st_c;
static volatile int st_add_failed;

static void *st_adder(void *arg)
{
	(void) arg;
	for (int i = 0; i < ST_ADDS; i++)
		if (fi_cntr_add(st_c, 1)) {
			st_add_failed = 1;
			break;
		}
	return NULL;
}

static void test_stress(void)
{
	printf(NAME ": stress: %d threads x %d adds, %d deferred adds, %d triggered sends\n",
	       ST_THREADS, ST_ADDS, ST_WORKS, ST_SENDS);
	struct fid_cntr *c2 = open_cntr();
	st_c = open_cntr();
	if (!c2 || !st_c) {
		close_cntr(c2);
		close_cntr(st_c);
		return;
	}
	static struct fi_deferred_work w[ST_WORKS];
	static struct fi_op_cntr op[ST_WORKS];
	const uint64_t total = (uint64_t) ST_THREADS * ST_ADDS;
	/* thresholds 1..total, pairs equal, queued in a scrambled order */
	for (int k = 0; k < ST_WORKS; k++) {
		int i = (k * 37) % ST_WORKS; /* 37 is prime to 200: a permutation */
		uint64_t thr = 1 + (uint64_t) (i / 2) * (total - 1) / (ST_WORKS / 2 - 1);
		cntr_work(&w[i], &op[i], FI_OP_CNTR_ADD, st_c, thr, c2, 1);
		CHECK_RET(queue(&w[i]), 0);
	}
	uint64_t rx0 = cval(rxc);
	int slot[ST_SENDS];
	void *ctx[ST_SENDS];
	/* tagged where possible, so that nothing left over from a failed part gets in between */
	for (int i = 0; i < ST_SENDS; i++)
		slot[i] = has_tagged ? post_trecv(0x57) : post_recv();
	for (int i = 0; i < ST_SENDS; i++) {
		char p[16];
		snprintf(p, sizeof(p), "stress-%02d", i);
		ctx[i] = tctx(st_c, (size_t) (i + 1) * total / ST_SENDS);
		if (has_tagged) {
			int t = fill_tx(p);
			struct iovec iov = { .iov_base = mem.tx[t], .iov_len = SZ };
			struct fi_msg_tagged msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
						     .addr = self, .tag = 0x57, .context = ctx[i] };
			CHECK_RET(POST(fi_tsendmsg(ep, &msg, FI_TRIGGER), cq), 0);
		} else {
			CHECK_RET(trig_send(p, ctx[i]), 0);
		}
	}
	pthread_t t[ST_THREADS];
	for (int i = 0; i < ST_THREADS; i++)
		pthread_create(&t[i], NULL, st_adder, NULL);
	/* the main thread keeps reading the CQ (progress) while the adders run */
	double t0 = now_ms();
	while (cval(st_c) < total && now_ms() - t0 < 4 * TMO)
		cq_poll();
	for (int i = 0; i < ST_THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(!st_add_failed, "fi_cntr_add failed in an adder thread");
	CHECK(cval(st_c) == total, "the counter reached %" PRIu64 " of %" PRIu64, cval(st_c), total);
	CHECK(wait_cntr_ms(c2, ST_WORKS, TMO), "deferred adds: %" PRIu64 " of %d", cval(c2), ST_WORKS);
	WAIT_CNTR(rxc, rx0 + ST_SENDS);
	quiet(QUIET * 2);
	CHECK(fi_cntr_read(c2) == ST_WORKS, "deferred adds ran %" PRIu64 " times, expected %d",
	      fi_cntr_read(c2), ST_WORKS);
	CHECK(cval(rxc) == rx0 + ST_SENDS, "%" PRIu64 " sends arrived, expected %d", cval(rxc) - rx0,
	      ST_SENDS);
	for (int i = 0; i < ST_SENDS; i++) {
		char p[16];
		snprintf(p, sizeof(p), "stress-%02d", i);
		CHECK_RX(slot[i], p);
		CHECK(cq_count(ctx[i]) == 1, "send %d has %d CQ entries", i, cq_count(ctx[i]));
	}
	int left = 0;
	for (int i = 0; i < ST_WORKS; i++)
		left += fi_control(&domain->fid, FI_CANCEL_WORK, &w[i]) != -FI_ENOENT;
	CHECK(left == 0, "%d stress works still queued", left);
	(void) fi_control(&domain->fid, FI_FLUSH_WORK, NULL);
	close_cntr(c2);
	close_cntr(st_c);
}

/* ---------------------------------------------------------------------------------------- */
/* queueing while adding                                                                     */

#define QA_THREADS 8
#define QA_ADDS 5000 /* per thread; 1 in 8 an adderr */
#define QA_BLOCK 50  /* sends per block: even blocks are met at submission, odd ones wait */
#define QA_TAG 0x5A
static struct fid_cntr *qa_c;
static uint64_t qa_allow;      /* the adders' ops (each) may go up to this */
static int qa_add_failed;
static double qa_deadline;
static struct fi_context2 qa_rctx[QA_WIN];
static int qa_slot_k[QA_WIN];  /* which receive (in posting order) a window slot holds */
static int qa_got[QA_SENDS];   /* the sequence number receive k got; -1 none, -2 garbled */
static int qa_posted, qa_done, qa_seen;
static long qa_post_err; /* the first post that failed (one check for all of them) */

static void *qa_adder(void *arg)
{
	(void) arg;
	for (uint64_t k = 0; k < QA_ADDS; k++) {
		while (k >= __atomic_load_n(&qa_allow, __ATOMIC_SEQ_CST)) {
			if (now_ms() > qa_deadline) {
				__atomic_store_n(&qa_add_failed, 2, __ATOMIC_SEQ_CST);
				return NULL;
			}
			usleep(20); /* asleep, not yielding: under valgrind a spinner starves the rest */
		}
		if ((k % 8 == 7 ? fi_cntr_adderr(qa_c, 1) : fi_cntr_add(qa_c, 1)) != 0) {
			__atomic_store_n(&qa_add_failed, 1, __ATOMIC_SEQ_CST);
			return NULL;
		}
	}
	return NULL;
}

/* Posts receive number qa_posted into window slot s. */
static int qa_post_recv(int s)
{
	memset(mem.qa_rx[s], 0, QA_SZ);
	qa_slot_k[s] = qa_posted++;
	void *ctx = &qa_rctx[s];
	ssize_t r = has_tagged
		? POST(fi_trecv(ep, mem.qa_rx[s], QA_SZ, desc, FI_ADDR_UNSPEC, QA_TAG, 0, ctx), cq)
		: POST(fi_recv(ep, mem.qa_rx[s], QA_SZ, desc, FI_ADDR_UNSPEC, ctx), cq);
	if (r) {
		qa_slot_k[s] = -1;
		if (!qa_post_err)
			qa_post_err = r;
	}
	return r == 0;
}

/* Reads the CQ; takes what the receives completed and reposts their slots. */
static void qa_pump(void)
{
	int redo[QA_WIN], nredo = 0;
	cq_poll();
	pthread_mutex_lock(&cqlock);
	for (; qa_seen < ncqlog; qa_seen++) {
		struct ent *e = &cqlog[qa_seen];
		char *p = (char *) e->ctx;
		if (p < (char *) qa_rctx || p >= (char *) (qa_rctx + QA_WIN))
			continue;
		int s = (int) ((struct fi_context2 *) e->ctx - qa_rctx);
		int k = qa_slot_k[s], seq = -2;
		qa_slot_k[s] = -1;
		if (k < 0 || k >= QA_SENDS)
			continue;
		if (!e->err && sscanf(mem.qa_rx[s], "qa-%d", &seq) != 1)
			seq = -2;
		if (qa_got[k] == -1)
			qa_got[k] = e->err ? -3 : seq;
		else
			qa_got[k] = -4; /* twice */
		qa_done++;
		redo[nredo++] = s;
	}
	pthread_mutex_unlock(&cqlock);
	for (int i = 0; i < nredo; i++)
		if (qa_posted < QA_SENDS)
			qa_post_recv(redo[i]);
}

static ssize_t qa_send(int i, void *ctx)
{
	snprintf(mem.qa_tx[i], QA_SZ, "qa-%04d", i);
	struct iovec iov = { .iov_base = mem.qa_tx[i], .iov_len = QA_SZ };
	if (has_tagged) {
		struct fi_msg_tagged msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
					     .addr = self, .tag = QA_TAG, .context = ctx };
		return POST(fi_tsendmsg(ep, &msg, FI_TRIGGER), cq);
	}
	struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .addr = self,
			      .context = ctx };
	return POST(fi_sendmsg(ep, &msg, FI_TRIGGER), cq);
}

static void test_queue_while_adding(void)
{
	const uint64_t total = (uint64_t) QA_THREADS * QA_ADDS;
	printf(NAME ": queueing: %d threads x %d adds (1 in 8 adderr) while %d triggered sends "
	       "with increasing thresholds are queued\n", QA_THREADS, QA_ADDS, QA_SENDS);
	qa_c = open_cntr();
	if (!qa_c)
		return;
	static uint64_t thr[QA_SENDS];
	static void *ctx[QA_SENDS];
	for (int i = 0; i < QA_SENDS; i++) {
		/* pairs tied: 1,1, ~41,~41, ... total,total */
		thr[i] = 1 + (uint64_t) (i / 2) * (total - 1) / (QA_SENDS / 2 - 1);
		qa_got[i] = -1;
	}
	double start = now_ms();
	qa_posted = qa_done = 0;
	qa_post_err = 0;
	qa_seen = ncqlog;
	uint64_t rx0 = cval(rxc), tx0 = cval(txc);
	for (int s = 0; s < QA_WIN; s++)
		qa_post_recv(s);
	qa_allow = 0;
	qa_add_failed = 0;
	qa_deadline = now_ms() + 4 * TMO;
	pthread_t t[QA_THREADS];
	for (int i = 0; i < QA_THREADS; i++)
		pthread_create(&t[i], NULL, qa_adder, NULL);
	int met = 0, waited = 0, fail = 0, sent = 0;
	for (int b = 0; b < QA_SENDS / QA_BLOCK && !fail; b++) {
		int first = b * QA_BLOCK, last = first + QA_BLOCK - 1;
		if (b % 2 == 0) {
			/* met at submission: the adders go on to the block's last threshold */
			__atomic_store_n(&qa_allow, (thr[last] + QA_THREADS - 1) / QA_THREADS,
					 __ATOMIC_SEQ_CST);
			double t0 = now_ms();
			/* asleep between reads: under valgrind a spinning thread starves the adders */
			while (cval(qa_c) < thr[last] && now_ms() - t0 < TMO) {
				qa_pump();
				usleep(20);
			}
			fail = cval(qa_c) < thr[last];
			if (fail) /* one check for the whole loop */
				CHECK(!fail, "the adders reached %" PRIu64 " of %" PRIu64, cval(qa_c),
				      thr[last]);
		}
		/* an odd block: the adders stay below its first threshold until the next block */
		for (int i = first; i <= last && !fail; i++) {
			uint64_t before = cval(qa_c);
			ctx[i] = tctx(qa_c, thr[i]);
			ssize_t r = qa_send(i, ctx[i]);
			if (r) /* one check for the whole loop, not one per send */
				CHECK(r == 0, "triggered send %d: %zd (%s)", i, r, fi_strerror((int) -r));
			fail = r != 0;
			sent += !fail;
			met += before >= thr[i];
			waited += cval(qa_c) < thr[i];
			if (i % 8 == 0)
				qa_pump();
		}
	}
	__atomic_store_n(&qa_allow, QA_ADDS, __ATOMIC_SEQ_CST);
	for (int i = 0; i < QA_THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(!qa_add_failed, "an adder thread %s", qa_add_failed == 1 ? "failed to add"
	      : "timed out waiting for its turn");
	CHECK(cval(qa_c) == total, "the counter reached %" PRIu64 " of %" PRIu64, cval(qa_c), total);
	CHECK(met >= QA_SENDS / 2 - QA_BLOCK && waited >= QA_SENDS / 2 - QA_BLOCK,
	      "%d sends met at submission and %d left waiting: the parts did not interleave", met,
	      waited);
	double t0 = now_ms();
	while (qa_done < QA_SENDS && now_ms() - t0 < TMO) {
		qa_pump();
		usleep(20);
	}
	quiet(QUIET);
	qa_pump();
	CHECK(!qa_post_err, "posting a receive: %ld (%s)", qa_post_err,
	      fi_strerror((int) -qa_post_err));
	CHECK(qa_done == QA_SENDS, "%d of %d receives completed", qa_done, QA_SENDS);
	int wrong = 0, first_wrong = -1;
	for (int k = 0; k < QA_SENDS; k++)
		if (qa_got[k] != k && wrong++ == 0)
			first_wrong = k;
	CHECK(wrong == 0, "%d receives out of threshold order (first: receive %d got %d)", wrong,
	      first_wrong, first_wrong >= 0 ? qa_got[first_wrong] : 0);
	int dup = 0, missing = 0, bad = 0;
	for (int i = 0; i < sent; i++) {
		int n = cq_count(ctx[i]);
		struct ent *e = cq_find(ctx[i]);
		missing += n == 0;
		dup += n > 1;
		bad += e && (e->err || !(e->flags & FI_SEND));
	}
	CHECK(sent == QA_SENDS && !missing && !dup && !bad, "triggered sends: %d of %d submitted, "
	      "%d without a CQ entry, %d with more than one, %d with an error or without FI_SEND",
	      sent, QA_SENDS, missing, dup, bad);
	CHECK(cval(rxc) == rx0 + QA_SENDS && cval(txc) == tx0 + QA_SENDS,
	      "endpoint counters: %" PRIu64 " receives, %" PRIu64 " sends, expected %d each",
	      cval(rxc) - rx0, cval(txc) - tx0, QA_SENDS);
	printf(NAME ": (queueing: %d sends met at submission, %d waited; %.0f ms)\n", met, waited,
	       now_ms() - start);
	/* after a failure: triggered sends still queued and receives still posted are cancelled
	 * (their FI_ECANCELED entries read), so that the counter closes and later parts run */
	for (int i = 0; i < sent; i++)
		if (!cq_find(ctx[i]) && fi_cancel(&ep->fid, ctx[i]) == 0)
			(void) cq_wait(ctx[i]);
	for (int s = 0; s < QA_WIN; s++)
		if (qa_slot_k[s] >= 0 && fi_cancel(&ep->fid, &qa_rctx[s]) == 0)
			(void) cq_wait(&qa_rctx[s]);
	close_cntr(qa_c);
}

/* ---------------------------------------------------------------------------------------- */

static int getinfo(uint64_t caps, enum fi_ep_type type, struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup(prov);
	hints->ep_attr->type = type;
	hints->caps = caps;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	if (type == FI_EP_RDM) {
		hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
					      FI_MR_PROV_KEY;
		hints->tx_attr->msg_order = FI_ORDER_SAS;
		hints->rx_attr->msg_order = FI_ORDER_SAS;
	}
	int ret = fi_getinfo(pt_api(), NULL, NULL, 0, hints, out);
	fi_freeinfo(hints);
	return ret;
}

static void watchdog(int sig)
{
	(void) sig;
	static const char m[] = NAME ": FAIL: watchdog: the test hung\n";
	if (write(2, m, sizeof(m) - 1) < 0)
		_exit(3);
	_exit(3);
}

int main(void)
{
	prov = getenv("RSCNTR_TEST_PROV") ? getenv("RSCNTR_TEST_PROV") : "rscntr";
	const char *core = getenv("FI_RSCNTR_CORE");
	int is_rscntr = !strcmp(prov, "rscntr");
	signal(SIGALRM, watchdog);
	alarm(240);
	if (is_rscntr && core && !strcmp(core, "none")) {
		printf(NAME ": FI_RSCNTR_CORE=none, no endpoints: skipped\n");
		return finish(NAME);
	}
	printf(NAME ": provider %s, FI_RSCNTR_CORE=%s\n", prov, core ? core : "(unset)");

	/* caps part by part: the base set with FI_TRIGGER, then with FI_ATOMIC added */
	const uint64_t base = FI_MSG | FI_TAGGED | FI_RMA | FI_TRIGGER;
	int ret = getinfo(base | FI_ATOMIC, FI_EP_RDM, &info), level = 0;
	if (ret == -FI_ENODATA) {
		level = 1;
		ret = getinfo(base, FI_EP_RDM, &info);
	}
	if (ret == -FI_ENODATA) {
		level = 2;
		ret = getinfo(FI_MSG | FI_TRIGGER, FI_EP_RDM, &info);
	}
	if (ret == 0 && level >= 1)
		printf(NAME ": no info with FI_ATOMIC: the atomic parts are skipped\n");
	if (ret == 0 && level >= 2)
		printf(NAME ": no info with FI_TAGGED | FI_RMA: those parts are skipped\n");
	if (ret == -FI_ENODATA) {
		/* no FI_TRIGGER at all: a failure if the provider has RDM endpoints */
		struct fi_info *plain = NULL;
		if (getinfo(FI_MSG, FI_EP_RDM, &plain) == 0) {
			CHECK(0, "%s has RDM endpoints (%s) but fi_getinfo with FI_MSG | FI_TRIGGER "
			      "returned -FI_ENODATA", prov, plain->fabric_attr->prov_name);
			fi_freeinfo(plain);
			return finish(NAME);
		}
		/* a core with only DGRAM (udp) or only MSG endpoints (libfabric 1.17's tcp) */
		struct fi_info *other = NULL;
		int dgram = getinfo(FI_MSG, FI_EP_DGRAM, &other) == 0;
		if (!dgram)
			CHECK_RET(getinfo(FI_MSG, FI_EP_MSG, &other), 0);
		printf(NAME ": no RDM endpoints (only %s): skipped\n", dgram ? "DGRAM" : "MSG");
		fi_freeinfo(other);
		return finish(NAME);
	}
	CHECK_RET(ret, 0);
	if (!info)
		return finish(NAME);
	CHECK(!strcmp(info->fabric_attr->prov_name, prov), "prov_name %s", info->fabric_attr->prov_name);
	CHECK(info->caps & FI_TRIGGER, "FI_TRIGGER missing from the returned caps");
	has_tagged = !!(info->caps & FI_TAGGED);
	has_rma = !!(info->caps & FI_RMA);
	has_atomic = !!(info->caps & FI_ATOMIC);
	need_ctx2 = !!(info->mode & FI_CONTEXT2);
	printf(NAME ": fabric %s domain %s; caps%s%s%s; triggered contexts: %s\n",
	       info->fabric_attr->name, info->domain_attr->name, has_tagged ? " tagged" : "",
	       has_rma ? " rma" : "", has_atomic ? " atomic" : "",
	       need_ctx2 ? "fi_triggered_context2 only (mode FI_CONTEXT2)" : "both kinds by turns");

	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	if (!fabric)
		return finish(NAME);
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		return finish(NAME);
	struct fi_cntr_attr probe_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	ret = fi_cntr_open(domain, &probe_attr, &txc, NULL);
	if (ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP) {
		printf(NAME ": %s has no counters (%s): skipped\n", prov, fi_strerror(-ret));
		fi_close(&domain->fid);
		fi_close(&fabric->fid);
		fi_freeinfo(info);
		return finish(NAME);
	}
	CHECK_RET(ret, 0);
	rxc = open_cntr();
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	CHECK_RET(fi_av_open(domain, &av_attr, &av, NULL), 0);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .size = 1024 };
	CHECK_RET(fi_cq_open(domain, &cq_attr, &cq, NULL), 0);
	CHECK_RET(fi_endpoint(domain, info, &ep, NULL), 0);
	if (!ep || !txc || !rxc || !cq || !av)
		return finish(NAME);
	CHECK_RET(fi_ep_bind(ep, &av->fid, 0), 0);
	CHECK_RET(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	CHECK_RET(fi_ep_bind(ep, &txc->fid, FI_SEND), 0);
	CHECK_RET(fi_ep_bind(ep, &rxc->fid, FI_RECV), 0);
	CHECK_RET(fi_enable(ep), 0);
	uint64_t access = FI_SEND | FI_RECV;
	if (has_rma || has_atomic)
		access |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	if ((info->domain_attr->mr_mode & FI_MR_LOCAL) || has_rma || has_atomic) {
		CHECK_RET(fi_mr_reg(domain, &mem, sizeof(mem), access, 0, 0x7123, 0, &mr, NULL), 0);
		if (mr) {
			desc = fi_mr_desc(mr);
			rkey = fi_mr_key(mr);
		}
	}
	char name[256];
	size_t len = sizeof(name);
	CHECK_RET(fi_getname(&ep->fid, name, &len), 0);
	CHECK_RET(fi_av_insert(av, name, 1, &self, 0, NULL), 1);

	const char *fail = getenv("FI_RSCNTR_TEST_FAIL");
	if (fail && strstr(fail, "post")) {
		/* every post is refused: only this part can run */
		test_refused_posts();
		goto close; /* closed too: an open endpoint leaves shm's file and its bell behind */
	}
	test_order();
	settle();
	test_already_met();
	settle();
	test_completion_release();
	settle();
	test_calls();
	settle();
	test_alias();
	settle();
	test_errors();
	settle();
	test_cancel();
	settle();
	test_work();
	test_work_data();
	settle();
	test_stress();
	settle();
	test_queue_while_adding();
	settle();
	printf(NAME ": triggered contexts used: %d fi_triggered_context, %d fi_triggered_context2\n",
	       n_tc1, n_tc2);

close:
	quiet(QUIET);
	if (mr)
		CHECK_RET(fi_close(&mr->fid), 0);
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&txc->fid), 0);
	CHECK_RET(fi_close(&rxc->fid), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	return finish(NAME);
}
