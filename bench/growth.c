/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Cost growth: how the cost of counters grows with their number, with the number of
 * threads waiting in one domain, and with the number of endpoints bound to one counter. The
 * same program runs with -p <core> (the core's own counters) and -p rscntr (FI_RSCNTR_CORE).
 *
 *   growth -p <provider> -m objects   -N <counters> [-b] [-a addr]
 *   growth -p <provider> -m waiters   -N <threads>  [-s samples] [-W window ms] [-a addr]
 *   growth -p <provider> -m endpoints -N <endpoints> [-s samples] [-W window ms] [-a addr]
 *
 * objects: one process, one domain. N counters (FI_WAIT_UNSPEC) opened, then closed; with -b
 *   each bound to an endpoint, two per endpoint (counter 2i FI_SEND, 2i+1 FI_RECV, on endpoint
 *   i: one endpoint takes one counter per flag, so thousands of counters need thousands of
 *   endpoints, and 4096 rxm endpoints plus their counters' fds pass the 20000-fd limit), the
 *   N/2 endpoints opened (not enabled) before the counters and closed after the counters'
 *   memory is measured, before the counters are closed (a bound counter cannot close). The open/bind/close phases are timed
 *   per round, max(5, 1024/N) rounds after a warm-up round of one counter (which pays
 *   first-use costs), the median round reported (first_open_us: the first round's open, cold
 *   memory); memory on the first round: resident set (/proc/self/statm) and heap in use (mallinfo2)
 *   after the counters minus before them, per counter. Prints
 *     objects n=<N> bound=<0|1> rounds=<r> open_us <per counter> bind_us <..> close_us <..>
 *             rss_b <bytes per counter> heap_b <bytes per counter> ep_rss_b <per endpoint>
 *             fds <fds per counter>
 * waiters: the process forks; the parent (receiver) opens one domain with N endpoints, each
 *   with a counter of its own bound FI_RECV, and N threads, each looping in
 *   fi_cntr_wait(its counter, next, 60 s); the child (sender) one endpoint that sends to them.
 *   Per sample: all threads have been waiting for a settle time (40 ms); the receiver snapshots
 *   its CPU (getrusage RUSAGE_SELF, every thread) and every waiter's voluntary context switches
 *   (/proc/self/task/<tid>/status), tells the sender to send one 64-byte message (carrying its
 *   CLOCK_MONOTONIC time) to endpoint (sample mod N), and sleeps W ms (default 25); then
 *   snapshots again. The wake latency is the target waiter's clock on return minus the time in
 *   the payload; "woke" counts the waiters (other than the target) whose context switches
 *   moved, i.e. that were woken from sleep at least once in the window, "wakes" the switches
 *   of all waiters. Then an idle window of the same length with no message gives what the
 *   waiters cost without a completion (periodic re-checks). Prints
 *     wake n=<N> samples=<s> lat_us <median> <p90> <max> cpu_us <median per window>
 *          idle_cpu_us <median> woke <median others woken> idle_woke <..> wakes <median> idle_wakes <..>
 * endpoints: as waiters, but N endpoints bound FI_RECV to ONE counter and one waiting thread;
 *   the message goes to endpoint (sample mod N). Afterwards (no waiter) the cost of
 *   fi_cntr_read on that counter: median of 5 batches of 500 reads; then the spinning reader:
 *   per sample (2s of them, after SPIN_SETTLE_MS idle) the receiver's main thread tells the
 *   sender to send one message to a pseudo-random endpoint (the same sequence in every run:
 *   where the message lands among the endpoints is not tied to the sample before) and spins on
 *   fi_cntr_read (nothing else drives progress) until the counter moves; the latency is its
 *   clock then minus the time in the payload. Prints the wake line and
 *     read_ns n=<N> <per read>
 *     spin n=<N> samples=<s> lat_us <median> <p90> <max> reads <median reads per sample>
 * -a none: no address in fi_getinfo (shm: an address names its region, shared by every endpoint).
 * -R: the sender's CQ has a wait object (FI_WAIT_UNSPEC; it still only polls it): over
 *   rscntr(shm) its domain is then one that waits, whose endpoints ring peers that sleep (the
 *   doorbell); without, a sleeping rscntr(shm) waiter re-checks on its bounded schedule.
 * Other lines: "error <what>" (setup failed), "noresult <why>". The program never judges.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include "bench.h"

#define MSG_SIZE 64
#define SETTLE_MS 40
/* A wait's timeout: longer than any run's samples, so that no waiter wakes on its own inside a
 * measured window (with 2 s, 64 waiters idle for a sample each 64 samples timed out about once
 * per 25 ms window: a wake that is not the completion's, counted in its CPU and woken columns).
 * The count of waits that timed out is printed all the same. */
#define WAIT_MS 60000
#define SPIN_SETTLE_MS 5

static const char *prov = "rscntr", *addr = "127.0.0.1", *mode = "waiters";
static int n = 1, bound, samples = 30, window_ms = 25;

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;

static double cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

static void sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (long) (ms % 1000) * 1000000L };
	while (nanosleep(&t, &t) && errno == EINTR)
		;
}

