/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * An OpenSHMEM-shaped client: what Sandia OpenSHMEM 1.5's default build (src/transport_ofi.c)
 * asks of a provider, written here in its shape, with 2 processes (PEs, fork; names, keys and
 * addresses exchanged over pipes, which also serve as the barrier, as SOS's PMI does).
 *
 * Set-up as SOS's: hints FI_RMA | FI_ATOMIC | FI_RMA_EVENT, RDM, automatic data progress,
 * FI_RM_ENABLED, FI_THREAD_DOMAIN, mr_mode 0 (offsets, keys asked for: 1 byte of key), tx
 * op_flags FI_DELIVERY_COMPLETE, API 1.5. A target endpoint (CQ bound, no counter), then a
 * target counter (FI_WAIT_UNSPEC) bound with fi_mr_bind(FI_REMOTE_WRITE) to the "heap" MR
 * (key 1) and the "data" MR (key 0), fi_mr_enable where the mode says; keys and addresses
 * published as the infos' mr_mode says (FI_MR_PROV_KEY: fi_mr_key; FI_MR_VIRT_ADDR: the
 * buffer's address, else offsets). NCTX contexts, each an endpoint with a put counter bound
 * FI_WRITE and a get counter bound FI_READ (FI_WAIT_UNSPEC) and a CQ with
 * FI_SELECTIVE_COMPLETION. Quiet is fi_cntr_wait(cntr, issued, -1); fence is a quiet (SOS's
 * transport fence without FI_FENCE); wait_until reads the target counter, checks the word,
 * and sleeps in fi_cntr_wait(target, count + 1, -1).
 *
 * Each PE, toward the other, checking the data it receives and its counters' exact counts:
 * | puts     | from every context: a 64 B fi_write and an 8 B fi_inject_write to the heap    |
 * | large    | a 1 MiB put (past shm's inject size and rxm's eager size) and a 1 MiB get      |
 * | atomics  | fi_atomic SUM from every context on a word of the data MR; fi_fetch_atomic     |
 * |          | SUM and fi_compare_atomic CSWAP on the heap; 64 B gets from every context      |
 * | signal   | ROUNDS rounds of ping-pong: data put, fence, flag put; the peer waits until the |
 * |          | flag in fi_cntr_wait on its target counter, then checks the data               |
 * | idle     | PE 1 waits until a flag PE 0 puts 300 ms later: the waiting thread's CPU over   |
 * |          | the wait stays under 10 % of it and it sleeps at most 30 times (it sleeps in    |
 * |          | fi_cntr_wait, woken by the put and nothing else; only printed over             |
 * |          | rscntr(sockets), whose waits there yield; the sleeps only printed with manual  |
 * |          | progress, where SOS's order leaves the domain re-checking every 1 ms)           |
 * | quiets   | PE 0 puts 8 B and quiets 20 times, 5 ms apart, while PE 1 makes no libfabric    |
 * |          | call: PE 1's automatic progress completes each put, and the last is in place   |
 * | self     | 50 times an 8 B fi_inject_write and an fi_inject_atomic SUM to the PE's own     |
 * |          | heap, each quieted, then the word looked at: the value is in place (judged     |
 * |          | over sockets and rscntr(shm); only printed over rscntr(tcp;ofi_rxm) and        |
 * |          | rscntr(shm) with manual progress: known limitations)                           |
 * | realloc  | the heap MR closed and registered anew (shmem_realloc), the counter bound       |
 * |          | again, key and address published again; puts from every context and a 1 MiB  |
 * |          | put to it                                                                      |
 * Then the target counter holds exactly the writes and atomics the peer and the PE itself made (reads not:
 * it is bound FI_REMOTE_WRITE), and each put and get counter exactly what its context issued.
 *
 * RSCNTR_TEST_PROV names the provider (default rscntr, over FI_RSCNTR_CORE); a core that
 * refuses SOS's hints says so ("refuses SOS's hints") and the program exits 0 (the step checks
 * which cores do). rscntr refusing them is a failure, unless the core has no RDM endpoints
 * with atomics at all (tcp). A counter refused on an MR (-FI_ENOSYS) where the core refuses it
 * itself (udp;ofi_rxd offers FI_RMA_EVENT, counts remote writes per endpoint, and its MRs refuse
 * counters; rscntr mirrors it) is said ("MR counters refused") and the rest skipped; over
 * rscntr(shm), tcp;ofi_rxm or sockets it is a failure. SHMEM_LIKE_MANUAL=1 asks for manual progress (SOS's manual-progress
 * build; this program then drives progress while it waits on its pipes). A watchdog turns a
 * hang into a failure.
 */
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>
#include "harness.h"

#define NAME "shmem_like"
#define NCTX 8
#define ROUNDS 20
#define BIG (1 << 20)
#define HEAP_SIZE (4 * BIG)
#define SMALL 64
/* Heap layout: per-context puts, the flag and its data, then the large transfers. */
#define OFF_PUT(c) ((uint64_t) (c) * SMALL)
#define OFF_INJ(c) (NCTX * SMALL + (uint64_t) (c) * 8)
#define OFF_FLAG (2 * NCTX * SMALL)
#define OFF_SIG_DATA (OFF_FLAG + 64)
#define OFF_FETCH (OFF_SIG_DATA + SMALL)
#define OFF_CSWAP (OFF_FETCH + 8)
#define OFF_SELF (OFF_CSWAP + 64)
#define OFF_BIG BIG
#define OFF_GET_SRC (2 * BIG)

static const char *prov;
static int me, peer;
static int to_peer, from_peer; /* pipe ends */

struct pub {
	char name[64];
	size_t name_len;
	uint64_t heap_key, data_key, heap_addr, data_addr;
};

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_ep *tep;
static struct fid_cq *tcq;
static struct fid_cntr *target;
static struct fid_mr *heap_mr, *data_mr;
static char *heap;
static int64_t data_seg[64] __attribute__((aligned(64)));
static struct pub mine, theirs;
static fi_addr_t addrs[2];

struct ctx {
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_cntr *put, *get;
	uint64_t puts, gets;
};
static struct ctx ctxs[NCTX];

static void progress_all(void)
{
	struct fi_cq_entry e;
	if (tcq)
		(void) fi_cq_read(tcq, &e, 0);
	for (int c = 0; c < NCTX; c++)
		if (ctxs[c].cq)
			(void) fi_cq_read(ctxs[c].cq, &e, 0);
	if (target)
		(void) fi_cntr_read(target);
}

static void watchdog(int sig)
{
	(void) sig;
	static const char msg[] = "FAIL shmem_like: watchdog: a PE hung (a wait that never returned)\n";
	(void) !write(2, msg, sizeof msg - 1);
	_exit(3);
}

static void put_all(const void *p, size_t n)
{
	if (write(to_peer, p, n) != (ssize_t) n)
		_exit(4);
}

static int manual; /* SHMEM_LIKE_MANUAL=1: FI_PROGRESS_MANUAL, as SOS's manual-progress build */
static void progress_all(void);

static void get_all(void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		if (manual) {
			/* Nothing moves data but this PE's calls: progress while the peer has not
			 * written. */
			struct pollfd pfd = { .fd = from_peer, .events = POLLIN };
			if (poll(&pfd, 1, 0) == 0) {
				progress_all();
				continue;
			}
		}
		ssize_t r = read(from_peer, (char *) p + got, n - got);
		if (r <= 0)
			_exit(4);
		got += (size_t) r;
	}
}

