/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * OpenSHMEM-shaped measurements: N processes (PEs, forked) set up as Sandia OpenSHMEM's default
 * build does (its hints: FI_RMA | FI_ATOMIC | FI_RMA_EVENT, automatic progress, mr_mode 0,
 * FI_DELIVERY_COMPLETE; a target endpoint whose heap MR has a target counter bound with
 * FI_REMOTE_WRITE; a context endpoint with a put counter bound FI_WRITE and a get counter bound
 * FI_READ, all FI_WAIT_UNSPEC), as prov_test/shmem_like.c does for correctness. shmem_put is
 * fi_write, shmem_get fi_read, shmem_quiet fi_cntr_wait(put or get, issued, -1), and
 * shmem_wait_until a read of the target counter, a look at the word, and fi_cntr_wait(target,
 * count + 1, -1) until it holds the value.
 *
 *   shmem_bench -p <prov> -m put|get|bw|wake|ring [-s size] [-n iterations] [-N pes] [-w poll]
 *
 *   put   PE 0: shmem_put of size bytes to PE 1, then shmem_quiet; "put_us <size> <median>"
 *   get   PE 0: shmem_get of size bytes from PE 1, then shmem_quiet; "get_us <size> <median>"
 *   bw    PE 0: windows of 64 puts, a quiet after each; "bw_mbs <size> <MB/s>"
 *   wake  PE 1 in shmem_wait_until on the target counter; PE 0, every 2 ms, puts to it the time
 *         it posts: "wake_us <median> <p90>" (post to PE 1's return), "wake_cpu_us <median>"
 *         (PE 1's thread CPU per wait, 2 ms of sleep included) and "idle_cpu_pct <pct>" (PE 1's
 *         thread CPU over the whole wake run, against its wall time)
 *   ring  N PEs pass a token n times round a ring, each waiting for its flag (shmem_wait_until,
 *         or with -w 1 a loop that reads the word and drives progress, as SOS's hard-polling
 *         build does) and putting the next PE's: "ring_ms <ms>" (PE 0's wall time for the n
 *         rounds)
 *
 * Every PE then prints "pe_cpu_ms <pe> <ms>", its process's CPU over the measurement.
 *
 * A quiet sleeps in fi_cntr_wait, as SOS's does; the PE it targets waits in a barrier that
 * sleeps (a futex), so the automatic progress asked for serves it. Timing, never a test.
 */
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include "bench.h"

#define MAXPE 8
#define MAXSZ (1 << 20)
#define HEAP (2 * MAXSZ)
#define WINDOW 64
#define OFF_FLAG 0 /* the word waited on, then the data */
#define OFF_DATA 64

struct pub {
	char name[64];
	size_t name_len;
	uint64_t key, addr;
};

/* Shared by the PEs (an anonymous shared mapping made before the fork). */
struct shared {
	atomic_int arrived;
	struct pub pubs[MAXPE];
};

static const char *prov;
static int me, npes;
static struct shared *sh;
static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_ep *tep, *cep;
static struct fid_cq *tcq, *ccq;
static struct fid_cntr *target, *put_cntr, *get_cntr;
static struct fid_mr *heap_mr;
static char *heap, *src;
static fi_addr_t addrs[MAXPE];
static uint64_t puts_issued, gets_issued;

#define TRY(call)                                                                            \
	do {                                                                                 \
		int _r = (int) (call);                                                       \
		if (_r) {                                                                    \
			fprintf(stderr, "shmem_bench: PE %d: %s: %d (%s)\n", me, #call, _r, \
				fi_strerror(-_r));                                          \
			exit(2);                                                             \
		}                                                                            \
	} while (0)

/* A barrier between measurements that sleeps (a futex on the shared count): a PE waiting here
 * takes no CPU from the others' progress. */