#define TRY(call, what)                                                                         \
	do {                                                                                    \
		int ret_ = (int) (call);                                                        \
		if (ret_) {                                                                     \
			printf("error %s=%d(%s)\n", what, ret_, fi_strerror(-ret_));               \
			return -1;                                                              \
		}                                                                               \
	} while (0)

static int open_domain(void)
{
	struct fi_info *hints = fi_allocinfo();
	int ret;
	hints->fabric_attr->prov_name = strdup(prov);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	/* port 0: every endpoint takes a port of its own */
	if (strcmp(addr, "none"))
		ret = fi_getinfo(fi_version(), addr, "0", FI_SOURCE, hints, &info);
	else
		ret = -FI_ENODATA;
	if (ret == -FI_ENODATA)
		ret = fi_getinfo(fi_version(), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	TRY(ret, "fi_getinfo");
	TRY(fi_fabric(info->fabric_attr, &fabric, NULL), "fi_fabric");
	TRY(fi_domain(fabric, info, &domain, NULL), "fi_domain");
	return 0;
}

/* ---- objects -------------------------------------------------------------------------------- */

static long rss_bytes(void)
{
	long size, res;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f || fscanf(f, "%ld %ld", &size, &res) != 2)
		res = 0;
	if (f)
		fclose(f);
	return res * sysconf(_SC_PAGESIZE);
}

static long fd_count(void)
{
	long k = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		k++;
	closedir(d);
	return k;
}

static long heap_bytes(void)
{
	struct mallinfo2 m = mallinfo2();
	return (long) (m.uordblks + m.hblkhd);
}

/* One round of k counters (and k endpoints if bound): times into the sums; memory if asked. */
static int objects_round(int k, struct fid_ep **eps, struct fid_cntr **cs, double *t_open,
			 double *t_bind, double *t_close, long *rss, long *heap, long *ep_rss, long *fds)
{
	struct fi_cntr_attr ca = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	long r0 = rss_bytes();
	int ne = (k + 1) / 2; /* two counters per endpoint: FI_SEND, FI_RECV */
	if (bound)
		for (int i = 0; i < ne; i++)
			TRY(fi_endpoint(domain, info, &eps[i], NULL), "fi_endpoint");
	long r1 = rss_bytes(), h1 = heap_bytes(), f1 = fd_count();
	uint64_t t0 = now_ns();
	for (int i = 0; i < k; i++) {
		int ret = fi_cntr_open(domain, &ca, &cs[i], NULL);
		if (ret) {
			printf("error fi_cntr_open=%d(%s) at counter %d (%ld fds open)\n", ret,
			       fi_strerror(-ret), i + 1, fd_count());
			return -1;
		}
	}
	uint64_t t1 = now_ns();
	if (bound)
		for (int i = 0; i < k; i++)
			TRY(fi_ep_bind(eps[i / 2], &cs[i]->fid, i % 2 ? FI_RECV : FI_SEND), "fi_ep_bind(cntr)");
	uint64_t t2 = now_ns();
	long r2 = rss_bytes(), h2 = heap_bytes(), f2 = fd_count();
	if (rss) {
		*rss = r2 - r1;
		*heap = h2 - h1;
		*ep_rss = ne ? (r1 - r0) / ne : 0;
		*fds = f2 - f1;
	}
	if (bound)
		for (int i = 0; i < ne; i++)
			TRY(fi_close(&eps[i]->fid), "fi_close(ep)");
	uint64_t t3 = now_ns();
	for (int i = 0; i < k; i++)
		TRY(fi_close(&cs[i]->fid), "fi_close(cntr)");
	uint64_t t4 = now_ns();
	*t_open = (double) (t1 - t0) / 1e3 / k;
	*t_bind = (double) (t2 - t1) / 1e3 / k;
	*t_close = (double) (t4 - t3) / 1e3 / k;
	return 0;
}