static void barrier(void)
{
	char b = 'b';
	put_all(&b, 1);
	get_all(&b, 1);
}

static uint64_t expect_target;
static uint64_t self_made; /* writes and atomics this PE made toward its own heap */

/* After the peer's quiet: an injected put completes at its initiator when posted (shm), so
 * the pipe may overtake it. SOS's own barrier goes through the provider, in order; here each
 * PE waits until its target counter holds everything the peer posted toward it, which it
 * counts once the data is in place. */
static void barrier_counted(const char *what)
{
	uint64_t peer_expect = 0;
	put_all(&expect_target, sizeof expect_target);
	get_all(&peer_expect, sizeof peer_expect);
	int ret = fi_cntr_wait(target, peer_expect, 10000);
	CHECK(ret == 0, "%s: the target counter did not reach %" PRIu64 " (%" PRIu64 ", ret %d)", what,
	      peer_expect, fi_cntr_read(target), ret);
	barrier();
}

static struct fi_info *hints_sos(void)
{
	struct fi_info *h = fi_allocinfo();
	h->fabric_attr->prov_name = strdup(prov);
	h->caps = FI_RMA | FI_ATOMIC | FI_RMA_EVENT;
	h->addr_format = FI_FORMAT_UNSPEC;
	h->domain_attr->data_progress = manual ? FI_PROGRESS_MANUAL : FI_PROGRESS_AUTO;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->domain_attr->mr_mode = 0;
	h->domain_attr->mr_key_size = 1;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->ep_attr->type = FI_EP_RDM;
	h->ep_attr->tx_ctx_cnt = 0;
	h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	h->tx_attr->inject_size = 8;
	return h;
}

/* 0, -FI_ENODATA (said on stdout), or another error. */
static int getinfo(void)
{
	struct fi_info *h = hints_sos();
	int ret = fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &info);
	fi_freeinfo(h);
	/* the provider itself: a core's name also brings the layerings over it */
	while (!ret && info && strcmp(info->fabric_attr->prov_name, prov)) {
		struct fi_info *next = info->next;
		info->next = NULL;
		fi_freeinfo(info);
		info = next;
	}
	if (!ret && !info)
		ret = -FI_ENODATA;
	return ret;
}

/* For rscntr: does the core have RDM endpoints with atomics at all (no remote-access
 * counters, manual progress)? */
