/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What an OpenSHMEM library over rscntr asks of a remote-write counter bound to its MRs (the
 * shape of Sandia OpenSHMEM's: a target endpoint T whose heap MR has a counter `tgt` bound
 * FI_REMOTE_WRITE, which shmem_wait_until sleeps on; contexts with a put counter bound
 * FI_WRITE and a get counter bound FI_READ, waited on with fi_cntr_wait(-1)). One domain,
 * one process; rscntr over FI_RSCNTR_CORE (meant for tcp;ofi_rxm, where rscntr counts the
 * remote accesses itself).
 *
 * | part     | checks                                                                         |
 * |----------|--------------------------------------------------------------------------------|
 * | connect  | a first put, T's CQ read meanwhile (the connection needs T's progress): tgt 1  |
 * | backlog  | context I reads T's MR READS times (16 B each, then 1 MiB each) while nothing  |
 * |          | reads T's CQ, then writes 8 B and 4 MiB to it: tgt reaches exactly 2 through   |
 * |          | fi_cntr_wait(tgt, 2) (the reads' notifications, which count nothing here, lie  |
 * |          | in T's CQ ahead of the writes'), and the data is in place                      |
 * | large    | LARGE writes of 4 MiB and reads of 4 MiB: tgt counts each write exactly once   |
 * | sleep    | a thread sleeps in fi_cntr_wait(tgt, n + 1, -1) while nothing arrives for      |
 * |          | SLEEP_MS: its CPU is printed and must stay under 10 % of the time; a write     |
 * |          | then wakes it                                                                   |
 * | contexts | (with SHMEM_TARGET_CTXS=n: not by default) n more endpoints, each with its    |
 * |          | own CQ and put and get counters and a Sandia OpenSHMEM context's capabilities  |
 * |          | (FI_READ and FI_WRITE, no remote access; its web test makes 20 contexts,       |
 * |          | many-ctx 32), open, enable and each write to T once; tgt counts each. Over      |
 * |          | tcp;ofi_rxm the 23rd context's first write fails with -FI_EINVAL               |
 * |          | (docs/design.md)                                                               |
 *
 * Skipped, with the reason printed: libfabric before 2.0 (its cores serve a read only from the
 * target endpoint's own progress, which reads T's CQ), FI_RSCNTR_CORE=none, no RDM endpoints with FI_RMA_EVENT, or
 * a core whose own remote-access counters bind to endpoints only (shm, udp;ofi_rxd); over tcp
 * and tcp;ofi_rxm, where rscntr provides them, each of those is a failure. Every wait is bounded; a
 * watchdog turns a hang into a failure.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include "harness.h"

#define NAME "shmem_target"
#define TMO 10000
#define READS 200
#define BIG (4 << 20)
#define MID (1 << 20)
#define LARGE 8
#define SLEEP_MS 1000
#define CTXS_MAX 256

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cqT, *cqI;
static struct fid_ep *epT, *epI;
static struct fid_cntr *tgt, *putI, *getI;
static struct fid_mr *mrT, *mrI;
static fi_addr_t addrT;
static char *heap, *local;

static void watchdog(int sig)
{
	(void) sig;
	static const char msg[] = NAME ": watchdog: a wait hung\n";
	ssize_t w = write(2, msg, sizeof msg - 1);
	(void) w;
	_exit(2);
}

static uint64_t raddr(const void *p)
{
	return (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t) (uintptr_t) p
		: (uint64_t) ((const char *) p - heap);
}

static struct fid_cntr *cntr(void)
{
	struct fi_cntr_attr a = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cntr *c = NULL;
	CHECK_RET(fi_cntr_open(domain, &a, &c, NULL), 0);
	return c;
}

/* An endpoint with its CQ and, when given, a put counter (FI_WRITE) and a get counter
 * (FI_READ), enabled. */
/* An endpoint on the domain's info, or (initiator_only) with the capabilities Sandia
 * OpenSHMEM gives a context's endpoint: it reads and writes, no remote access targets it. */