static double median3(double *v, int k)
{
	qsort(v, (size_t) k, sizeof(double), cmp_double);
	return v[k / 2];
}

static int objects(void)
{
	struct fid_ep **eps = calloc((size_t) n, sizeof(*eps));
	struct fid_cntr **cs = calloc((size_t) n, sizeof(*cs));
	long rss = 0, heap = 0, ep_rss = 0, fds = 0;
	int rounds = 1024 / n < 5 ? 5 : 1024 / n;
	double *o = calloc((size_t) rounds, sizeof(double)), *b = calloc((size_t) rounds, sizeof(double)),
	       *c = calloc((size_t) rounds, sizeof(double)), x, y, z;
	if (open_domain())
		return -1;
	if (objects_round(1, eps, cs, &x, &y, &z, NULL, NULL, NULL, NULL)) /* warm-up */
		return -1;
	for (int r = 0; r < rounds; r++)
		if (objects_round(n, eps, cs, &o[r], &b[r], &c[r], r ? NULL : &rss, &heap, &ep_rss, &fds))
			return -1;
	double first = o[0];
	printf("objects n=%d bound=%d rounds=%d open_us %.3f bind_us %.3f close_us %.3f rss_b %.0f heap_b %.0f ep_rss_b %.0f fds %.2f first_open_us %.3f\n",
	       n, bound, rounds, median3(o, rounds), median3(b, rounds), median3(c, rounds),
	       (double) rss / n, (double) heap / n, (double) ep_rss, (double) fds / n, first);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	return 0;
}

/* ---- waiters and endpoints: the receiver ----------------------------------------------------- */

struct waiter {
	pthread_t thread;
	struct fid_cntr *cntr;
	_Atomic pid_t tid;
	_Atomic uint64_t returns, timeouts, last_ns, value;
	_Atomic int waiting;
};

static struct fid_ep **eps;
static struct fid_cq **cqs;
static struct fid_av *av;
static struct fid_cntr **cntrs; /* one per waiter */
static struct waiter *ws;
static int nw, nep;             /* waiters, endpoints */
static int one_cntr;            /* endpoints mode: every endpoint on one counter */
static char *rxbufs;            /* nep * per_ep messages */
static int per_ep;
static struct fid_mr *rxmr;
static struct fi_context2 *rxctx;
static atomic_int stop;
static int oob = -1;

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	uint64_t next = 1;
	w->tid = (pid_t) syscall(SYS_gettid);
	while (!atomic_load(&stop)) {
		w->waiting = 1;
		int ret = fi_cntr_wait(w->cntr, next, WAIT_MS);
		w->waiting = 0;
		if (ret == 0) {
			w->last_ns = now_ns();
			w->value = fi_cntr_read(w->cntr);
			w->returns++;
			next = w->value + 1;
		} else if (ret == -FI_ETIMEDOUT) {
			w->timeouts++;
		} else {
			fprintf(stderr, "fi_cntr_wait=%d(%s)\n", ret, fi_strerror(-ret));
			sleep_ms(10);
		}
	}
	return NULL;
}

static long vcsw(pid_t tid)
{
	char path[64], line[128];
	long v = -1;
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int) tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

static int oob_send(const void *buf, size_t len)
{
	return send(oob, buf, len, MSG_NOSIGNAL) == (ssize_t) len ? 0 : -1;
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
		ssize_t k = recv(oob, p, len, 0);
		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t) k;
	}
	return 0;
}