static int core_has_atomics(void)
{
	struct fi_info *h = fi_allocinfo(), *l = NULL;
	h->fabric_attr->prov_name = strdup(prov);
	h->caps = FI_RMA | FI_ATOMIC;
	h->ep_attr->type = FI_EP_RDM;
	int ret = fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &l);
	fi_freeinfo(h);
	fi_freeinfo(l);
	return ret == 0;
}

static struct fid_cntr *cntr(void)
{
	struct fi_cntr_attr a = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cntr *c = NULL;
	CHECK_RET(fi_cntr_open(domain, &a, &c, NULL), 0);
	return c;
}

static int mr_refused;

/* The cores over which rscntr must serve SOS's MR counters (its own over shm and tcp;ofi_rxm,
 * sockets' over sockets); FI_RSCNTR_CORE unset: the first core that answers. */
static int serves_sos(void)
{
	const char *core = getenv("FI_RSCNTR_CORE");
	if (strcmp(prov, "rscntr"))
		return !strcmp(prov, "sockets");
	return !core || !strcmp(core, "auto") || !strcmp(core, "shm") || !strcmp(core, "sockets") ||
	       strstr(core, ";ofi_rxm");
}

/* The heap MR (key 1) with the target counter bound, enabled where the mode says. */
static void reg_heap(void)
{
	uint64_t flags = info->domain_attr->mr_mode & FI_MR_RMA_EVENT ? FI_RMA_EVENT : 0;
	CHECK_RET(fi_mr_reg(domain, heap, HEAP_SIZE, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, flags,
			    &heap_mr, NULL), 0);
	if (!heap_mr)
		return;
	int ret = fi_mr_bind(heap_mr, &target->fid, FI_REMOTE_WRITE);
	if (ret == -FI_ENOSYS && !serves_sos()) {
		printf(NAME ": PE %d: %s%s%s: MR counters refused (%s): skipped\n", me, prov,
		       strcmp(prov, "rscntr") ? "" : " over ", strcmp(prov, "rscntr") ? "" : getenv("FI_RSCNTR_CORE"),
		       fi_strerror(-ret));
		mr_refused = 1;
		return;
	}
	CHECK_RET(ret, 0);
	if (info->domain_attr->mr_mode & FI_MR_RMA_EVENT)
		CHECK_RET(fi_mr_enable(heap_mr), 0);
	mine.heap_key = info->domain_attr->mr_mode & FI_MR_PROV_KEY ? fi_mr_key(heap_mr) : 1;
	mine.heap_addr = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? (uint64_t) (uintptr_t) heap : 0;
}

static int open_all(void)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	if (!fabric)
		return -1;
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		return -1;
	CHECK_RET(fi_av_open(domain, &av_attr, &av, NULL), 0);
	/* The target endpoint, as SOS's shmem_transport_ofi_target_ep_init. */
	info->ep_attr->tx_ctx_cnt = 0;
	info->caps = FI_RMA | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT;
	info->tx_attr->op_flags = 0;
	info->mode = info->tx_attr->mode = info->rx_attr->mode = 0;
	info->tx_attr->caps = FI_RMA | FI_ATOMIC;
	info->rx_attr->caps = info->caps;
	CHECK_RET(fi_endpoint(domain, info, &tep, NULL), 0);
	if (!tep || !av)
		return -1;
	CHECK_RET(fi_ep_bind(tep, &av->fid, 0), 0);
	struct fi_cq_attr cq_attr = { 0 };
	CHECK_RET(fi_cq_open(domain, &cq_attr, &tcq, NULL), 0);
	if (!tcq)
		return -1;
	CHECK_RET(fi_ep_bind(tep, &tcq->fid, FI_TRANSMIT | FI_RECV), 0);
	CHECK_RET(fi_enable(tep), 0);
	/* The target counter and the MRs (allocate_recv_cntr_mr, ofi_mr_reg_bind). */
	target = cntr();
	if (!target)
		return -1;
	reg_heap();
	if (mr_refused)
		return -1;
	uint64_t flags = info->domain_attr->mr_mode & FI_MR_RMA_EVENT ? FI_RMA_EVENT : 0;
	CHECK_RET(fi_mr_reg(domain, data_seg, sizeof data_seg, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0,
			    flags, &data_mr, NULL), 0);
	if (!heap_mr || !data_mr)
		return -1;
	CHECK_RET(fi_mr_bind(data_mr, &target->fid, FI_REMOTE_WRITE), 0);
	if (info->domain_attr->mr_mode & FI_MR_RMA_EVENT)
		CHECK_RET(fi_mr_enable(data_mr), 0);
	mine.data_key = info->domain_attr->mr_mode & FI_MR_PROV_KEY ? fi_mr_key(data_mr) : 0;
	mine.data_addr = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? (uint64_t) (uintptr_t) data_seg : 0;
	/* The contexts (shmem_transport_ofi_ctx_init, bind_enable_ep_resources). */
	info->caps = FI_RMA | FI_WRITE | FI_READ | FI_ATOMIC | FI_RECV;
	info->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	info->tx_attr->caps = info->caps;
	info->rx_attr->caps = FI_RECV;
	for (int c = 0; c < NCTX; c++) {
		struct ctx *x = &ctxs[c];
		x->put = cntr();
		x->get = cntr();
		struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_CONTEXT };
		CHECK_RET(fi_cq_open(domain, &ca, &x->cq, NULL), 0);
		CHECK_RET(fi_endpoint(domain, info, &x->ep, NULL), 0);
		if (!x->put || !x->get || !x->cq || !x->ep)
			return -1;
		CHECK_RET(fi_ep_bind(x->ep, &x->put->fid, FI_WRITE), 0);
		CHECK_RET(fi_ep_bind(x->ep, &x->get->fid, FI_READ), 0);
		CHECK_RET(fi_ep_bind(x->ep, &x->cq->fid, FI_SELECTIVE_COMPLETION | FI_TRANSMIT | FI_RECV), 0);
		CHECK_RET(fi_ep_bind(x->ep, &av->fid, 0), 0);
		CHECK_RET(fi_enable(x->ep), 0);
	}
	mine.name_len = sizeof mine.name;
	CHECK_RET(fi_getname(&tep->fid, mine.name, &mine.name_len), 0);
	return h_failed ? -1 : 0;
}

