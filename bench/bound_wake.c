/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Bound counters between two processes: idle-wake latency and counter pingpong through an RDM
 * endpoint whose receive counter (FI_RECV bind, FI_CNTR_EVENTS_COMP) has the chosen wait object.
 *
 *   bound_wake -p <provider> -w unspec|yield|fd [-n samples] [-i pingpong iterations]
 *              [-S pingpong ms] [-P port] [-a addr] [-A sender addr] [-N sender netns]
 *              [-T wait timeout ms] [-D deadline s] [-I idle ms] [-m wake message bytes] [-Q] [-F]
 *
 * The process forks: the parent is the receiver (it measures), the child the sender. Each opens
 * its own fabric, domain, endpoint and counter after the fork; the endpoint names and a
 * per-sample "I am waiting" byte travel over a socketpair. The endpoints bind to <addr>:<port>
 * (receiver) and <addr>:<port+1> (sender) where the provider takes an address.
 * Across hosts (scripts/bench_bound_hosts.sh): -N names a network namespace (a path such as
 * /run/netns/NAME) the sender joins right after the fork, before it opens anything, and -A its
 * address there; the receiver stays where it was started. Both still share this machine's
 * CLOCK_MONOTONIC and the socketpair, so only the provider's traffic crosses the link.
 *
 * 1. warm-up: 20 round trips (connections established, both sides progressing);
 * 2. idle wake, n samples: the receiver reposts its receive, tells the sender it is about to
 *    wait and blocks (UNSPEC, YIELD: fi_cntr_wait(cntr, k, T); FD: fi_trywait + poll() on the
 *    FI_GETWAIT fd, then fi_cntr_read); the sender sleeps a random 1-5 ms after that byte (with
 *    -I: I ms plus a random 0-1 ms), then sends 64 bytes (with -m: that many, 8 to 64; the
 *    first 8 are the time) carrying its CLOCK_MONOTONIC time. Wake latency = the receiver's clock when
 *    the wait returned - the time in the payload (read after the counter fired). The
 *    receiver's CPU (getrusage RUSAGE_SELF, user + system, all its threads) over the phase is
 *    divided by the samples;
 * 3. counter pingpong, i round trips or S ms (default 2000), whichever ends first ("capped=1"),
 *    after 50 more warm-up ones: each side waits on its own receive counter with the same wait
 *    object, then reposts and answers; the parent's last message says it is the last.
 * The sender's transmit completions go to a CQ (FI_WAIT_NONE, read without blocking), the same
 * object with and without rscntr, so the only difference measured is the receive counter.
 * -Q (a quiet sender): the sender's receive counter has no wait object (FI_WAIT_NONE), so nothing
 * of the sender waits (over rscntr(shm): a domain that never waits); in the pingpong it
 * reads that counter, yielding between reads, instead of waiting on it.
 * -F (answers): the idle wake waits for an answer instead of a message. Per sample the
 * receiver posts a fetching atomic (FI_SUM of 1 on a u64 in the sender's registered buffer)
 * and waits on its counter, bound FI_RECV | FI_READ (a fetching atomic completes on FI_READ
 * counters); the sender, told so, idles as above without driving its endpoint, notes its clock
 * and reads its transmit CQ once (FI_WAIT_NONE: the progress that answers), then sends that time
 * over the socketpair. Wake latency = the receiver's clock when the wait returned - that time.
 * No pingpong follows.
 *
 * Every wait is bounded (T ms, default 1000; a wait that times out is tried again, the sample
 * keeps its whole latency); 3 timeouts end a phase, which then reports "noresult". A watchdog
 * thread ends the run with "noresult" when no receive wait has returned for 3 T + 2 s (a
 * provider stuck inside a call) or a phase overruns its budget; the whole run ends by itself
 * after D seconds (default 90). One line per measurement, "key values", easy to parse:
 *   info prov=<hints prov_name> name=<returned prov_name> fabric=<name> wait=<obj>
 *   wake_us <median> <p99> <max> n=<samples> cpu_us=<per wait> wall_s=<phase> timeouts=<k>
 *   pp_us <median> <mean> <p99> n=<round trips> timeouts=<k> [capped=1]   per round trip
 *   unsupported <what>=<ret>(<strerror>)      the provider refuses this wait object
 *   noresult <phase> <why>                    the phase did not finish
 * The program never judges timing; its exit status is 0 when it reported what it could.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include "bench.h"

#define MSG_SIZE 64
#define WARMUP 20
#define PP_WARMUP 50
#define MAX_TIMEOUTS 3
/* -F: where in the registered page the sender's word, the operand and the result are */
#define ANSWER_WORD 2048
#define ANSWER_OPERAND 1024
#define ANSWER_RESULT 1032

struct msg {
	uint64_t ts_ns;
	uint64_t seq;
	uint64_t flags;
	char pad[MSG_SIZE - 24];
};
#define FLAG_LAST 1

static const char *prov = "rscntr", *addr = "127.0.0.1", *wait_name = "unspec";
static const char *sender_addr, *sender_netns;
static int port = 19000, samples = 500, pp_iters = 5000, pp_budget_ms = 2000, wait_ms = 1000,
	   deadline_s = 90, idle_ms = -1, wake_bytes = MSG_SIZE;
static enum fi_wait_obj wait_obj = FI_WAIT_UNSPEC;
static int use_fd;
static int quiet_sender; /* -Q */
static int answers;      /* -F */
static uint64_t peer_word, peer_key; /* -F: the sender's u64, as the receiver addresses it */

static int oob = -1;     /* socketpair end */
static int is_parent;

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_ep *ep;
static struct fid_cq *txcq, *rxcq;
static struct fid_cntr *rxcntr;
static struct fid_mr *mr;
static int cntr_fd = -1;
static fi_addr_t peer;
static struct msg *rxbuf, *txbuf;
static void *rxdesc, *txdesc;
static struct fi_context2 rxctx, txctx;
static uint64_t tx_posted, tx_done, rx_posted;

static void watchdog(const char *phase, unsigned secs, int stall);
static _Atomic unsigned long progress;

static double cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* ---- out-of-band channel: whole records over the socketpair, bounded ------------------------ */

static int oob_send(const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(oob, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

static int oob_recv(void *buf, size_t len, int timeout_ms)
{
	char *p = buf;
	while (len) {
		struct pollfd pfd = { .fd = oob, .events = POLLIN };
		int r = poll(&pfd, 1, timeout_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t n = recv(oob, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t) n;
	}
	return 0;
}

/* ---- libfabric objects ---------------------------------------------------------------------- */

static char setup_err[256];

#define TRY(call, what)                                                                         \
	do {                                                                                    \
		int ret_ = (call);                                                              \
		if (ret_) {                                                                     \
			snprintf(setup_err, sizeof(setup_err), "error %s=%d(%s)", what, ret_,      \
				 fi_strerror(-ret_));                                               \
			return -1;                                                              \
		}                                                                               \
	} while (0)

#define REFUSE(call, what)                                                                      \
	do {                                                                                    \
		int ret_ = (call);                                                              \
		if (ret_) {                                                                     \
			snprintf(setup_err, sizeof(setup_err), "unsupported %s=%d(%s)", what, ret_,\
				 fi_strerror(-ret_));                                               \
			return -1;                                                              \
		}                                                                               \
	} while (0)

static int setup(void)
{
	struct fi_info *hints = fi_allocinfo();
	char service[16];
	int ret;

	hints->fabric_attr->prov_name = strdup(prov);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | (answers ? FI_ATOMIC : 0);
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	snprintf(service, sizeof(service), "%d", port + (is_parent ? 0 : 1));
	const char *node = !is_parent && sender_addr ? sender_addr : addr;
	ret = fi_getinfo(fi_version(), node, service, FI_SOURCE, hints, &info);
	if (ret == -FI_ENODATA) /* a provider that takes no IP address (none of today's) */
		ret = fi_getinfo(fi_version(), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	TRY(ret, "fi_getinfo");

	TRY(fi_fabric(info->fabric_attr, &fabric, NULL), "fi_fabric");
	TRY(fi_domain(fabric, info, &domain, NULL), "fi_domain");

	int quiet = !is_parent && quiet_sender;
	struct fi_cntr_attr ca = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = quiet ? FI_WAIT_NONE : wait_obj };
	REFUSE(fi_cntr_open(domain, &ca, &rxcntr, NULL), "fi_cntr_open");
	if (quiet) {
		use_fd = 0;
	} else if (use_fd) {
		REFUSE(fi_control(&rxcntr->fid, FI_GETWAIT, &cntr_fd), "FI_GETWAIT");
	} else {
		/* a probe: a provider may accept the wait object and then refuse to wait on it */
		ret = fi_cntr_wait(rxcntr, 1, 0);
		if (ret != -FI_ETIMEDOUT && ret != -FI_EAGAIN)
			REFUSE(ret ? ret : -FI_EOTHER, "fi_cntr_wait");
	}

	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE, .size = 64 };
	TRY(fi_cq_open(domain, &cqa, &txcq, NULL), "fi_cq_open(tx)");
	TRY(fi_cq_open(domain, &cqa, &rxcq, NULL), "fi_cq_open(rx)");
	struct fi_av_attr ava = { .type = FI_AV_UNSPEC, .count = 4 };
	TRY(fi_av_open(domain, &ava, &av, NULL), "fi_av_open");
	TRY(fi_endpoint(domain, info, &ep, NULL), "fi_endpoint");
	TRY(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
	TRY(fi_ep_bind(ep, &txcq->fid, FI_TRANSMIT), "fi_ep_bind(txcq)");
	/* receive completions are reported by the counter only, as in fi_rdm_cntr_pingpong */
	TRY(fi_ep_bind(ep, &rxcq->fid, FI_RECV | FI_SELECTIVE_COMPLETION), "fi_ep_bind(rxcq)");
	REFUSE(fi_ep_bind(ep, &rxcntr->fid, FI_RECV | (answers && is_parent ? FI_READ : 0)), "fi_ep_bind(rx counter)");
	TRY(fi_enable(ep), "fi_enable");

	size_t len = 2 * sizeof(struct msg);
	char *buf = aligned_alloc(4096, 4096);
	memset(buf, 0, 4096);
	rxbuf = (struct msg *) buf;
	txbuf = (struct msg *) (buf + sizeof(struct msg));
	if (answers) {
		/* the whole page: messages, the fetch's operand and result, the sender's word */
		uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
		TRY(fi_mr_reg(domain, buf, 4096, access, 0, 0, 0, &mr, NULL), "fi_mr_reg");
		rxdesc = txdesc = fi_mr_desc(mr);
	} else if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		TRY(fi_mr_reg(domain, buf, len, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL), "fi_mr_reg");
		rxdesc = txdesc = fi_mr_desc(mr);
	}
	return 0;
}

static int exchange_names(void)
{
	char name[256];
	size_t len = sizeof(name);
	uint32_t l;
	TRY(fi_getname(&ep->fid, name, &len), "fi_getname");
	l = (uint32_t) len;
	if (oob_send(&l, sizeof(l)) || oob_send(name, len))
		return snprintf(setup_err, sizeof(setup_err), "error oob send"), -1;
	if (oob_recv(&l, sizeof(l), 10000) || l > sizeof(name) || oob_recv(name, l, 10000))
		return snprintf(setup_err, sizeof(setup_err), "error oob recv"), -1;
	if (answers) {
		/* -F: the sender's word (at ANSWER_WORD in its page) and key, as the receiver uses them */
		uint64_t mine[2] = { (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ?
					     (uint64_t) (uintptr_t) ((char *) rxbuf + ANSWER_WORD) : ANSWER_WORD,
				     fi_mr_key(mr) }, theirs[2];
		if (oob_send(mine, sizeof(mine)) || oob_recv(theirs, sizeof(theirs), 10000))
			return snprintf(setup_err, sizeof(setup_err), "error oob keys"), -1;
		peer_word = theirs[0];
		peer_key = theirs[1];
	}
	int n = fi_av_insert(av, name, 1, &peer, 0, NULL);
	if (n != 1) {
		snprintf(setup_err, sizeof(setup_err), "error fi_av_insert=%d", n);
		return -1;
	}
	return 0;
}

/* ---- data path ------------------------------------------------------------------------------ */

static int post_recv(void)
{
	uint64_t give_up = now_ns() + (uint64_t) wait_ms * 1000000ull;
	for (;;) {
		ssize_t r = fi_recv(ep, rxbuf, sizeof(*rxbuf), rxdesc, FI_ADDR_UNSPEC, &rxctx);
		if (r == 0) {
			rx_posted++;
			return 0;
		}
		if (r != -FI_EAGAIN || now_ns() > give_up)
			return (int) r;
		fi_cq_read(rxcq, NULL, 0); /* progress */
	}
}

/* How long a send may wait for room or for its completion: the first send to a peer opens
 * the connection, and over a lossy link (-N) a lost SYN costs TCP 1 s before it retransmits
 * (seen: "warmup send failed" over tcp across the shaped link, 1 run in 120). */
static uint64_t send_limit_ns(void)
{
	return (uint64_t) wait_ms * (MAX_TIMEOUTS + 1) * 1000000ull;
}

/* Reap transmit completions; with block, until every posted send has completed. */
static int reap_tx(int block)
{
	uint64_t give_up = now_ns() + send_limit_ns();
	while (tx_done < tx_posted) {
		struct fi_cq_entry e[8];
		ssize_t r = fi_cq_read(txcq, e, 8);
		if (r > 0) {
			tx_done += (uint64_t) r;
			continue;
		}
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(txcq, &err, 0);
			fprintf(stderr, "send error %d(%s)\n", err.err, fi_strerror(err.err));
			return -1;
		}
		if (r != -FI_EAGAIN)
			return (int) r;
		if (!block)
			return 0;
		if (now_ns() > give_up)
			return -FI_ETIMEDOUT;
		sched_yield();
	}
	return 0;
}

static int post_send_len(uint64_t seq, uint64_t flags, size_t len)
{
	uint64_t give_up = now_ns() + send_limit_ns();
	int ret = reap_tx(1); /* one send in flight at most: txbuf is reused */
	if (ret)
		return ret;
	txbuf->seq = seq;
	txbuf->flags = flags;
	txbuf->ts_ns = now_ns();
	for (;;) {
		ssize_t r = fi_send(ep, txbuf, len, txdesc, peer, &txctx);
		if (r == 0) {
			tx_posted++;
			return 0;
		}
		if (r != -FI_EAGAIN || now_ns() > give_up)
			return (int) r;
		fi_cq_read(txcq, NULL, 0);
		txbuf->ts_ns = now_ns();
	}
}

static int post_send(uint64_t seq, uint64_t flags)
{
	return post_send_len(seq, flags, sizeof(*txbuf));
}

/* Wait until the receive counter reaches k: 0, -FI_ETIMEDOUT, or another error. */
static int wait_rx(uint64_t k)
{
	int ret;
	if (!is_parent && quiet_sender) {
		uint64_t give_up = now_ns() + (uint64_t) wait_ms * 1000000ull;
		ret = 0;
		while (fi_cntr_read(rxcntr) < k && !fi_cntr_readerr(rxcntr)) {
			if (now_ns() >= give_up) {
				ret = -FI_ETIMEDOUT;
				break;
			}
			sched_yield();
		}
	} else if (!use_fd) {
		ret = fi_cntr_wait(rxcntr, k, wait_ms);
	} else {
		uint64_t give_up = now_ns() + (uint64_t) wait_ms * 1000000ull;
		struct fid *f = &rxcntr->fid;
		ret = 0;
		while (fi_cntr_read(rxcntr) < k) {
			if (fi_cntr_readerr(rxcntr)) {
				ret = -FI_EAVAIL;
				break;
			}
			uint64_t t = now_ns();
			if (t >= give_up) {
				ret = -FI_ETIMEDOUT;
				break;
			}
			if (fi_trywait(fabric, &f, 1) == FI_SUCCESS) {
				struct pollfd p = { .fd = cntr_fd, .events = POLLIN };
				poll(&p, 1, (int) ((give_up - t) / 1000000ull) + 1);
			}
		}
	}
	atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
	if (ret == -FI_EAVAIL || (ret == 0 && fi_cntr_readerr(rxcntr))) {
		fprintf(stderr, "receive counter error count %llu\n",
			(unsigned long long) fi_cntr_readerr(rxcntr));
		return -FI_EAVAIL;
	}
	return ret;
}

/* Wait for the receive counter to reach k; a wait that times out is tried again (the message
 * or answer may be late, not lost) up to MAX_TIMEOUTS times in the phase. */
static int next_count(uint64_t k, int *timeouts, const char **why)
{
	for (;;) {
		int ret = wait_rx(k);
		if (ret == 0)
			return 0;
		if (ret != -FI_ETIMEDOUT) {
			*why = "receive counter wait failed";
			return -1;
		}
		if (++*timeouts >= MAX_TIMEOUTS) {
			*why = "receive counter wait timed out 3 times";
			return -1;
		}
	}
}

/* Wait for the next receive (the counter reaching rx_posted). */
static int next_rx(int *timeouts, const char **why)
{
	return next_count(rx_posted, timeouts, why);
}

/* -F: a fetching atomic toward the sender's word; *k is the count its completion brings the
 * counter to (nothing else moves it meanwhile: the sender sends nothing). */
static int post_fetch(uint64_t *k)
{
	uint64_t give_up = now_ns() + send_limit_ns();
	int ret = reap_tx(1);
	if (ret)
		return ret;
	char *page = (char *) rxbuf;
	*(uint64_t *) (page + ANSWER_OPERAND) = 1;
	*k = fi_cntr_read(rxcntr) + 1;
	for (;;) {
		ssize_t r = fi_fetch_atomic(ep, page + ANSWER_OPERAND, 1, txdesc, page + ANSWER_RESULT, txdesc,
					    peer, peer_word, peer_key, FI_UINT64, FI_SUM, &txctx);
		if (r == 0) {
			tx_posted++;
			return 0;
		}
		if (r != -FI_EAGAIN || now_ns() > give_up)
			return (int) r;
		fi_cq_read(txcq, NULL, 0);
	}
}

/* The parent's side of the round trips: up to iters, or until budget_ns has passed; the last
 * message it sends carries FLAG_LAST. Returns the round trips done; lat may be NULL. */
static int pp_initiator(int iters, uint64_t budget_ns, double *lat, int *timeouts, const char **why)
{
	uint64_t end = now_ns() + budget_ns;
	int done = 0;
	*why = NULL;
	for (int i = 0; i < iters; i++) {
		uint64_t t0 = now_ns();
		int last = i == iters - 1 || t0 >= end;
		if (post_send(tx_posted + 1, last ? FLAG_LAST : 0)) {
			*why = "send failed";
			break;
		}
		if (next_rx(timeouts, why))
			break;
		if (post_recv()) {
			*why = "fi_recv failed";
			break;
		}
		if (lat)
			lat[i] = (double) (now_ns() - t0) / 1000.0;
		done++;
		if (last)
			break;
	}
	reap_tx(1);
	return done;
}

/* The child's side: answer every message until one carries FLAG_LAST. */
static int pp_responder(int *timeouts, const char **why)
{
	*why = NULL;
	for (;;) {
		if (next_rx(timeouts, why))
			return -1;
		uint64_t flags = rxbuf->flags;
		if (post_recv()) {
			*why = "fi_recv failed";
			return -1;
		}
		if (post_send(tx_posted + 1, 0)) {
			*why = "send failed";
			return -1;
		}
		if (flags & FLAG_LAST)
			break;
	}
	return reap_tx(1);
}

/* ---- the two roles -------------------------------------------------------------------------- */

enum { CMD_WAITING = 'w', CMD_DONE = 'd', CMD_PP = 'p' };

/* The sender's side; when it stops early it says why on stderr (the receiver only sees its
 * messages stop coming). */
static void sender(void)
{
	unsigned seed = (unsigned) getpid() ^ (unsigned) now_ns();
	const char *why;
	int timeouts = 0, ret;
	if (pp_responder(&timeouts, &why)) {
		fprintf(stderr, "sender: warm-up stopped: %s\n", why ? why : "");
		return;
	}
	for (int n = 0;; n++) {
		char c;
		if (oob_recv(&c, 1, (wait_ms + 1000) * (MAX_TIMEOUTS + 1)))
			return;
		if (c == CMD_DONE)
			break;
		if ((ret = reap_tx(1))) {
			fprintf(stderr, "sender: wake sample %d: reaping the last send: %d\n", n, ret);
			return;
		}
		long idle_ns = idle_ms < 0 ? 1000000L + (long) (rand_r(&seed) % 4000001)
					   : idle_ms * 1000000L + (long) (rand_r(&seed) % 1000001);
		struct timespec idle = { idle_ns / 1000000000L, idle_ns % 1000000000L };
		nanosleep(&idle, NULL);
		if (answers) {
			/* the progress that answers the receiver's fetch, and when it began */
			uint64_t t = now_ns();
			struct fi_cq_entry e[8];
			fi_cq_read(txcq, e, 8);
			if (oob_send(&t, sizeof(t)))
				return;
			continue;
		}
		if ((ret = post_send_len(tx_posted + 1, 0, (size_t) wake_bytes))) {
			fprintf(stderr, "sender: wake sample %d: send failed: %d(%s)\n", n, ret, fi_strerror(-ret));
			return;
		}
	}
	if (answers)
		return;
	/* pingpong: the parent's CMD_PP byte says it is ready */
	char c;
	if (oob_recv(&c, 1, (wait_ms + 1000) * (MAX_TIMEOUTS + 1)) || c != CMD_PP)
		return;
	timeouts = 0;
	if (pp_responder(&timeouts, &why) || pp_responder(&timeouts, &why))
		fprintf(stderr, "sender: pingpong stopped: %s\n", why ? why : "");
}

static void receiver(void)
{
	const char *why;
	int timeouts = 0;
	watchdog("warmup", 20, 1);
	if (pp_initiator(WARMUP, 10000000000ull, NULL, &timeouts, &why) != WARMUP) {
		printf("noresult warmup %s\n", why ? why : "");
		return;
	}
	double *lat = calloc(samples > pp_iters ? samples : pp_iters, sizeof(double));
	int n = 0;
	timeouts = 0;
	why = NULL;
	/* 1-5 ms (or -I ms) of idling per sample, and room for slow wakes */
	watchdog("wake", 10 + (unsigned) (samples * (idle_ms < 0 ? 5 : idle_ms + 2) / 125), 1);
	double c0 = cpu_us();
	uint64_t w0 = now_ns();
	while (n < samples) {
		uint64_t k = 0;
		if (answers && post_fetch(&k)) {
			why = "fi_fetch_atomic failed";
			break;
		}
		char c = CMD_WAITING;
		if (oob_send(&c, 1)) {
			why = "sender gone";
			break;
		}
		if (answers) {
			uint64_t t0;
			if (next_count(k, &timeouts, &why))
				break;
			uint64_t t1 = now_ns();
			if (oob_recv(&t0, sizeof(t0), 10000)) {
				why = "sender gone";
				break;
			}
			lat[n++] = (double) (t1 - t0) / 1000.0;
			continue;
		}
		if (next_rx(&timeouts, &why))
			break;
		uint64_t t1 = now_ns();
		lat[n++] = (double) (t1 - rxbuf->ts_ns) / 1000.0;
		if (post_recv()) {
			why = "fi_recv failed";
			break;
		}
	}
	double wall = (double) (now_ns() - w0) / 1e9, cpu = cpu_us() - c0;
	char c = CMD_DONE;
	oob_send(&c, 1);
	if (why) {
		printf("noresult wake %s after %d of %d samples\n", why, n, samples);
		free(lat);
		return;
	}
	qsort(lat, n, sizeof(double), cmp_double);
	printf("wake_us %.2f %.2f %.2f n=%d cpu_us=%.2f wall_s=%.2f timeouts=%d\n", lat[n / 2],
	       lat[(int) (n * 0.99)], lat[n - 1], n, cpu / n, wall, timeouts);
	if (answers) {
		free(lat);
		reap_tx(1);
		return;
	}

	watchdog("pingpong", 10 + (unsigned) (pp_budget_ms / 1000), 1);
	reap_tx(1);
	c = CMD_PP;
	oob_send(&c, 1);
	timeouts = 0;
	if (pp_initiator(PP_WARMUP, 10000000000ull, NULL, &timeouts, &why) != PP_WARMUP) {
		printf("noresult pingpong warm-up: %s\n", why ? why : "time budget spent");
		free(lat);
		return;
	}
	uint64_t p0 = now_ns();
	int done = pp_initiator(pp_iters, (uint64_t) pp_budget_ms * 1000000ull, lat, &timeouts, &why);
	double total = (double) (now_ns() - p0) / 1000.0;
	if (why || done < 1) {
		printf("noresult pingpong %s after %d round trips\n", why ? why : "", done);
		free(lat);
		return;
	}
	double rt_mean = total / done;
	qsort(lat, done, sizeof(double), cmp_double);
	printf("pp_us %.2f %.2f %.2f n=%d timeouts=%d%s\n", lat[done / 2], rt_mean,
	       lat[(int) (done * 0.99)], done, timeouts, done < pp_iters ? " capped=1" : "");
	free(lat);
}

static void teardown(void)
{
	struct fi_cq_entry e;
	if (rxcq && fi_cq_read(rxcq, &e, 1) > 0) /* FI_SELECTIVE_COMPLETION should keep it empty */
		fprintf(stderr, "%s: receive completions reached the CQ\n", is_parent ? "receiver" : "sender");
	if (ep)
		fi_close(&ep->fid);
	if (mr)
		fi_close(&mr->fid);
	if (av)
		fi_close(&av->fid);
	if (rxcntr)
		fi_close(&rxcntr->fid);
	if (txcq)
		fi_close(&txcq->fid);
	if (rxcq)
		fi_close(&rxcq->fid);
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	if (info)
		fi_freeinfo(info);
}

/* Watchdog: a call into the provider that never returns (seen: the sockets core's progress
 * thread blocked writing its FD counter's wait fd, with the counter's lock held) ends the run
 * with a "noresult <phase>" line, and the parent kills the child. A thread of the parent's
 * checks every second that the receive waits keep returning (stalled: none returned for
 * MAX_TIMEOUTS waits + 2 s) and that the phase ends within its budget; it sends no signal to
 * the waiting thread, and the data path pays one relaxed increment per wait for it. */
static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
static char wd_phase[32] = "setup";
static unsigned wd_secs = 30;
static int wd_stall;
static uint64_t run_end_ns, wd_end_ns;
static pid_t child_pid;

static void *watchdog_thread(void *arg)
{
	(void) arg;
	unsigned long seen = 0;
	int still = 0, limit = MAX_TIMEOUTS * wait_ms / 1000 + 2;
	for (;;) {
		struct timespec one = { 1, 0 };
		nanosleep(&one, NULL);
		char msg[160];
		int n = 0;
		pthread_mutex_lock(&wd_lock);
		unsigned long p = atomic_load_explicit(&progress, memory_order_relaxed);
		if (p != seen || !wd_stall) {
			seen = p;
			still = 0;
		} else if (++still >= limit) {
			n = snprintf(msg, sizeof(msg), "noresult %s stuck: no receive wait returned for %d s\n",
				     wd_phase, limit);
		}
		if (!n && now_ns() >= wd_end_ns)
			n = snprintf(msg, sizeof(msg), "noresult %s not finished within %u s\n", wd_phase,
				     wd_secs);
		pthread_mutex_unlock(&wd_lock);
		if (n > 0) {
			(void) !write(1, msg, strlen(msg));
			if (child_pid > 0) {
				kill(child_pid, SIGKILL);
				waitpid(child_pid, NULL, 0);
			}
			_exit(3);
		}
	}
	return NULL;
}

/* The phase's name and budget; stall: whether the receive waits must keep returning. */
static void watchdog(const char *phase, unsigned secs, int stall)
{
	uint64_t t = now_ns(), left = run_end_ns > t ? (run_end_ns - t) / 1000000000ull : 0;
	if (secs > left)
		secs = (unsigned) left;
	if (secs < 1)
		secs = 1;
	pthread_mutex_lock(&wd_lock);
	snprintf(wd_phase, sizeof(wd_phase), "%s", phase);
	wd_secs = secs;
	wd_end_ns = t + (uint64_t) secs * 1000000000ull;
	wd_stall = stall;
	pthread_mutex_unlock(&wd_lock);
}

static void on_alarm(int sig) /* the child's last resort */
{
	(void) sig;
	_exit(3);
}

int main(int argc, char **argv)
{
	int opt;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "p:w:n:i:S:P:a:A:N:T:D:I:m:QF")) != -1) {
		switch (opt) {
		case 'p': prov = optarg; break;
		case 'w': wait_name = optarg; break;
		case 'n': samples = atoi(optarg); break;
		case 'i': pp_iters = atoi(optarg); break;
		case 'S': pp_budget_ms = atoi(optarg); break;
		case 'P': port = atoi(optarg); break;
		case 'a': addr = optarg; break;
		case 'A': sender_addr = optarg; break;
		case 'N': sender_netns = optarg; break;
		case 'T': wait_ms = atoi(optarg); break;
		case 'D': deadline_s = atoi(optarg); break;
		case 'I': idle_ms = atoi(optarg); break;
		case 'm': wake_bytes = atoi(optarg); break;
		case 'Q': quiet_sender = 1; break;
		case 'F': answers = 1; break;
		default:
			fprintf(stderr, "usage: %s -p provider -w unspec|yield|fd [-n samples] "
				"[-i pingpong iterations] [-S pingpong ms] [-P port] [-a addr] [-A sender addr] "
				"[-N sender netns] [-T wait ms] [-D deadline s] [-I idle ms] [-m wake bytes] [-Q]\n",
				argv[0]);
			return 2;
		}
	}
	if (!strcmp(wait_name, "unspec"))
		wait_obj = FI_WAIT_UNSPEC;
	else if (!strcmp(wait_name, "yield"))
		wait_obj = FI_WAIT_YIELD;
	else if (!strcmp(wait_name, "fd"))
		wait_obj = FI_WAIT_FD, use_fd = 1;
	else {
		fprintf(stderr, "wait object: unspec, yield or fd\n");
		return 2;
	}
	if (samples < 1 || pp_iters < 1 || wait_ms < 1) {
		fprintf(stderr, "-n, -i and -T must be positive\n");
		return 2;
	}
	if (idle_ms > 10000 || wake_bytes < 8 || wake_bytes > MSG_SIZE) {
		fprintf(stderr, "-I: at most 10000 ms; -m: 8 to %d bytes\n", MSG_SIZE);
		return 2;
	}

	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	signal(SIGALRM, on_alarm);
	run_end_ns = now_ns() + (uint64_t) deadline_s * 1000000000ull;
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	is_parent = child != 0;
	oob = sv[is_parent ? 0 : 1];
	close(sv[is_parent ? 1 : 0]);
	child_pid = child;
	if (!is_parent) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm((unsigned) deadline_s + 5); /* the parent's watchdogs end the run before */
	}
	watchdog("setup", 30, 0);
	if (is_parent) {
		pthread_t wd;
		pthread_create(&wd, NULL, watchdog_thread, NULL);
	}

	/* the sender moves to its host before libfabric sees anything of it */
	int moved = 0;
	if (!is_parent && sender_netns) {
		int fd = open(sender_netns, O_RDONLY | O_CLOEXEC);
		moved = fd >= 0 && setns(fd, CLONE_NEWNET) == 0 ? 0 : -1;
		if (moved)
			snprintf(setup_err, sizeof(setup_err), "error cannot join the network namespace %s: %s",
				 sender_netns, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	/* both set up, then agree: either side's refusal ends the run, reported by the parent */
	int ok = moved == 0 && setup() == 0 && exchange_names() == 0;
	char mine = ok ? 'y' : 'n', theirs = 'n';
	oob_send(&mine, 1);
	if (oob_recv(&theirs, 1, 30000))
		theirs = 'n';
	if (is_parent) {
		if (info)
			printf("info prov=%s name=%s fabric=%s wait=%s\n", prov,
			       info->fabric_attr->prov_name, info->fabric_attr->name, wait_name);
		if (!ok)
			printf("%s\n", setup_err);
		else if (theirs != 'y')
			printf("noresult setup the sender failed to set up\n");
	} else if (!ok) {
		fprintf(stderr, "sender: %s\n", setup_err);
	}
	if (ok && theirs == 'y') {
		if (post_recv()) {
			if (is_parent)
				printf("noresult setup fi_recv failed\n");
		} else if (is_parent) {
			receiver();
		} else {
			sender();
		}
	}
	/* a last byte each way so neither closes its endpoint under the other's feet */
	char bye = 'x';
	oob_send(&bye, 1);
	while (oob_recv(&bye, 1, 2000) == 0 && bye != 'x')
		;
	teardown();
	if (is_parent) {
		int st;
		watchdog("teardown", 10, 0);
		waitpid(child, &st, 0);
	}
	return 0;
}