static int receiver_setup(void)
{
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE, .size = 64 };
	struct fi_av_attr ava = { .type = FI_AV_UNSPEC, .count = 4 };
	struct fi_cntr_attr ca = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	if (open_domain())
		return -1;
	eps = calloc((size_t) nep, sizeof(*eps));
	cqs = calloc((size_t) nep, sizeof(*cqs));
	cntrs = calloc((size_t) nw, sizeof(*cntrs));
	/* the warm-up message, the samples, one spare (and in endpoints mode room for all the
	 * spinning reader's samples on any one endpoint) */
	per_ep = samples / nep + 3 + (one_cntr ? 2 * samples : 0);
	rxbufs = aligned_alloc(4096, ((size_t) nep * per_ep * MSG_SIZE + 4095) / 4096 * 4096);
	memset(rxbufs, 0, (size_t) nep * per_ep * MSG_SIZE);
	rxctx = calloc((size_t) nep * per_ep, sizeof(*rxctx));
	TRY(fi_av_open(domain, &ava, &av, NULL), "fi_av_open");
	for (int i = 0; i < nw; i++)
		TRY(fi_cntr_open(domain, &ca, &cntrs[i], NULL), "fi_cntr_open");
	void *desc = NULL;
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		TRY(fi_mr_reg(domain, rxbufs, (size_t) nep * per_ep * MSG_SIZE, FI_RECV, 0, 0, 0, &rxmr,
			      NULL), "fi_mr_reg");
		desc = fi_mr_desc(rxmr);
	}
	for (int i = 0; i < nep; i++) {
		TRY(fi_cq_open(domain, &cqa, &cqs[i], NULL), "fi_cq_open");
		TRY(fi_endpoint(domain, info, &eps[i], NULL), "fi_endpoint");
		TRY(fi_ep_bind(eps[i], &av->fid, 0), "fi_ep_bind(av)");
		TRY(fi_ep_bind(eps[i], &cqs[i]->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION),
		    "fi_ep_bind(cq)");
		TRY(fi_ep_bind(eps[i], &cntrs[one_cntr ? 0 : i]->fid, FI_RECV), "fi_ep_bind(cntr)");
		int ret = fi_enable(eps[i]);
		if (ret) {
			printf("error fi_enable=%d(%s) at endpoint %d\n", ret, fi_strerror(-ret), i + 1);
			return -1;
		}
		for (int j = 0; j < per_ep; j++) {
			size_t slot = (size_t) i * per_ep + j;
			TRY(fi_recv(eps[i], rxbufs + slot * MSG_SIZE, MSG_SIZE, desc, FI_ADDR_UNSPEC,
				    &rxctx[slot]), "fi_recv");
		}
	}
	/* the names, to the sender */
	uint32_t cnt = (uint32_t) nep;
	if (oob_send(&cnt, sizeof(cnt)))
		return printf("error oob\n"), -1;
	for (int i = 0; i < nep; i++) {
		char name[256];
		size_t len = sizeof(name);
		TRY(fi_getname(&eps[i]->fid, name, &len), "fi_getname");
		uint32_t l = (uint32_t) len;
		if (oob_send(&l, sizeof(l)) || oob_send(name, len))
			return printf("error oob\n"), -1;
	}
	return 0;
}

static int median_cmp_long(const void *a, const void *b)
{
	long x = *(const long *) a, y = *(const long *) b;
	return x < y ? -1 : x > y;
}

/* target: the endpoint the sample's message goes to; its waiter index */
static int waiter_of(int ep)
{
	return one_cntr ? 0 : ep;
}

static int all_waiting(void)
{
	for (int i = 0; i < nw; i++)
		if (!ws[i].waiting)
			return 0;
	return 1;
}

static int send_cmd(char c, uint32_t target)
{
	char rec[5];
	rec[0] = c;
	memcpy(rec + 1, &target, 4);
	return oob_send(rec, 5);
}

/* Waits until waiter w has returned at least `want` times (bounded). */
static int await_returns(int w, uint64_t want, int ms)
{
	uint64_t end = now_ns() + (uint64_t) ms * 1000000ull;
	while (ws[w].returns < want) {
		if (now_ns() > end)
			return -1;
		sleep_ms(1);
	}
	return 0;
}

/* The spinning reader (endpoints mode, after the waiter has left): see the top comment. The
 * samples' messages land in each endpoint's receive slots after the wake samples'. */