/* Publishes this PE's name, keys and addresses; takes the peer's; the AV holds PE 0, then 1. */
static void exchange(void)
{
	put_all(&mine, sizeof mine);
	get_all(&theirs, sizeof theirs);
	const struct pub *by_pe[2];
	by_pe[me] = &mine;
	by_pe[peer] = &theirs;
	for (int pe = 0; pe < 2; pe++)
		CHECK_RET(fi_av_insert(av, by_pe[pe]->name, 1, &addrs[pe], 0, NULL), 1);
}

/* Posts until the provider takes it (FI_RM_ENABLED: -FI_EAGAIN only while it is busy). */
#define RETRY(call)                                                                        \
	({                                                                                 \
		ssize_t _r;                                                                \
		double _t0 = now_ms();                                                     \
		while ((_r = (call)) == -FI_EAGAIN && now_ms() - _t0 < 20000) {            \
			struct fi_cq_entry _e;                                             \
			(void) fi_cq_read(x->cq, &_e, 1);                                  \
			if (manual)                                                        \
				progress_all();                                            \
		}                                                                          \
		CHECK(_r == 0, "%s returned %zd (%s)", #call, _r, fi_strerror((int) -_r)); \
		_r;                                                                        \
	})

static uint64_t heap_at(uint64_t off)
{
	return theirs.heap_addr + off;
}

static void put(struct ctx *x, const void *src, size_t len, uint64_t off)
{
	if (RETRY(fi_write(x->ep, src, len, NULL, addrs[peer], heap_at(off), theirs.heap_key, NULL)) == 0) {
		x->puts++;
		expect_target++;
	}
}

static void get(struct ctx *x, void *dst, size_t len, uint64_t off)
{
	if (RETRY(fi_read(x->ep, dst, len, NULL, addrs[peer], heap_at(off), theirs.heap_key, NULL)) == 0)
		x->gets++;
}

/* shmem_ctx_quiet: both counters reach what the context issued (no error). */
static void quiet(struct ctx *x, const char *what)
{
	CHECK_RET(fi_cntr_wait(x->put, x->puts, -1), 0);
	CHECK_RET(fi_cntr_wait(x->get, x->gets, -1), 0);
	CHECK(fi_cntr_readerr(x->put) == 0 && fi_cntr_readerr(x->get) == 0, "%s: errors on a context's counters",
	      what);
}

/* shmem_wait_until(word == v): between checks, asleep on the target counter. */
static void wait_until(volatile uint64_t *word, uint64_t v)
{
	while (*word != v) {
		uint64_t c = fi_cntr_read(target);
		if (*word == v)
			break;
		int ret = fi_cntr_wait(target, c + 1, -1);
		if (ret) {
			CHECK(ret == 0, "fi_cntr_wait(target, %" PRIu64 ", -1) returned %d", c + 1, ret);
			return;
		}
	}
}

static unsigned char pattern(int pe, uint64_t i, int round)
{
	return (unsigned char) (pe * 131 + i * 7 + round * 13 + 1);
}

static void fill(char *p, size_t len, int pe, int round)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char) pattern(pe, i, round);
}

static int check_fill(const char *p, size_t len, int pe, int round)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char) p[i] != pattern(pe, i, round))
			return 0;
	return 1;
}

static char src_small[NCTX][SMALL], src_sig[SMALL], src_inj[NCTX][8], *src_big, *dst_big;
static char dst_small[NCTX][SMALL];