static void barrier(void)
{
	static int gen;
	gen++;
	int now = atomic_fetch_add(&sh->arrived, 1) + 1;
	if (now == gen * npes) {
		syscall(SYS_futex, &sh->arrived, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
		return;
	}
	while ((now = atomic_load(&sh->arrived)) < gen * npes)
		syscall(SYS_futex, &sh->arrived, FUTEX_WAIT, now, NULL, NULL, 0);
}

static struct fid_cntr *cntr(void)
{
	struct fi_cntr_attr a = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cntr *c;
	TRY(fi_cntr_open(domain, &a, &c, NULL));
	return c;
}

static void setup(void)
{
	struct fi_info *h = fi_allocinfo();
	h->fabric_attr->prov_name = strdup(prov);
	h->caps = FI_RMA | FI_ATOMIC | FI_RMA_EVENT;
	h->addr_format = FI_FORMAT_UNSPEC;
	h->domain_attr->data_progress = FI_PROGRESS_AUTO;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->domain_attr->mr_mode = 0;
	h->domain_attr->mr_key_size = 1;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->ep_attr->type = FI_EP_RDM;
	h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	h->tx_attr->inject_size = 8;
	TRY(fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, h, &info));
	fi_freeinfo(h);
	while (info && strcmp(info->fabric_attr->prov_name, prov))
		info = info->next; /* a core's name also brings the layerings over it */
	if (!info) {
		fprintf(stderr, "shmem_bench: no %s info for Sandia OpenSHMEM's hints\n", prov);
		exit(2);
	}
	TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
	TRY(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr aa = { .type = FI_AV_TABLE, .count = MAXPE };
	TRY(fi_av_open(domain, &aa, &av, NULL));

	info->caps = FI_RMA | FI_ATOMIC | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RMA_EVENT;
	info->tx_attr->op_flags = 0;
	info->tx_attr->caps = FI_RMA | FI_ATOMIC;
	info->rx_attr->caps = info->caps;
	TRY(fi_endpoint(domain, info, &tep, NULL));
	TRY(fi_ep_bind(tep, &av->fid, 0));
	struct fi_cq_attr ta = { 0 };
	TRY(fi_cq_open(domain, &ta, &tcq, NULL));
	TRY(fi_ep_bind(tep, &tcq->fid, FI_TRANSMIT | FI_RECV));
	TRY(fi_enable(tep));
	target = cntr();
	uint64_t mflags = info->domain_attr->mr_mode & FI_MR_RMA_EVENT ? FI_RMA_EVENT : 0;
	TRY(fi_mr_reg(domain, heap, HEAP, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1, mflags, &heap_mr, NULL));
	TRY(fi_mr_bind(heap_mr, &target->fid, FI_REMOTE_WRITE));
	if (info->domain_attr->mr_mode & FI_MR_RMA_EVENT)
		TRY(fi_mr_enable(heap_mr));

	info->caps = FI_RMA | FI_WRITE | FI_READ | FI_ATOMIC | FI_RECV;
	info->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	info->tx_attr->caps = info->caps;
	info->rx_attr->caps = FI_RECV;
	put_cntr = cntr();
	get_cntr = cntr();
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_CONTEXT };
	TRY(fi_cq_open(domain, &ca, &ccq, NULL));
	TRY(fi_endpoint(domain, info, &cep, NULL));
	TRY(fi_ep_bind(cep, &put_cntr->fid, FI_WRITE));
	TRY(fi_ep_bind(cep, &get_cntr->fid, FI_READ));
	TRY(fi_ep_bind(cep, &ccq->fid, FI_SELECTIVE_COMPLETION | FI_TRANSMIT | FI_RECV));
	TRY(fi_ep_bind(cep, &av->fid, 0));
	TRY(fi_enable(cep));

	struct pub *p = &sh->pubs[me];
	p->name_len = sizeof p->name;
	TRY(fi_getname(&tep->fid, p->name, &p->name_len));
	p->key = info->domain_attr->mr_mode & FI_MR_PROV_KEY ? fi_mr_key(heap_mr) : 1;
	p->addr = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? (uint64_t) (uintptr_t) heap : 0;
	barrier();
	for (int i = 0; i < npes; i++)
		if (fi_av_insert(av, sh->pubs[i].name, 1, &addrs[i], 0, NULL) != 1) {
			fprintf(stderr, "shmem_bench: PE %d: fi_av_insert of PE %d failed\n", me, i);
			exit(2);
		}
	barrier();
}