static int spin_reader(void)
{
	int spins = 2 * samples;
	double *lat = calloc((size_t) spins, sizeof(double));
	double *reads = calloc((size_t) spins, sizeof(double));
	int *used = calloc((size_t) nep, sizeof(int)); /* receive slots used per endpoint */
	for (int e = 0; e < nep; e++) /* the warm-up message and the wake samples' */
		used[e] = 1 + samples / nep + (e < samples % nep);
	uint32_t rnd = 12345;
	for (int s = 0; s < spins; s++) {
		rnd = rnd * 1103515245u + 12345u;
		int target_ep = (int) ((rnd >> 8) % (uint32_t) nep);
		if (used[target_ep] >= per_ep - 1) /* keep one spare */
			target_ep = s % nep;
		size_t slot = (size_t) target_ep * per_ep + (size_t) used[target_ep]++;
		sleep_ms(SPIN_SETTLE_MS);
		uint64_t v0 = fi_cntr_read(cntrs[0]), v, k = 0;
		if (send_cmd('s', (uint32_t) target_ep))
			return printf("noresult sender gone\n"), -1;
		uint64_t give_up = now_ns() + 5000000000ull;
		do {
			v = fi_cntr_read(cntrs[0]);
			k++;
		} while (v == v0 && (k & 1023 || now_ns() < give_up));
		uint64_t seen = now_ns();
		if (v == v0)
			return printf("noresult spin sample %d: the read never saw the message\n", s), -1;
		uint64_t ts;
		memcpy(&ts, rxbufs + slot * MSG_SIZE, sizeof(ts));
		lat[s] = ts ? (double) (seen - ts) / 1e3 : -1;
		reads[s] = (double) k;
	}
	qsort(lat, (size_t) spins, sizeof(double), cmp_double);
	qsort(reads, (size_t) spins, sizeof(double), cmp_double);
	printf("spin n=%d samples=%d lat_us %.1f %.1f %.1f reads %.0f\n", n, spins, lat[spins / 2],
	       lat[(int) (spins * 0.9)], lat[spins - 1], reads[spins / 2]);
	return 0;
}

static int receiver(void)
{
	if (receiver_setup())
		return -1;
	ws = calloc((size_t) nw, sizeof(*ws));
	for (int i = 0; i < nw; i++) {
		ws[i].cntr = cntrs[i];
		pthread_create(&ws[i].thread, NULL, waiter_main, &ws[i]);
	}
	/* warm-up: one message to every endpoint (connections, first completions) */
	char ready;
	if (oob_recv(&ready, 1, 30000))
		return printf("noresult sender not ready\n"), -1;
	if (send_cmd('w', 0))
		return printf("noresult sender gone\n"), -1;
	for (int i = 0; i < nw; i++)
		if (await_returns(i, 1, 20000))
			return printf("noresult warm-up: waiter %d never returned\n", i), -1;
	if (one_cntr) { /* one counter: until its waiter has seen all nep warm-up messages */
		uint64_t end = now_ns() + 20000000000ull;
		while (ws[0].value < (uint64_t) nep && now_ns() < end)
			sleep_ms(1);
		if (ws[0].value < (uint64_t) nep)
			return printf("noresult warm-up: %llu of %d messages\n",
				      (unsigned long long) ws[0].value, nep), -1;
	}
	double *lat = calloc((size_t) samples, sizeof(double));
	long *cpu = calloc((size_t) samples, sizeof(long)), *icpu = calloc((size_t) samples, sizeof(long));
	long *woke = calloc((size_t) samples, sizeof(long)), *iwoke = calloc((size_t) samples, sizeof(long));
	long *wakes = calloc((size_t) samples, sizeof(long)), *iwakes = calloc((size_t) samples, sizeof(long));
	long *before = calloc((size_t) nw, sizeof(long)), *after = calloc((size_t) nw, sizeof(long));
	for (int s = 0; s < samples; s++) {
		int target_ep = s % nep, target = waiter_of(target_ep);
		uint64_t want = ws[target].returns + 1;
		for (int idle = 0; idle < 2; idle++) {
			sleep_ms(SETTLE_MS);
			for (int k = 0; k < 100 && !all_waiting(); k++)
				sleep_ms(1);
			for (int i = 0; i < nw; i++)
				before[i] = vcsw(ws[i].tid);
			double c0 = cpu_us();
			if (!idle && send_cmd('s', (uint32_t) target_ep))
				return printf("noresult sender gone\n"), -1;
			sleep_ms(window_ms);
			double c1 = cpu_us();
			for (int i = 0; i < nw; i++)
				after[i] = vcsw(ws[i].tid);
			long others = 0, all = 0;
			for (int i = 0; i < nw; i++) {
				all += after[i] - before[i];
				if ((idle || i != target) && after[i] != before[i])
					others++;
			}
			if (idle) {
				icpu[s] = (long) (c1 - c0);
				iwoke[s] = others;
				iwakes[s] = all;
			} else {
				cpu[s] = (long) (c1 - c0);
				woke[s] = others;
				wakes[s] = all;
				if (await_returns(target, want, 5000))
					return printf("noresult sample %d: the waiter never returned\n", s), -1;
				/* the payload's time, from the slot the message landed in */
				size_t slot = (size_t) target_ep * per_ep + 1 + (size_t) (s / nep);
				uint64_t ts;
				memcpy(&ts, rxbufs + slot * MSG_SIZE, sizeof(ts));
				lat[s] = ts ? (double) (ws[target].last_ns - ts) / 1e3 : -1;
			}
		}
	}
	qsort(lat, (size_t) samples, sizeof(double), cmp_double);
	qsort(cpu, (size_t) samples, sizeof(long), median_cmp_long);
	qsort(icpu, (size_t) samples, sizeof(long), median_cmp_long);
	qsort(woke, (size_t) samples, sizeof(long), median_cmp_long);
	qsort(iwoke, (size_t) samples, sizeof(long), median_cmp_long);
	qsort(wakes, (size_t) samples, sizeof(long), median_cmp_long);
	qsort(iwakes, (size_t) samples, sizeof(long), median_cmp_long);
	uint64_t tmo = 0;
	for (int i = 0; i < nw; i++)
		tmo += ws[i].timeouts;
	printf("wake mode=%s n=%d samples=%d lat_us %.1f %.1f %.1f cpu_us %ld idle_cpu_us %ld woke %ld idle_woke %ld wakes %ld idle_wakes %ld window_ms %d timeouts %llu\n",
	       mode, n, samples, lat[samples / 2], lat[(int) (samples * 0.9)], lat[samples - 1],
	       cpu[samples / 2], icpu[samples / 2], woke[samples / 2], iwoke[samples / 2],
	       wakes[samples / 2], iwakes[samples / 2], window_ms, (unsigned long long) tmo);
	/* stop the waiters: each counter's own add interrupts its wait */
	atomic_store(&stop, 1);
	for (int i = 0; i < nw; i++)
		fi_cntr_add(cntrs[i], 1);
	for (int i = 0; i < nw; i++)
		pthread_join(ws[i].thread, NULL);
	if (one_cntr) {
		double batch[5];
		for (int b = 0; b < 5; b++) {
			volatile uint64_t sink = 0;
			uint64_t t0 = now_ns();
			for (int i = 0; i < 500; i++)
				sink += fi_cntr_read(cntrs[0]);
			batch[b] = (double) (now_ns() - t0) / 500;
			(void) sink;
		}
		qsort(batch, 5, sizeof(double), cmp_double);
		printf("read_ns n=%d %.0f\n", n, batch[2]);
		if (spin_reader())
			return -1;
	}
	send_cmd('q', 0);
	return 0;
}