static struct fid_ep *endpoint_as(struct fid_cq *cq, struct fid_cntr *put, struct fid_cntr *get,
				  int initiator_only)
{
	struct fid_ep *e = NULL;
	struct fi_info *i = fi_dupinfo(info);
	if (initiator_only) {
		i->caps = FI_RMA | FI_WRITE | FI_READ | FI_RECV;
		i->tx_attr->caps = i->caps;
		i->rx_attr->caps = FI_RECV;
	}
	CHECK_RET(fi_endpoint(domain, i, &e, NULL), 0);
	fi_freeinfo(i);
	if (!e)
		return NULL;
	CHECK_RET(fi_ep_bind(e, &av->fid, 0), 0);
	CHECK_RET(fi_ep_bind(e, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION), 0);
	if (put)
		CHECK_RET(fi_ep_bind(e, &put->fid, FI_WRITE), 0);
	if (get)
		CHECK_RET(fi_ep_bind(e, &get->fid, FI_READ), 0);
	CHECK_RET(fi_enable(e), 0);
	return e;
}

static struct fid_ep *endpoint(struct fid_cq *cq, struct fid_cntr *put, struct fid_cntr *get)
{
	return endpoint_as(cq, put, get, 0);
}

/* Posts until the core takes it, waiting on `c` (which drives the endpoint's progress). */
#define POSTC(call, c)                                                                    \
	({                                                                                \
		ssize_t _ret;                                                             \
		double _t0 = now_ms();                                                    \
		while ((_ret = (call)) == -FI_EAGAIN && now_ms() - _t0 < TMO)             \
			(void) fi_cntr_wait(c, fi_cntr_read(c) + 1, 1);                   \
		_ret;                                                                     \
	})

static int wait_cntr(struct fid_cntr *c, uint64_t v, const char *what)
{
	int ret = fi_cntr_wait(c, v, TMO);
	CHECK(ret == 0, "%s: fi_cntr_wait(%" PRIu64 ") = %d (%s), counter at %" PRIu64
	      ", errors %" PRIu64, what, v, ret, fi_strerror(-ret), fi_cntr_read(c), fi_cntr_readerr(c));
	return ret == 0;
}

static void put(struct fid_ep *ep, struct fid_cntr *c, const void *src, size_t len, void *dst,
		uint64_t *issued, const char *what)
{
	CHECK_RET(POSTC(fi_write(ep, src, len, fi_mr_desc(mrI), addrT, raddr(dst), fi_mr_key(mrT),
				 NULL), c), 0);
	(*issued)++;
	wait_cntr(c, *issued, what);
}

static void get(struct fid_ep *ep, struct fid_cntr *c, void *dst, size_t len, const void *src,
		uint64_t *issued, const char *what)
{
	CHECK_RET(POSTC(fi_read(ep, dst, len, fi_mr_desc(mrI), addrT, raddr(src), fi_mr_key(mrT),
				NULL), c), 0);
	(*issued)++;
	wait_cntr(c, *issued, what);
}

static uint64_t n_puts, n_gets;

/* A put from `ep` (put counter `c`) that may set a connection up, which needs T's progress
 * too: T's CQ is read meanwhile. */
static void put_connecting(struct fid_ep *ep, struct fid_cntr *c, uint64_t *issued, void *dst,
			   const char *what)
{
	ssize_t ret;
	double t0 = now_ms();
	while ((ret = fi_write(ep, local, 8, fi_mr_desc(mrI), addrT, raddr(dst), fi_mr_key(mrT),
			       NULL)) == -FI_EAGAIN && now_ms() - t0 < TMO) {
		struct fi_cq_entry e;
		(void) fi_cq_read(cqT, &e, 0);
		(void) fi_cntr_wait(c, fi_cntr_read(c) + 1, 1);
	}
	CHECK(ret == 0, "%s: fi_write returned %zd (%s)", what, ret, fi_strerror((int) -ret));
	if (ret)
		return;
	(*issued)++;
	while (fi_cntr_read(c) < *issued && now_ms() - t0 < TMO) {
		struct fi_cq_entry e;
		(void) fi_cq_read(cqT, &e, 0);
	}
	wait_cntr(c, *issued, what);
}