static void puts_from_every_context(int round)
{
	for (int c = 0; c < NCTX; c++) {
		struct ctx *x = &ctxs[c];
		fill(src_small[c], SMALL, me, round + c);
		put(x, src_small[c], SMALL, OFF_PUT(c));
		fill(src_inj[c], 8, me, round + 100 + c);
		if (RETRY(fi_inject_write(x->ep, src_inj[c], 8, addrs[peer], heap_at(OFF_INJ(c)),
					  theirs.heap_key)) == 0) {
			x->puts++;
			expect_target++;
		}
	}
	for (int c = 0; c < NCTX; c++)
		quiet(&ctxs[c], "puts");
	barrier_counted("puts");
	int ok = 1;
	for (int c = 0; c < NCTX; c++)
		ok &= check_fill(heap + OFF_PUT(c), SMALL, peer, round + c) &&
		      check_fill(heap + OFF_INJ(c), 8, peer, round + 100 + c);
	CHECK(ok, "round %d: the peer's puts are not all in place", round);
}

static void large(int round)
{
	struct ctx *x = &ctxs[0];
	fill(src_big, BIG, me, round);
	put(x, src_big, BIG, OFF_BIG);
	quiet(x, "large put");
	barrier_counted("large put");
	CHECK(check_fill(heap + OFF_BIG, BIG, peer, round), "round %d: the peer's 1 MiB put is not in place", round);
}

static void atomics(void)
{
	/* Every context adds c + 1 to the peer's data word 0. */
	for (int c = 0; c < NCTX; c++) {
		struct ctx *x = &ctxs[c];
		static int64_t one[NCTX];
		one[c] = c + 1;
		if (RETRY(fi_atomic(x->ep, &one[c], 1, NULL, addrs[peer], theirs.data_addr, theirs.data_key,
				    FI_INT64, FI_SUM, NULL)) == 0) {
			x->puts++;
			expect_target++;
		}
	}
	struct ctx *x = &ctxs[0];
	static int64_t add = 5, fetched = -1, cmp = 0, swap = 77, old = -1;
	if (RETRY(fi_fetch_atomic(x->ep, &add, 1, NULL, &fetched, NULL, addrs[peer], heap_at(OFF_FETCH),
				  theirs.heap_key, FI_INT64, FI_SUM, NULL)) == 0) {
		x->gets++;
		expect_target++;
	}
	if (RETRY(fi_compare_atomic(x->ep, &swap, 1, NULL, &cmp, NULL, &old, NULL, addrs[peer], heap_at(OFF_CSWAP),
				    theirs.heap_key, FI_INT64, FI_CSWAP, NULL)) == 0) {
		x->gets++;
		expect_target++;
	}
	/* Gets from every context of what the peer put there in the puts part (round 0). */
	for (int c = 0; c < NCTX; c++)
		get(&ctxs[c], dst_small[c], SMALL, OFF_PUT(c));
	for (int c = 0; c < NCTX; c++)
		quiet(&ctxs[c], "atomics");
	CHECK(fetched == 1000 + peer, "fi_fetch_atomic fetched %" PRId64 ", expected %d", fetched, 1000 + peer);
	CHECK(old == 0, "fi_compare_atomic found %" PRId64 ", expected 0", old);
	int ok = 1;
	for (int c = 0; c < NCTX; c++)
		ok &= check_fill(dst_small[c], SMALL, me, c);
	CHECK(ok, "the gets did not bring back what this PE put");
	barrier_counted("atomics");
	int64_t sum = NCTX * (NCTX + 1) / 2;
	CHECK(data_seg[0] == sum, "the peer's atomics left %" PRId64 " in the data word, expected %" PRId64,
	      data_seg[0], sum);
	int64_t f = *(int64_t *) (heap + OFF_FETCH), s = *(int64_t *) (heap + OFF_CSWAP);
	CHECK(f == 1000 + me + 5, "the peer's fetching add left %" PRId64 ", expected %d", f, 1000 + me + 5);
	CHECK(s == 77, "the peer's compare-and-swap left %" PRId64 ", expected 77", s);
}

static void big_get(void)
{
	struct ctx *x = &ctxs[NCTX - 1];
	memset(dst_big, 0, BIG);
	get(x, dst_big, BIG, OFF_GET_SRC);
	quiet(x, "large get");
	CHECK(check_fill(dst_big, BIG, peer, 55), "the 1 MiB get did not bring the peer's heap");
}

/* Ping-pong of signalled puts: data, fence (quiet), flag; the peer waits on its target
 * counter until the flag, then checks the data. */