/* shmem_put (fi_write) or shmem_get (fi_read) of len bytes at off in pe's heap, counted for
 * the quiet. */
static void rma(int is_get, int pe, void *buf, size_t len, uint64_t off)
{
	uint64_t raddr = sh->pubs[pe].addr + off, key = sh->pubs[pe].key;
	struct fid_cntr *c = is_get ? get_cntr : put_cntr;
	ssize_t r;
	while ((r = is_get ? fi_read(cep, buf, len, NULL, addrs[pe], raddr, key, NULL)
			   : fi_write(cep, buf, len, NULL, addrs[pe], raddr, key, NULL)) == -FI_EAGAIN)
		(void) fi_cntr_read(c);
	TRY(r);
	*(is_get ? &gets_issued : &puts_issued) += 1;
}

static void put(int pe, void *buf, size_t len, uint64_t off)
{
	rma(0, pe, buf, len, off);
}

static void quiet(void)
{
	TRY(fi_cntr_wait(put_cntr, puts_issued, -1));
	TRY(fi_cntr_wait(get_cntr, gets_issued, -1));
}

/* shmem_wait_until(word == v): asleep on the target counter between looks, or (poll) a loop
 * that looks and drives progress. */
static void wait_until(volatile uint64_t *word, uint64_t v, int poll)
{
	while (*word != v) {
		uint64_t c = fi_cntr_read(target);
		if (*word == v || poll)
			continue;
		TRY(fi_cntr_wait(target, c + 1, -1));
	}
}

