/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Counter micro-benchmarks through the public libfabric API, for any provider:
 *   cntr_bench -p <provider> [-n iterations] [-w wakes] [-t max_threads]
 * Prints one line per measurement, "key value unit", easy to parse:
 *   op_ns read 2.1            ns per fi_cntr_read (median of 5 batches)
 *   wake_us unspec 1.8 12.0 40.1   median p99 max of add-in-one-thread -> wait-returns-in-another
 *   wake unsupported fd <reason>
 *   add_mops 8 55.3           aggregate fi_cntr_add rate with 8 threads, millions/s
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include "bench.h"

static struct fid_fabric *fabric;
static struct fid_domain *domain;

static struct fid_cntr *open_cntr(enum fi_wait_obj w, int *ret)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = w };
	struct fid_cntr *c = NULL;
	*ret = fi_cntr_open(domain, &attr, &c, NULL);
	return *ret ? NULL : c;
}

/* ns per op: median of 5 batches of n calls */
static void op_costs(long n)
{
	int ret;
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC, &ret);
	if (!c) {
		printf("op unsupported all fi_cntr_open=%d\n", ret);
		return;
	}
	const char *names[] = { "read", "readerr", "add", "set", "wait0" };
	for (int op = 0; op < 5; op++) {
		double batch[5];
		for (int b = 0; b < 5; b++) {
			volatile uint64_t sink = 0;
			fi_cntr_set(c, 0);
			uint64_t t0 = now_ns();
			switch (op) {
			case 0: for (long i = 0; i < n; i++) sink += fi_cntr_read(c); break;
			case 1: for (long i = 0; i < n; i++) sink += fi_cntr_readerr(c); break;
			case 2: for (long i = 0; i < n; i++) fi_cntr_add(c, 1); break;
			case 3: for (long i = 0; i < n; i++) fi_cntr_set(c, (uint64_t) i); break;
			case 4: for (long i = 0; i < n; i++) sink += fi_cntr_wait(c, 0, 0); break;
			}
			batch[b] = (double) (now_ns() - t0) / n;
			(void) sink;
		}
		qsort(batch, 5, sizeof(batch[0]), cmp_double);
		printf("op_ns %s %.2f\n", names[op], batch[2]);
	}
	fi_close(&c->fid);
}

/* wake latency: the waiter blocks (fi_cntr_wait, or poll() on the fd after fi_trywait); the
 * adder stamps the time and adds; the waiter stamps when it returns. */
struct wake {
	struct fid_cntr *c;
	int fd, use_fd, n;
	atomic_int ready;
	atomic_int stop; /* set by the waiter when waits stop waking: the provider can't do this */
	_Atomic uint64_t t_add;
	double *lat;
	int errors;
};

static void *waiter(void *arg)
{
	struct wake *w = arg;
	for (int i = 1; i <= w->n; i++) {
		atomic_store(&w->ready, i);
		if (w->use_fd) {
			uint64_t give_up = now_ns() + 5000000000ull;
			while (fi_cntr_read(w->c) < (uint64_t) i) {
				if (now_ns() > give_up) {
					w->errors = 3;
					w->n = i;
					atomic_store(&w->stop, 1);
					atomic_store(&w->ready, w->n + 1);
					return NULL;
				}
				struct fid *f = &w->c->fid;
				if (fi_trywait(fabric, &f, 1) == FI_SUCCESS) {
					struct pollfd p = { .fd = w->fd, .events = POLLIN };
					poll(&p, 1, 5000);
				}
			}
		} else if (fi_cntr_wait(w->c, i, 5000)) {
			if (++w->errors >= 3) {
				w->n = i; /* report what was measured up to here */
				atomic_store(&w->stop, 1);
				atomic_store(&w->ready, w->n + 1);
				return NULL;
			}
		}
		uint64_t t1 = now_ns();
		w->lat[i - 1] = (double) (t1 - atomic_load(&w->t_add)) / 1000.0;
	}
	return NULL;
}