/* The first put sets the connection up. */
static void connect(void)
{
	uint64_t v = 1;
	memcpy(local, &v, sizeof v);
	put_connecting(epI, putI, &n_puts, heap, "connect: the first put");
	wait_cntr(tgt, 1, "connect: the remote-write counter");
}

static void test_backlog(void)
{
	uint64_t t0 = fi_cntr_read(tgt);
	for (int i = 0; i < READS; i++)
		get(epI, getI, local, 16, heap + 64, &n_gets, "backlog: a small get");
	for (int i = 0; i < READS / 10; i++)
		get(epI, getI, local, MID, heap + 64, &n_gets, "backlog: a 1 MiB get");
	CHECK(fi_cntr_read(tgt) == t0, "backlog: reads moved the remote-write counter by %" PRIu64,
	      fi_cntr_read(tgt) - t0);
	uint64_t v = 0x5eed5eedULL;
	memcpy(local, &v, sizeof v);
	put(epI, putI, local, sizeof v, heap, &n_puts, "backlog: the 8 B put");
	memset(local, 0xab, BIG);
	put(epI, putI, local, BIG, heap + 64, &n_puts, "backlog: the 4 MiB put");
	/* As shmem_wait_until: the remote-write counter, waited on. */
	if (wait_cntr(tgt, t0 + 2, "backlog: the remote-write counter after 200 reads' notifications")) {
		uint64_t got;
		memcpy(&got, heap, sizeof got);
		CHECK(got == v, "backlog: the 8 B put's data not in place (%#" PRIx64 ")", got);
		CHECK((unsigned char) heap[64 + BIG - 1] == 0xab, "backlog: the 4 MiB put's data not in place");
	}
	struct fi_cq_entry e;
	(void) fi_cq_read(cqT, &e, 0);
	int failed = h_failed;
	CHECK(fi_cntr_read(tgt) == t0 + 2, "backlog: the counter at %" PRIu64 ", expected %" PRIu64,
	      fi_cntr_read(tgt), t0 + 2);
	if (h_failed == failed)
		printf(NAME ": backlog: %d gets, then 2 puts counted exactly\n", READS + READS / 10);
}

static void test_large(void)
{
	uint64_t t0 = fi_cntr_read(tgt);
	for (int i = 0; i < LARGE; i++) {
		memset(local, i + 1, BIG);
		put(epI, putI, local, BIG, heap + 64, &n_puts, "large: a 4 MiB put");
		get(epI, getI, local + BIG, BIG, heap + 64, &n_gets, "large: a 4 MiB get");
		CHECK((unsigned char) local[2 * BIG - 1] == i + 1, "large: get %d read old data", i);
	}
	wait_cntr(tgt, t0 + LARGE, "large: the remote-write counter");
	struct fi_cq_entry e;
	(void) fi_cq_read(cqT, &e, 0);
	CHECK(fi_cntr_read(tgt) == t0 + LARGE, "large: the counter at %" PRIu64 ", expected %" PRIu64,
	      fi_cntr_read(tgt), t0 + LARGE);
}

struct sleeper {
	uint64_t threshold;
	int ret;
	double cpu_ms, wall_ms;
};

static void *sleeper(void *arg)
{
	struct sleeper *s = arg;
	double c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID), w0 = now_ms();
	s->ret = fi_cntr_wait(tgt, s->threshold, -1);
	s->cpu_ms = clock_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
	s->wall_ms = now_ms() - w0;
	return NULL;
}