static void signals(void)
{
	volatile uint64_t *flag = (volatile uint64_t *) (heap + OFF_FLAG);
	struct ctx *x = &ctxs[1 % NCTX];
	static uint64_t flagval[ROUNDS + 1];
	int ok = 1;
	for (int r = 1; r <= ROUNDS; r++) {
		/* PE 1 waits for PE 0's flag of this round (r), PE 0 for PE 1's of the last one. */
		int seen = me == 1 ? r : r - 1;
		if (seen > 0) {
			wait_until(flag, (uint64_t) seen + (me == 0 ? 1000 : 0));
			ok &= check_fill(heap + OFF_SIG_DATA, SMALL, peer, 200 + seen);
		}
		fill(src_sig, SMALL, me, 200 + r);
		put(x, src_sig, SMALL, OFF_SIG_DATA);
		quiet(x, "fence"); /* shmem_fence without FI_FENCE */
		flagval[r] = (uint64_t) r + (me == 1 ? 1000 : 0);
		put(x, &flagval[r], 8, OFF_FLAG);
		quiet(x, "signal");
	}
	if (me == 0) {
		wait_until(flag, (uint64_t) ROUNDS + 1000);
		ok &= check_fill(heap + OFF_SIG_DATA, SMALL, peer, 200 + ROUNDS);
	}
	CHECK(ok, "a signalled put's data was not in place when its flag was");
	barrier();
}