/* ---- the sender ------------------------------------------------------------------------------ */

static int sender_waits; /* -R */

static int sender(void)
{
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_mr *mr = NULL;
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT,
				  .wait_obj = sender_waits ? FI_WAIT_UNSPEC : FI_WAIT_NONE, .size = 64 };
	struct fi_av_attr ava = { .type = FI_AV_UNSPEC, .count = (size_t) n }; /* shm: at most 256 */
	if (open_domain())
		return -1;
	TRY(fi_av_open(domain, &ava, &av, NULL), "fi_av_open");
	TRY(fi_cq_open(domain, &cqa, &cq, NULL), "fi_cq_open");
	TRY(fi_endpoint(domain, info, &ep, NULL), "fi_endpoint");
	TRY(fi_ep_bind(ep, &av->fid, 0), "fi_ep_bind(av)");
	TRY(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
	TRY(fi_enable(ep), "fi_enable");
	char *buf = aligned_alloc(4096, 4096);
	memset(buf, 0, 4096);
	void *desc = NULL;
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		TRY(fi_mr_reg(domain, buf, 4096, FI_SEND, 0, 0, 0, &mr, NULL), "fi_mr_reg");
		desc = fi_mr_desc(mr);
	}
	uint32_t cnt;
	if (oob_recv(&cnt, sizeof(cnt), 30000))
		return -1;
	fi_addr_t *peers = calloc(cnt, sizeof(*peers));
	for (uint32_t i = 0; i < cnt; i++) {
		char name[256];
		uint32_t l;
		if (oob_recv(&l, sizeof(l), 10000) || l > sizeof(name) || oob_recv(name, l, 10000))
			return -1;
		if (fi_av_insert(av, name, 1, &peers[i], 0, NULL) != 1)
			return fprintf(stderr, "sender: fi_av_insert failed\n"), -1;
	}
	char ok = 'y';
	oob_send(&ok, 1);
	struct fi_context2 ctx;
	uint64_t posted = 0, done = 0;
	for (;;) {
		char rec[5];
		/* progress while idle: the receiver's side of connections needs answers */
		while (oob_recv(rec, 5, 10) != 0) {
			struct fi_cq_entry e[8];
			ssize_t r = fi_cq_read(cq, e, 8);
			if (r > 0)
				done += (uint64_t) r;
			struct pollfd p = { .fd = oob, .events = POLLIN };
			if (poll(&p, 1, 0) < 0 || getppid() == 1)
				return -1;
		}
		uint32_t target;
		memcpy(&target, rec + 1, 4);
		if (rec[0] == 'q')
			break;
		uint32_t from = rec[0] == 'w' ? 0 : target, to = rec[0] == 'w' ? cnt : target + 1;
		for (uint32_t t = from; t < to; t++) {
			uint64_t give_up = now_ns() + 5000000000ull;
			for (;;) { /* one send in flight: the buffer is reused */
				while (done < posted) {
					struct fi_cq_entry e[8];
					ssize_t r = fi_cq_read(cq, e, 8);
					if (r > 0)
						done += (uint64_t) r;
					else if (r == -FI_EAVAIL) {
						struct fi_cq_err_entry err = { 0 };
						fi_cq_readerr(cq, &err, 0);
						fprintf(stderr, "sender: send error %d\n", err.err);
						return -1;
					} else if (now_ns() > give_up)
						return -1;
				}
				uint64_t ts = now_ns();
				memcpy(buf, &ts, sizeof(ts));
				ssize_t r = fi_send(ep, buf, MSG_SIZE, desc, peers[t], &ctx);
				if (r == 0) {
					posted++;
					break;
				}
				if (r != -FI_EAGAIN || now_ns() > give_up)
					return fprintf(stderr, "sender: fi_send=%zd\n", r), -1;
				fi_cq_read(cq, NULL, 0);
			}
		}
	}
	while (done < posted) {
		struct fi_cq_entry e[8];
		ssize_t r = fi_cq_read(cq, e, 8);
		if (r > 0)
			done += (uint64_t) r;
		else if (r != -FI_EAGAIN)
			break;
	}
	return 0;
}