static double cpu_us(int who)
{
	struct timespec ts;
	clock_gettime(who, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double median(double *v, int n)
{
	qsort(v, (size_t) n, sizeof *v, cmp_double);
	return v[n / 2];
}

static void lat(const char *mode, size_t size, int n)
{
	double *t = calloc((size_t) n, sizeof *t);
	barrier();
	if (me == 0) {
		for (int i = -n / 10; i < n; i++) {
			uint64_t t0 = now_ns();
			rma(!strcmp(mode, "get"), 1, src, size, OFF_DATA);
			quiet();
			if (i >= 0)
				t[i] = (now_ns() - t0) / 1e3;
		}
		printf("%s_us %zu %.2f\n", mode, size, median(t, n));
	}
	barrier();
	free(t);
}

static void bw(size_t size, int n)
{
	barrier();
	if (me == 0) {
		uint64_t t0 = 0;
		for (int i = -1; i < n; i++) {
			if (i == 0)
				t0 = now_ns();
			for (int k = 0; k < WINDOW; k++)
				put(1, src, size, OFF_DATA);
			quiet();
		}
		double s = (now_ns() - t0) / 1e9;
		printf("bw_mbs %zu %.1f\n", size, (double) size * WINDOW * n / s / 1e6);
	}
	barrier();
}

static void wake(int n)
{
	volatile uint64_t *stamp = (volatile uint64_t *) (heap + OFF_DATA);
	double *t = calloc((size_t) n, sizeof *t), *c = calloc((size_t) n, sizeof *c);
	barrier();
	if (me == 0) {
		for (int i = 1; i <= n; i++) {
			usleep(2000);
			uint64_t t0 = now_ns();
			put(1, &t0, sizeof t0, OFF_DATA);
			quiet();
		}
	} else if (me == 1) {
		double w0 = now_ns() / 1e3, c0 = cpu_us(CLOCK_THREAD_CPUTIME_ID);
		for (int i = 1; i <= n; i++) {
			double ci = cpu_us(CLOCK_THREAD_CPUTIME_ID);
			TRY(fi_cntr_wait(target, (uint64_t) i, -1));
			uint64_t t1 = now_ns();
			t[i - 1] = (t1 - *stamp) / 1e3;
			c[i - 1] = cpu_us(CLOCK_THREAD_CPUTIME_ID) - ci;
		}
		double wall = now_ns() / 1e3 - w0, cpu = cpu_us(CLOCK_THREAD_CPUTIME_ID) - c0;
		double m = median(t, n), p90 = t[n * 9 / 10];
		printf("wake_us %.1f %.1f\n", m, p90);
		printf("wake_cpu_us %.1f\n", median(c, n));
		printf("idle_cpu_pct %.2f\n", 100.0 * cpu / wall);
	}
	barrier();
	free(t);
	free(c);
}

static void ring(int n, int poll)
{
	volatile uint64_t *flag = (volatile uint64_t *) (heap + OFF_FLAG);
	static uint64_t val[1 << 16];
	int next = (me + 1) % npes;
	barrier();
	double w0 = now_ns() / 1e6;
	for (int r = 1; r <= n; r++) {
		if (me != 0 || r > 1)
			wait_until(flag, (uint64_t) (me == 0 ? r - 1 : r), poll);
		val[r % (1 << 16)] = (uint64_t) r;
		put(next, &val[r % (1 << 16)], 8, OFF_FLAG);
		quiet();
	}
	if (me == 0) {
		wait_until(flag, (uint64_t) n, poll);
		printf("ring_ms %.1f\n", now_ns() / 1e6 - w0);
	}
	barrier();
}

int main(int argc, char **argv)
{
	const char *mode = "put";
	size_t size = 8;
	int n = 1000, poll = 0, opt;
	npes = 2;
	prov = "rscntr";
	while ((opt = getopt(argc, argv, "p:m:s:n:N:w:")) != -1) {
		switch (opt) {
		case 'p': prov = optarg; break;
		case 'm': mode = optarg; break;
		case 's': size = strtoul(optarg, NULL, 0); break;
		case 'n': n = atoi(optarg); break;
		case 'N': npes = atoi(optarg); break;
		case 'w': poll = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: shmem_bench -p prov -m put|get|bw|wake|ring [-s size] [-n iterations] "
					"[-N pes] [-w poll]\n");
			return 2;
		}
	}
	if (npes < 2 || npes > MAXPE || size > MAXSZ || n < 1 || n >= (1 << 16)) {
		fprintf(stderr, "shmem_bench: 2 to %d PEs, sizes up to %d, 1 to 65535 iterations\n", MAXPE, MAXSZ);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 2;
	pid_t kids[MAXPE] = { 0 };
	for (me = 1; me < npes; me++)
		if ((kids[me] = fork()) == 0)
			break;
	if (me == npes)
		me = 0;
	alarm(300); /* a hang ends the run */
	heap = aligned_alloc(4096, HEAP);
	src = aligned_alloc(4096, MAXSZ);
	memset(heap, 0, HEAP);
	memset(src, 'a' + me, MAXSZ);
	setup();
	double c0 = cpu_us(CLOCK_PROCESS_CPUTIME_ID);
	if (!strcmp(mode, "put") || !strcmp(mode, "get"))
		lat(mode, size, n);
	else if (!strcmp(mode, "bw"))
		bw(size, n);
	else if (!strcmp(mode, "wake"))
		wake(n);
	else if (!strcmp(mode, "ring"))
		ring(n, poll);
	double mine_cpu = cpu_us(CLOCK_PROCESS_CPUTIME_ID) - c0;
	fi_close(&cep->fid);
	fi_close(&tep->fid);
	fi_close(&heap_mr->fid);
	fi_close(&put_cntr->fid);
	fi_close(&get_cntr->fid);
	fi_close(&target->fid);
	fi_close(&ccq->fid);
	fi_close(&tcq->fid);
	fi_close(&av->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	if (me != 0) {
		printf("pe_cpu_ms %d %.1f\n", me, mine_cpu / 1e3);
		return 0;
	}
	int status, bad = 0;
	for (int i = 1; i < npes; i++)
		if (waitpid(kids[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			bad = 1;
	printf("pe_cpu_ms 0 %.1f\n", mine_cpu / 1e3);
	return bad ? 1 : 0;
}