/* The calling thread's voluntary context switches so far (each time it went to sleep). */
static long sleeps_so_far(void)
{
	FILE *f = fopen("/proc/thread-self/status", "r");
	char line[128];
	long n = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

/* An idle wait_until: PE 1 waits for a flag PE 0 puts 300 ms later. The waiting thread
 * sleeps in fi_cntr_wait and the put wakes it: its CPU time over the wait stays under 10 % of
 * the wait (a waiter that spun would burn all of it), and it went to sleep at most 30 times
 * (a sleep is bounded at 50 ms; a waiter that something woke every millisecond for nothing
 * would sleep hundreds of times); the wait's length is only printed. */
static void idle_wait(void)
{
	volatile uint64_t *flag = (volatile uint64_t *) (heap + OFF_FLAG);
	struct ctx *x = &ctxs[0];
	static uint64_t v = 4242;
	barrier();
	if (me == 0) {
		usleep(300000);
		put(x, &v, 8, OFF_FLAG);
		quiet(x, "idle wait's flag");
	} else {
		long s0 = sleeps_so_far();
		double t0 = now_ms(), c0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
		wait_until(flag, v);
		double wall = now_ms() - t0, cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
		long sleeps = sleeps_so_far() - s0;
		printf(NAME ": PE 1: an idle wait_until of %.0f ms took %.1f ms of its thread's CPU, %ld "
		       "sleeps\n", wall, cpu, sleeps);
		const char *core = getenv("FI_RSCNTR_CORE");
		if (!strcmp(prov, "rscntr") && core && !strcmp(core, "sockets"))
			printf(NAME ": PE 1: (not judged over rscntr(sockets), whose waits on a core counter "
			       "bound to an MR yield)\n");
		else {
			CHECK(cpu < 0.1 * wall, "the waiter of an idle wait_until spun: %.1f ms of CPU in %.0f ms",
			      cpu, wall);
			if (manual)
				printf(NAME ": PE 1: (sleeps not judged with manual progress: the target endpoint is "
				       "enabled before the domain has a counter that waits, so it publishes no "
				       "doorbell and the domain's waits re-check every 1 ms)\n");
			else
				CHECK(sleeps <= 30, "the waiter of an idle wait_until was woken for nothing: %ld "
				      "sleeps in %.0f ms", sleeps, wall);
		}
	}
	barrier();
}

/* A PE's puts and atomics to itself (SOS's teams of one PE, its collectives' own share):
 * SELF_ROUNDS times an 8-byte fi_inject_write and an fi_inject_atomic SUM toward this PE's own
 * heap, each followed by a quiet and a look at the word: after the quiet, the value is in
 * place (the endpoint's op_flags ask for delivery complete). shm counts an inject when it is
 * posted, whatever the flags, and its bytes land when the target endpoint's progress runs:
 * rscntr(shm) runs its domain's progress before such an inject toward itself returns. Judged
 * over sockets (directly and under rscntr) and rscntr(shm); printed with how many were stale,
 * as a known limitation (docs/user-guide.md), over rscntr(tcp;ofi_rxm), whose inject to itself
 * crosses a socket, and over rscntr(shm) with manual progress, whose domain has no doorbell
 * when SOS's order enables the target endpoint (the inject's target is not known to be its
 * own). */
#define SELF_ROUNDS 50
static void self_puts(void)
{
	struct ctx *x = &ctxs[0];
	volatile uint64_t *word = (volatile uint64_t *) (heap + OFF_SELF);
	volatile int64_t *sum = (volatile int64_t *) (heap + OFF_SELF + 8);
	static uint64_t v;
	static int64_t one = 1;
	int stale_put = 0, stale_atomic = 0;
	barrier();
	*sum = 0;
	for (int r = 0; r < SELF_ROUNDS; r++) {
		v = (uint64_t) me * 1000000 + r + 1;
		uint64_t at = mine.heap_addr + OFF_SELF;
		if (RETRY(fi_inject_write(x->ep, &v, 8, addrs[me], at, mine.heap_key)) == 0) {
			x->puts++;
			self_made++;
		}
		quiet(x, "a put to this PE");
		stale_put += *word != v;
		if (RETRY(fi_inject_atomic(x->ep, &one, 1, addrs[me], at + 8, mine.heap_key, FI_INT64, FI_SUM)) == 0) {
			x->puts++;
			self_made++;
		}
		quiet(x, "an atomic to this PE");
		stale_atomic += *sum != r + 1;
	}
	const char *core = getenv("FI_RSCNTR_CORE");
	int judged = !strcmp(prov, "sockets") ||
		     (core && (!strcmp(core, "sockets") || (!strcmp(core, "shm") && !manual)));
	if (!judged) {
		printf(NAME ": PE %d: %d of %d puts and %d of %d atomics to itself not in place after their "
		       "quiet (known limitation over %s%s, not judged)\n", me, stale_put, SELF_ROUNDS,
		       stale_atomic, SELF_ROUNDS, core ? core : prov, manual ? " with manual progress" : "");
	} else {
		CHECK(!stale_put, "%d of %d puts to this PE not in place after their quiet", stale_put,
		      SELF_ROUNDS);
		CHECK(!stale_atomic, "%d of %d atomics to this PE not in place after their quiet",
		      stale_atomic, SELF_ROUNDS);
	}
	barrier();
}

/* Quiets toward a PE that makes no libfabric call (blocked in a barrier, as a PE computing or
 * in PMI): PE 0 puts 8 bytes (fi_write, delivery complete by the endpoint's op_flags) and
 * quiets, QUIET_ROUNDS times, 5 ms apart (the peer's progress idles between). Each quiet
 * completes only when PE 1's automatic progress has answered the put; over rscntr(shm) that
 * progress rings PE 0 when it has (its quiets' time is docs/shmem_bench.md's put latency, never
 * judged here). */
#define QUIET_ROUNDS 20
static void quiets_toward_idle_peer(void)
{
	struct ctx *x = &ctxs[0];
	static uint64_t word[QUIET_ROUNDS];
	barrier();
	if (me == 0) {
		for (int r = 0; r < QUIET_ROUNDS; r++) {
			usleep(5000);
			word[r] = 9000 + r;
			put(x, &word[r], 8, OFF_SIG_DATA);
			quiet(x, "a quiet toward an idle PE");
		}
	}
	barrier();
	if (me == 1)
		CHECK(*(volatile uint64_t *) (heap + OFF_SIG_DATA) == 9000 + QUIET_ROUNDS - 1,
		      "the last of the quiets' puts is not in place: %" PRIu64,
		      *(volatile uint64_t *) (heap + OFF_SIG_DATA));
	barrier();
}

/* shmem_realloc: the heap MR goes and comes back; the counter is bound again. */
static void realloc_heap(void)
{
	barrier(); /* nothing in flight toward this heap */
	CHECK_RET(fi_close(&heap_mr->fid), 0);
	heap_mr = NULL;
	reg_heap();
	barrier();
	put_all(&mine, sizeof mine);
	get_all(&theirs, sizeof theirs);
	puts_from_every_context(300);
	large(301);
}

/* The target counter reaches exactly what the peer made toward this PE, and stays. */
static void final_counts(void)
{
	uint64_t peer_expect = 0;
	put_all(&expect_target, sizeof expect_target);
	get_all(&peer_expect, sizeof peer_expect);
	peer_expect += self_made;
	int ret = fi_cntr_wait(target, peer_expect, 10000);
	CHECK(ret == 0, "the target counter did not reach %" PRIu64 " (%" PRIu64 ", ret %d)", peer_expect,
	      fi_cntr_read(target), ret);
	barrier();
	usleep(100000);
	uint64_t got = fi_cntr_read(target);
	CHECK(got == peer_expect, "the target counter reads %" PRIu64 ", the peer and this PE made %" PRIu64
	      " writes and atomics toward this PE", got, peer_expect);
	CHECK(fi_cntr_readerr(target) == 0, "errors on the target counter");
	for (int c = 0; c < NCTX; c++) {
		struct ctx *x = &ctxs[c];
		CHECK(fi_cntr_read(x->put) == x->puts, "context %d: put counter %" PRIu64 ", issued %" PRIu64, c,
		      fi_cntr_read(x->put), x->puts);
		CHECK(fi_cntr_read(x->get) == x->gets, "context %d: get counter %" PRIu64 ", issued %" PRIu64, c,
		      fi_cntr_read(x->get), x->gets);
	}
	printf(NAME ": PE %d: target counter %" PRIu64 " (the peer's and its own writes and atomics), %d contexts' put and "
	       "get counters exact\n", me, got, NCTX);
}

static void close_all(void)
{
	for (int c = 0; c < NCTX; c++) {
		struct ctx *x = &ctxs[c];
		if (x->ep)
			CHECK_RET(fi_close(&x->ep->fid), 0);
		if (x->cq)
			CHECK_RET(fi_close(&x->cq->fid), 0);
		if (x->put)
			CHECK_RET(fi_close(&x->put->fid), 0);
		if (x->get)
			CHECK_RET(fi_close(&x->get->fid), 0);
	}
	if (tep)
		CHECK_RET(fi_close(&tep->fid), 0);
	if (heap_mr)
		CHECK_RET(fi_close(&heap_mr->fid), 0);
	if (data_mr)
		CHECK_RET(fi_close(&data_mr->fid), 0);
	if (target)
		CHECK_RET(fi_close(&target->fid), 0);
	if (tcq)
		CHECK_RET(fi_close(&tcq->fid), 0);
	if (av)
		CHECK_RET(fi_close(&av->fid), 0);
	if (domain)
		CHECK_RET(fi_close(&domain->fid), 0);
	if (fabric)
		CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
}

/* One PE; its exit code says how it went (0: passed or refused, see the output). */
static int pe_main(void)
{
	alarm(150);
	heap = aligned_alloc(4096, HEAP_SIZE);
	src_big = malloc(BIG);
	dst_big = malloc(BIG);
	memset(heap, 0, HEAP_SIZE);
	fill(heap + OFF_GET_SRC, BIG, me, 55);
	*(int64_t *) (heap + OFF_FETCH) = 1000 + me;
	int ret = getinfo();
	if (ret == -FI_ENODATA) {
		if (strcmp(prov, "rscntr"))
			printf(NAME ": PE %d: %s refuses SOS's hints (-FI_ENODATA)\n", me, prov);
		else if (!core_has_atomics())
			printf(NAME ": PE %d: rscntr over %s: no RDM endpoints with atomics, nothing SOS could "
			       "use: skipped\n", me, getenv("FI_RSCNTR_CORE"));
		else
			CHECK(0, "rscntr over %s refused SOS's hints", getenv("FI_RSCNTR_CORE"));
		return finish(NAME);
	}
	CHECK_RET(ret, 0);
	if (ret)
		return finish(NAME);
	if (me == 0)
		printf(NAME ": %s, fabric %s, mr_mode %#x, progress %d, inject_size %zu\n", prov,
		       info->fabric_attr->name, info->domain_attr->mr_mode, info->domain_attr->data_progress,
		       info->tx_attr->inject_size);
	if (open_all()) {
		close_all();
		return finish(NAME);
	}
	exchange();
	barrier();
	puts_from_every_context(0);
	large(1);
	atomics();
	big_get();
	signals();
	idle_wait();
	quiets_toward_idle_peer();
	self_puts();
	realloc_heap();
	final_counts();
	barrier();
	close_all();
	return finish(NAME);
}

int main(void)
{
	prov = getenv("RSCNTR_TEST_PROV") ? getenv("RSCNTR_TEST_PROV") : "rscntr";
	manual = getenv("SHMEM_LIKE_MANUAL") && !strcmp(getenv("SHMEM_LIKE_MANUAL"), "1");
	const char *core = getenv("FI_RSCNTR_CORE");
	if (!strcmp(prov, "rscntr") && core && !strcmp(core, "none")) {
		printf(NAME ": FI_RSCNTR_CORE=none, no endpoints: skipped\n");
		return 0;
	}
	/* Known limitation: over libfabric 1.17's shm (Debian 12) the fetching atomics both PEs
	 * post toward each other at once are refused with -FI_EAGAIN for as long as one retries
	 * (20 s here); libfabric 1.22's and 2.x's shm complete them. */
	if (!strcmp(prov, "rscntr") && core && !strcmp(core, "shm") && FI_MAJOR(fi_version()) == 1 &&
	    FI_MINOR(fi_version()) < 22) {
		printf(NAME ": rscntr over libfabric %u.%u's shm: fetching atomics toward a busy peer never "
		       "complete (a known limitation): skipped\n", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
		return 0;
	}
	signal(SIGALRM, watchdog);
	int a[2], b[2];
	if (pipe(a) || pipe(b))
		return 2;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return 2;
	/* PE 0 writes to the peer on a and reads b; PE 1 the other way round. */
	int *out = pid == 0 ? b : a, *in = pid == 0 ? a : b;
	me = pid == 0;
	peer = !me;
	close(out[0]);
	close(in[1]);
	to_peer = out[1];
	from_peer = in[0];
	if (pid == 0) {
		int rc = pe_main();
		fflush(NULL);
		_exit(rc);
	}
	int rc0 = pe_main();
	int st = 0;
	int rc1 = waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : 99;
	if (rc1)
		fprintf(stderr, "FAIL " NAME ": PE 1 exited %d\n", rc1);
	return rc0 || rc1;
}