static void test_sleep(void)
{
	struct sleeper s = { .threshold = fi_cntr_read(tgt) + 1 };
	pthread_t th;
	CHECK_RET(pthread_create(&th, NULL, sleeper, &s), 0);
	struct timespec nap = { SLEEP_MS / 1000, (SLEEP_MS % 1000) * 1000000L };
	nanosleep(&nap, NULL);
	uint64_t v = 7;
	memcpy(local, &v, sizeof v);
	put(epI, putI, local, sizeof v, heap + 8, &n_puts, "sleep: the waking put");
	CHECK_RET(pthread_join(th, NULL), 0);
	CHECK(s.ret == 0, "sleep: the waiter returned %d (%s)", s.ret, fi_strerror(-s.ret));
	double pct = 100.0 * s.cpu_ms / (s.wall_ms > 0 ? s.wall_ms : 1);
	printf(NAME ": sleep: a waiter on the remote-write counter used %.1f ms of CPU in %.0f ms "
	       "(%.1f %%)\n", s.cpu_ms, s.wall_ms, pct);
	CHECK(pct < 10.0, "sleep: the waiter used %.1f %% of a CPU (it should sleep)", pct);
}

static void test_contexts(int n)
{
	struct fid_cq *cq[CTXS_MAX] = { 0 };
	struct fid_ep *ep[CTXS_MAX] = { 0 };
	struct fid_cntr *pc[CTXS_MAX] = { 0 }, *gc[CTXS_MAX] = { 0 };
	uint64_t t0 = fi_cntr_read(tgt);
	int opened = 0, failed = h_failed;
	for (int i = 0; i < n; i++) {
		struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_CONTEXT };
		CHECK_RET(fi_cq_open(domain, &ca, &cq[i], NULL), 0);
		pc[i] = cntr();
		gc[i] = cntr();
		if (!cq[i] || !pc[i] || !gc[i])
			break;
		ep[i] = endpoint_as(cq[i], pc[i], gc[i], 1);
		if (!ep[i] || h_failed > failed)
			break;
		opened++;
	}
	CHECK(opened == n, "contexts: %d of %d endpoints with their own counters opened", opened, n);
	for (int i = 0; i < opened && h_failed == failed; i++) {
		uint64_t issued = 0;
		put_connecting(ep[i], pc[i], &issued, heap + 128, "contexts: a context's first put");
	}
	wait_cntr(tgt, t0 + opened, "contexts: the remote-write counter");
	printf(NAME ": contexts: %d endpoints with their own CQ and counters, %" PRIu64 " puts counted\n",
	       opened, fi_cntr_read(tgt) - t0);
	for (int i = 0; i < n; i++) {
		if (ep[i])
			CHECK_RET(fi_close(&ep[i]->fid), 0);
		if (pc[i])
			CHECK_RET(fi_close(&pc[i]->fid), 0);
		if (gc[i])
			CHECK_RET(fi_close(&gc[i]->fid), 0);
		if (cq[i])
			CHECK_RET(fi_close(&cq[i]->fid), 0);
	}
}