static void on_alarm(int sig)
{
	(void) sig;
	static const char m[] = "noresult deadline\n";
	(void) !write(1, m, sizeof(m) - 1);
	_exit(3);
}

int main(int argc, char **argv)
{
	int opt, deadline = 100;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "p:m:N:bs:W:a:D:R")) != -1) {
		switch (opt) {
		case 'p': prov = optarg; break;
		case 'm': mode = optarg; break;
		case 'N': n = atoi(optarg); break;
		case 'b': bound = 1; break;
		case 's': samples = atoi(optarg); break;
		case 'W': window_ms = atoi(optarg); break;
		case 'a': addr = optarg; break;
		case 'D': deadline = atoi(optarg); break;
		case 'R': sender_waits = 1; break;
		default:
			fprintf(stderr, "usage: %s -p prov -m objects|waiters|endpoints -N n [-b] [-s samples] [-W ms] [-a addr] [-D s] [-R]\n",
				argv[0]);
			return 2;
		}
	}
	if (n < 1 || samples < 1) {
		fprintf(stderr, "-N and -s must be positive\n");
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm((unsigned) deadline);
	if (!strcmp(mode, "objects"))
		return objects() ? 1 : 0;
	if (!strcmp(mode, "waiters"))
		nw = nep = n;
	else if (!strcmp(mode, "endpoints"))
		nw = 1, nep = n, one_cntr = 1;
	else
		return fprintf(stderr, "mode: objects, waiters or endpoints\n"), 2;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return perror("socketpair"), 1;
	pid_t child = fork();
	if (child < 0)
		return perror("fork"), 1;
	oob = sv[child ? 0 : 1];
	close(sv[child ? 1 : 0]);
	if (!child) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int r = sender();
		_exit(r ? 1 : 0);
	}
	int r = receiver();
	int st;
	if (r) {
		if (waitpid(child, &st, WNOHANG) == child)
			printf("sender exited: %s %d\n", WIFSIGNALED(st) ? "signal" : "status",
			       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		else
			kill(child, SIGKILL);
	}
	waitpid(child, &st, 0);
	/* the waiters may still sit in the provider after an error: leave without tearing down */
	_exit(0);
}