static void wake_latency(const char *name, enum fi_wait_obj wobj, int use_fd, int n)
{
	int ret;
	struct wake w = { .n = n, .use_fd = use_fd, .fd = -1 };
	w.c = open_cntr(wobj, &ret);
	if (!w.c) {
		printf("wake unsupported %s fi_cntr_open=%d(%s)\n", name, ret, fi_strerror(-ret));
		return;
	}
	if (use_fd && (ret = fi_control(&w.c->fid, FI_GETWAIT, &w.fd))) {
		printf("wake unsupported %s FI_GETWAIT=%d(%s)\n", name, ret, fi_strerror(-ret));
		fi_close(&w.c->fid);
		return;
	}
	/* a probe: some providers accept the wait object but cannot wait on it */
	if (!use_fd && (ret = fi_cntr_wait(w.c, 1, 0)) != -FI_ETIMEDOUT && ret != -FI_EAGAIN) {
		printf("wake unsupported %s fi_cntr_wait=%d(%s)\n", name, ret, fi_strerror(-ret));
		fi_close(&w.c->fid);
		return;
	}
	w.lat = calloc(n, sizeof(double));
	pthread_t t;
	pthread_create(&t, NULL, waiter, &w);
	for (int i = 1; i <= n && !atomic_load(&w.stop); i++) {
		while (atomic_load(&w.ready) < i)
			sched_yield();
		if (atomic_load(&w.stop))
			break;
		usleep(50); /* let the waiter go to sleep */
		atomic_store(&w.t_add, now_ns());
		fi_cntr_add(w.c, 1);
	}
	pthread_join(t, NULL);
	if (atomic_load(&w.stop)) {
		printf("wake unsupported %s fi_cntr_wait did not return after an add (%d timeouts of 5 s)\n",
		       name, w.errors);
		free(w.lat);
		fi_close(&w.c->fid);
		return;
	}
	n = w.n;
	qsort(w.lat, n, sizeof(double), cmp_double);
	printf("wake_us %s %.2f %.2f %.2f errors=%d\n", name, w.lat[n / 2], w.lat[(int) (n * 0.99)],
	       w.lat[n - 1], w.errors);
	free(w.lat);
	fi_close(&w.c->fid);
}

struct adder {
	struct fid_cntr *c;
	long n;
	pthread_barrier_t *start;
};

static void *add_loop(void *arg)
{
	struct adder *a = arg;
	pthread_barrier_wait(a->start);
	for (long i = 0; i < a->n; i++)
		fi_cntr_add(a->c, 1);
	return NULL;
}

static void add_throughput(int threads, long n)
{
	int ret;
	struct fid_cntr *c = open_cntr(FI_WAIT_NONE, &ret);
	if (!c) {
		printf("add unsupported fi_cntr_open=%d\n", ret);
		return;
	}
	pthread_t t[64];
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, threads + 1);
	struct adder a = { .c = c, .n = n, .start = &start };
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, add_loop, &a);
	pthread_barrier_wait(&start);
	uint64_t t0 = now_ns();
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	double secs = (double) (now_ns() - t0) / 1e9;
	uint64_t total = fi_cntr_read(c);
	printf("add_mops %d %.2f exact=%d\n", threads, (double) threads * n / secs / 1e6,
	       total == (uint64_t) threads * n);
	pthread_barrier_destroy(&start);
	fi_close(&c->fid);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach a pipe even if the run is cut short */
	const char *prov = "rscntr";
	long iters = 2000000;
	int wakes = 2000, max_threads = 8, opt;
	while ((opt = getopt(argc, argv, "p:n:w:t:")) != -1) {
		switch (opt) {
		case 'p': prov = optarg; break;
		case 'n': iters = atol(optarg); break;
		case 'w': wakes = atoi(optarg); break;
		case 't': max_threads = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-p provider] [-n iters] [-w wakes] [-t threads]\n", argv[0]);
			return 2;
		}
	}
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	hints->fabric_attr->prov_name = strdup(prov);
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = ~0ULL;
	hints->domain_attr->mode = ~0ULL;
	hints->domain_attr->mr_mode = ~3; /* all but the deprecated FI_MR_BASIC and FI_MR_SCALABLE */
	int ret = fi_getinfo(fi_version(), NULL, NULL, 0, hints, &info);
	if (ret) {
		printf("error fi_getinfo(%s)=%d(%s)\n", prov, ret, fi_strerror(-ret));
		return 1;
	}
	if ((ret = fi_fabric(info->fabric_attr, &fabric, NULL)) ||
	    (ret = fi_domain(fabric, info, &domain, NULL))) {
		printf("error open=%d(%s)\n", ret, fi_strerror(-ret));
		return 1;
	}
	printf("provider %s %s\n", prov, info->fabric_attr->prov_name);
	op_costs(iters);
	wake_latency("unspec", FI_WAIT_UNSPEC, 0, wakes);
	wake_latency("yield", FI_WAIT_YIELD, 0, wakes);
	wake_latency("fd", FI_WAIT_FD, 1, wakes);
	for (int th = 1; th <= max_threads; th *= 2)
		add_throughput(th, iters / th);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