int main(void)
{
	const char *core = getenv("FI_RSCNTR_CORE");
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, watchdog);
	alarm(120);
	if (!core || !strcmp(core, "none")) {
		printf(NAME ": FI_RSCNTR_CORE=%s, nothing to test\n", core ? core : "(unset)");
		return finish(NAME);
	}
	int emulated = !strcmp(core, "tcp") || strstr(core, ";ofi_rxm");
	if (FI_MAJOR(fi_version()) < 2) {
		/* Before 2.0 a core endpoint serves reads only from its own progress, which here
		 * means reading T's CQ, which drains the notifications the backlog part piles up. */
		printf(NAME ": libfabric %u.%u: skipped (written for libfabric 2's cores)\n",
		       FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
		return finish(NAME);
	}
	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_RMA | FI_RMA_EVENT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
		FI_MR_RMA_EVENT | FI_MR_LOCAL;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	/* As Sandia OpenSHMEM's default build asks: over shm a 4 MiB put goes through shm's SAR
	 * buffers, which only the target endpoint's progress empties, and here no thread reads T. */
	hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->fabric_attr->prov_name = strdup("rscntr");
	int ret = fi_getinfo(pt_api_at_most(FI_VERSION(1, 18)), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret == -FI_ENODATA) {
		CHECK(!emulated, "rscntr over %s refused FI_RMA_EVENT", core);
		printf(NAME ": core %s: no RDM endpoints with FI_RMA_EVENT: skipped\n", core);
		return finish(NAME);
	}
	CHECK_RET(ret, 0);
	if (!info)
		return finish(NAME);
	printf(NAME ": rscntr over %s\n", core);
	heap = calloc(1, 64 + BIG + 4096);
	local = calloc(1, 2 * BIG);
	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain || !heap || !local)
		return finish(NAME);
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	CHECK_RET(fi_av_open(domain, &av_attr, &av, NULL), 0);
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_CONTEXT };
	CHECK_RET(fi_cq_open(domain, &ca, &cqT, NULL), 0);
	CHECK_RET(fi_cq_open(domain, &ca, &cqI, NULL), 0);
	tgt = cntr();
	putI = cntr();
	getI = cntr();
	uint64_t acc = FI_REMOTE_WRITE | FI_REMOTE_READ | FI_READ | FI_WRITE;
	CHECK_RET(fi_mr_reg(domain, heap, 64 + BIG + 4096, acc, 0, 1, 0, &mrT, NULL), 0);
	CHECK_RET(fi_mr_reg(domain, local, 2 * BIG, acc, 0, 2, 0, &mrI, NULL), 0);
	if (!mrT || !mrI || !tgt)
		return finish(NAME);
	ret = fi_mr_bind(mrT, &tgt->fid, FI_REMOTE_WRITE);
	if ((ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP) && !emulated) {
		printf(NAME ": core %s counts no remote writes per MR (%s): skipped\n", core,
		       fi_strerror(-ret));
		return finish(NAME);
	}
	CHECK_RET(ret, 0);
	if (info->domain_attr->mr_mode & FI_MR_RMA_EVENT)
		CHECK_RET(fi_mr_enable(mrT), 0);
	epT = endpoint(cqT, NULL, NULL);
	epI = endpoint(cqI, putI, getI);
	if (!epT || !epI)
		return finish(NAME);
	char name[128];
	size_t len = sizeof name;
	CHECK_RET(fi_getname(&epT->fid, name, &len), 0);
	CHECK_RET(fi_av_insert(av, name, 1, &addrT, 0, NULL), 1);
	if (h_failed)
		return finish(NAME);

	connect();
	test_backlog();
	test_large();
	test_sleep();
	/* Not by default: over tcp;ofi_rxm the kernel refuses the fds of the 31st such endpoint
	 * (see docs/design.md, "Many endpoints over tcp;ofi_rxm"). */
	int ctxs = getenv("SHMEM_TARGET_CTXS") ? atoi(getenv("SHMEM_TARGET_CTXS")) : 0;
	if (ctxs > CTXS_MAX)
		ctxs = CTXS_MAX;
	if (ctxs > 0)
		test_contexts(ctxs);
	else
		printf(NAME ": contexts: skipped (SHMEM_TARGET_CTXS=<n> runs it)\n");

	CHECK_RET(fi_close(&epI->fid), 0);
	CHECK_RET(fi_close(&epT->fid), 0);
	CHECK_RET(fi_close(&mrT->fid), 0);
	CHECK_RET(fi_close(&mrI->fid), 0);
	struct fid_cntr *cs[] = { tgt, putI, getI };
	for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
		CHECK_RET(fi_close(&cs[i]->fid), 0);
	CHECK_RET(fi_close(&cqT->fid), 0);
	CHECK_RET(fi_close(&cqI->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	free(heap);
	free(local);
	return finish(NAME);
}
