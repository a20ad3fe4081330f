/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * rscntr's counters through the public libfabric API, loaded like any application loads a
 * provider (FI_PROVIDER_PATH). Every op, every wait object, FI_GETWAIT + poll() after
 * fi_trywait, -FI_EAVAIL, -FI_ETIMEDOUT, the extension ops, and bad input.
 *
 * The same suite runs on every backend: RSCNTR_EXPECT_BACKEND=software|hardware (default
 * software) is the backend every completion counter must have, RSCNTR_EXPECT_BYTES_BACKEND
 * (default: the same) that of byte counters; RSCNTR_EXPECT_HW_STATE=off|no_library|
 * no_counter_api|no_device|available, if set, what hardware detection must report.
 */
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_ext_rscntr.h>
#include "harness.h"

#ifndef FI_XPU
#define FI_XPU (1ULL << 44)
#endif

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_eq *eq;
static struct fi_info *info;
/* FI_RSCNTR_CORE=none: rscntr's own fabric and domain, counters only */
static int standalone;
static struct fi_rscntr_domain_ops *ext;

static enum fi_rscntr_backend backend_from_env(const char *var, enum fi_rscntr_backend dflt)
{
	const char *v = getenv(var);
	if (!v || !*v)
		return dflt;
	if (!strcmp(v, "hardware"))
		return FI_RSCNTR_BACKEND_HARDWARE;
	if (strcmp(v, "software"))
		fprintf(stderr, "%s=%s: expected software or hardware\n", var, v);
	return FI_RSCNTR_BACKEND_SOFTWARE;
}

static enum fi_rscntr_backend expected_backend(enum fi_cntr_events events)
{
	enum fi_rscntr_backend comp = backend_from_env("RSCNTR_EXPECT_BACKEND", FI_RSCNTR_BACKEND_SOFTWARE);
	return events == PT_CNTR_EVENTS_BYTES ? backend_from_env("RSCNTR_EXPECT_BYTES_BACKEND", comp) : comp;
}

static const enum fi_wait_obj waitable[] = { FI_WAIT_UNSPEC, FI_WAIT_YIELD, FI_WAIT_FD };
static const char *wait_name(enum fi_wait_obj w)
{
	switch (w) {
	case FI_WAIT_NONE: return "NONE";
	case FI_WAIT_UNSPEC: return "UNSPEC";
	case FI_WAIT_YIELD: return "YIELD";
	case FI_WAIT_FD: return "FD";
	default: return "?";
	}
}

static struct fid_cntr *open_cntr(enum fi_wait_obj wait_obj, enum fi_cntr_events events)
{
	struct fi_cntr_attr attr = { .events = events, .wait_obj = wait_obj };
	struct fid_cntr *c = NULL;
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), 0);
	if (c && ext) {
		enum fi_rscntr_backend b = 0;
		CHECK_RET(ext->cntr_backend(c, &b), 0);
		CHECK(b == expected_backend(events), "events %d wait %d: backend %d, expected %d",
		      events, wait_obj, b, expected_backend(events));
	}
	return c;
}

static void test_hw_state(void)
{
	static const char *names[] = { [FI_RSCNTR_HW_OFF] = "off",
		[FI_RSCNTR_HW_NO_LIBRARY] = "no_library", [FI_RSCNTR_HW_NO_COUNTER_API] = "no_counter_api",
		[FI_RSCNTR_HW_NO_DEVICE] = "no_device", [FI_RSCNTR_HW_AVAILABLE] = "available" };
	const char *want = getenv("RSCNTR_EXPECT_HW_STATE");
	enum fi_rscntr_hw_state state = 0;

	CHECK(ext->size >= offsetof(struct fi_rscntr_domain_ops, hw_state) + sizeof(ext->hw_state),
	      "ext ops size %zu has no hw_state", ext->size);
	CHECK_RET(ext->hw_state(domain, &state), 0);
	CHECK(state >= FI_RSCNTR_HW_OFF && state <= FI_RSCNTR_HW_AVAILABLE, "state %d", state);
	if (state < FI_RSCNTR_HW_OFF || state > FI_RSCNTR_HW_AVAILABLE)
		return;
	printf("hardware counters: %s\n", names[state]);
	if (want && *want)
		CHECK(!strcmp(names[state], want), "hw state %s, expected %s", names[state], want);
	CHECK_RET(ext->hw_state(domain, NULL), -FI_EINVAL);
	CHECK_RET(ext->hw_state((struct fid_domain *) &eq->fid, &state), -FI_EINVAL);
}

static void test_getinfo(void)
{
	struct fi_info *hints = fi_allocinfo(), *res = NULL;

	hints->fabric_attr->prov_name = strdup("rscntr");
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &info), 0);
	CHECK(info && info->domain_attr->cntr_cnt >= 100, "cntr_cnt %zu",
	      info ? info->domain_attr->cntr_cnt : 0);
	CHECK(info && !strcmp(info->fabric_attr->prov_name, "rscntr"), "prov_name %s",
	      info ? info->fabric_attr->prov_name : "(none)");
	if (info && fi_version() >= FI_VERSION(2, 5)) {
		/* 2.5 appended max_cntr_value and max_err_cntr_value to the 2.1 struct we compile
		 * against; the running library allocated the bigger one. */
		uint64_t *max = (uint64_t *) ((char *) info->domain_attr + sizeof(struct fi_domain_attr));
		CHECK(max[0] == UINT64_MAX && max[1] == UINT64_MAX, "max_cntr_value %#lx/%#lx",
		      (unsigned long) max[0], (unsigned long) max[1]);
	}

	/* utility providers' probes for a core to layer over are refused in every mode */
	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = strdup("rscntr;^ofi_rxm");
	hints->ep_attr->type = FI_EP_MSG;
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), -FI_ENODATA);
	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = strdup("rscntr");
	hints->ep_attr->type = FI_EP_UNSPEC;
	/* contradictory: rscntr by provider name, another fabric by fabric name */
	hints->fabric_attr->name = strdup("not-a-fabric");
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), -FI_ENODATA);
	free(hints->fabric_attr->name);
	hints->fabric_attr->name = NULL;
	/* no hints at all still finds rscntr among the providers */
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, NULL, &res), 0);
	fi_freeinfo(res);
	res = NULL;

	if (!standalone) {
		fi_freeinfo(hints);
		return;
	}
	/* counters only (FI_RSCNTR_CORE=none): one RDM info, threading echoed, nothing else */
	CHECK(info && info->ep_attr->type == FI_EP_RDM, "ep type %d", info ? (int) info->ep_attr->type : -1);
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), 0);
	CHECK(res && res->domain_attr->threading == FI_THREAD_DOMAIN, "threading not echoed");
	fi_freeinfo(res);
	res = NULL;
	hints->domain_attr->threading = FI_THREAD_UNSPEC;

	/* what rscntr does not serve: MSG/DGRAM endpoints (the rxm/rxd probes), caps, nodes */
	hints->ep_attr->type = FI_EP_MSG;
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), -FI_ENODATA);
	hints->ep_attr->type = FI_EP_DGRAM;
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), -FI_ENODATA);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	CHECK_RET(fi_getinfo(pt_api(), NULL, NULL, 0, hints, &res), -FI_ENODATA);
	hints->caps = 0;
	CHECK_RET(fi_getinfo(pt_api(), "g00n13s", "9228", 0, hints, &res), -FI_ENODATA);
	fi_freeinfo(hints);
}

static void test_ops_each_wait_obj(void)
{
	const enum fi_wait_obj all[] = { FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_YIELD, FI_WAIT_FD };
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		for (int ev = FI_CNTR_EVENTS_COMP; ev <= (int) PT_CNTR_EVENTS_BYTES; ev++) {
			struct fid_cntr *c = open_cntr(all[i], (enum fi_cntr_events) ev);
			if (!c)
				continue;
			CHECK(fi_cntr_read(c) == 0 && fi_cntr_readerr(c) == 0, "fresh counter not 0");
			CHECK_RET(fi_cntr_add(c, 5), 0);
			CHECK_RET(fi_cntr_add(c, 7), 0);
			CHECK(fi_cntr_read(c) == 12, "%s: read %lu", wait_name(all[i]),
			      (unsigned long) fi_cntr_read(c));
			CHECK_RET(fi_cntr_adderr(c, 2), 0);
			CHECK(fi_cntr_readerr(c) == 2, "readerr");
			CHECK_RET(fi_cntr_set(c, 40), 0);
			CHECK(fi_cntr_read(c) == 40, "set");
			CHECK_RET(fi_cntr_seterr(c, 9), 0);
			CHECK(fi_cntr_readerr(c) == 9 && fi_cntr_read(c) == 40, "seterr");
			/* wrap at max_cntr_value (UINT64_MAX): modulo 2^64 */
			CHECK_RET(fi_cntr_set(c, UINT64_MAX), 0);
			CHECK_RET(fi_cntr_add(c, 2), 0);
			CHECK(fi_cntr_read(c) == 1, "wrap gave %lu", (unsigned long) fi_cntr_read(c));
			CHECK_RET(fi_cntr_set(c, 40), 0);

			enum fi_wait_obj got = (enum fi_wait_obj) -1;
			CHECK_RET(fi_control(&c->fid, FI_GETWAITOBJ, &got), 0);
			CHECK(got == all[i], "GETWAITOBJ %d, opened with %d", got, all[i]);
			uint64_t flags = 0x1234;
			CHECK_RET(fi_control(&c->fid, FI_SETOPSFLAG, &flags), 0);
			flags = 0;
			CHECK_RET(fi_control(&c->fid, FI_GETOPSFLAG, &flags), 0);
			CHECK(flags == 0x1234, "GETOPSFLAG %#lx", (unsigned long) flags);

			/* FI_WAIT_NONE waits too: it polls (fi_rscntr(7)), as sockets' counters do */
			{
				CHECK_RET(fi_cntr_wait(c, 40, -1), 0);
				CHECK_RET(fi_cntr_wait(c, 0, 0), 0);
				CHECK_RET(fi_cntr_wait(c, 41, 0), -FI_ETIMEDOUT);
				CHECK_RET(fi_cntr_wait(c, UINT64_MAX, 0), -FI_ETIMEDOUT);
				double t0 = now_ms();
				CHECK_RET(fi_cntr_wait(c, 41, 50), -FI_ETIMEDOUT);
				CHECK(now_ms() - t0 >= 49.0, "%s: timed out after %.1f ms of 50",
				      wait_name(all[i]), now_ms() - t0);
			}
			int fd = -1;
			CHECK_RET(fi_control(&c->fid, FI_GETWAIT, &fd),
				  all[i] == FI_WAIT_FD ? 0 : -FI_ENODATA);
			if (all[i] == FI_WAIT_FD)
				CHECK(fd >= 0, "fd %d", fd);
			CHECK_RET(fi_close(&c->fid), 0);
		}
	}
}

struct bump {
	struct fid_cntr *c;
	int delay_ms;
	int err;	/* bump the error count instead of the value */
	uint64_t n;
};

static void *bump_later(void *arg)
{
	struct bump *b = arg;
	usleep(b->delay_ms * 1000);
	if (b->err)
		fi_cntr_adderr(b->c, 1);
	else
		fi_cntr_add(b->c, b->n);
	return NULL;
}

static void test_cross_thread_wait(void)
{
	for (size_t i = 0; i < sizeof(waitable) / sizeof(waitable[0]); i++) {
		struct fid_cntr *c = open_cntr(waitable[i], FI_CNTR_EVENTS_COMP);
		pthread_t t;
		struct bump b = { .c = c, .delay_ms = 20, .n = 3 };

		/* woken by an add in another thread, waiting forever */
		pthread_create(&t, NULL, bump_later, &b);
		CHECK_RET(fi_cntr_wait(c, 3, -1), 0);
		pthread_join(t, NULL);

		/* -FI_EAVAIL as soon as the error count changes after the call began */
		CHECK_RET(fi_cntr_adderr(c, 1), 0); /* before the call: no effect */
		CHECK_RET(fi_cntr_wait(c, 4, 0), -FI_ETIMEDOUT);
		b.err = 1;
		pthread_create(&t, NULL, bump_later, &b);
		CHECK_RET(fi_cntr_wait(c, 100, 10000), -FI_EAVAIL);
		pthread_join(t, NULL);
		CHECK(fi_cntr_readerr(c) == 2, "readerr %lu", (unsigned long) fi_cntr_readerr(c));
		CHECK_RET(fi_close(&c->fid), 0);
	}
}

static int readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

static void test_fd_trywait_poll(void)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_FD, FI_CNTR_EVENTS_COMP);
	struct fid *fids[1] = { &c->fid };
	int fd = -1, ret, tries = 0;

	CHECK_RET(fi_control(&c->fid, FI_GETWAIT, &fd), 0);
	CHECK_RET(fi_trywait(fabric, fids, 1), 0); /* nothing changed since open */
	CHECK(!readable(fd, 0), "fd readable with nothing pending");

	CHECK_RET(fi_cntr_add(c, 1), 0);
	CHECK(readable(fd, 0), "an add after trywait did not make the fd readable");
	CHECK_RET(fi_trywait(fabric, fids, 1), -FI_EAGAIN); /* a change is pending */
	CHECK(!readable(fd, 0), "trywait did not drain the fd");

	/* the usual loop: read, trywait until it says it is safe, block in poll() */
	do {
		ret = fi_trywait(fabric, fids, 1);
	} while (ret == -FI_EAGAIN && ++tries < 10);
	CHECK_RET(ret, 0);
	pthread_t t;
	struct bump b = { .c = c, .delay_ms = 20, .n = 1 };
	pthread_create(&t, NULL, bump_later, &b);
	CHECK(readable(fd, 10000), "poll() was not woken by another thread's add");
	pthread_join(t, NULL);
	CHECK(fi_cntr_read(c) == 2, "read %lu", (unsigned long) fi_cntr_read(c));

	/* error changes signal the fd too */
	while (fi_trywait(fabric, fids, 1) == -FI_EAGAIN)
		;
	CHECK_RET(fi_cntr_seterr(c, 5), 0);
	CHECK(readable(fd, 0), "seterr after trywait did not make the fd readable");

	/* trywait on counters without an fd */
	struct fid_cntr *y = open_cntr(FI_WAIT_YIELD, FI_CNTR_EVENTS_COMP);
	struct fid_cntr *n = open_cntr(FI_WAIT_NONE, FI_CNTR_EVENTS_COMP);
	fids[0] = &y->fid;
	CHECK_RET(fi_trywait(fabric, fids, 1), -FI_EINVAL);
	fids[0] = &n->fid;
	CHECK_RET(fi_trywait(fabric, fids, 1), -FI_EINVAL);
	CHECK_RET(fi_close(&y->fid), 0);
	CHECK_RET(fi_close(&n->fid), 0);
	CHECK_RET(fi_close(&c->fid), 0);
}

struct adder {
	struct fid_cntr *c;
	int n;
};

static void *add_many(void *arg)
{
	struct adder *a = arg;
	for (int i = 0; i < a->n; i++)
		fi_cntr_add(a->c, 1);
	fi_cntr_adderr(a->c, 1);
	return NULL;
}

static void test_threads(void)
{
	enum { THREADS = 8, ADDS = 200000 };
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC, FI_CNTR_EVENTS_COMP);
	pthread_t t[THREADS];
	struct adder a = { .c = c, .n = ADDS };

	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, add_many, &a);
	/* each adder also bumps the error count once: a waiter sees -FI_EAVAIL, then waits on */
	int ret, eavail = 0;
	while ((ret = fi_cntr_wait(c, (uint64_t) THREADS * ADDS, 60000)) == -FI_EAVAIL)
		eavail++;
	CHECK_RET(ret, 0);
	CHECK(eavail <= THREADS, "%d -FI_EAVAIL returns for %d error changes", eavail, THREADS);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(fi_cntr_read(c) == (uint64_t) THREADS * ADDS, "total %lu",
	      (unsigned long) fi_cntr_read(c));
	CHECK(fi_cntr_readerr(c) == THREADS, "errors %lu", (unsigned long) fi_cntr_readerr(c));
	CHECK_RET(fi_close(&c->fid), 0);
}

/* The newest fi_ops_cntr layout appends export_xpu, which fi_cntr_export_xpu calls unchecked. */
struct ops_cntr_newest {
	struct fi_ops_cntr base;
	int (*export_xpu)(struct fid_cntr *cntr, uint64_t flags, void *xpu_cntr);
};

static void test_extension_and_layout(void)
{
	struct fid_cntr *c = open_cntr(FI_WAIT_UNSPEC, FI_CNTR_EVENTS_COMP);
	struct ops_cntr_newest *ops = (struct ops_cntr_newest *) c->ops;
	CHECK(ops->base.size == sizeof(struct ops_cntr_newest), "ops size %zu", ops->base.size);
	CHECK(ops->export_xpu != NULL, "no export_xpu slot");
	if (ops->export_xpu)
		CHECK_RET(ops->export_xpu(c, 0, NULL), -FI_ENOSYS);

	if (ext) {
		enum fi_rscntr_backend backend = 0;
		CHECK(ext->size >= sizeof(*ext), "ext ops size %zu", ext->size);
		CHECK_RET(ext->cntr_backend(c, &backend), 0);
		CHECK(backend == expected_backend(FI_CNTR_EVENTS_COMP), "backend %d", backend);
		CHECK_RET(ext->cntr_backend(c, NULL), -FI_EINVAL);
		CHECK_RET(ext->cntr_backend(NULL, &backend), -FI_EINVAL);
		CHECK_RET(ext->cntr_backend((struct fid_cntr *) &eq->fid, &backend), -FI_EINVAL);
	}
	void *none = NULL;
	CHECK_RET(fi_open_ops(&domain->fid, "no_such_ops", 0, &none, NULL), -FI_ENOSYS);
	CHECK_RET(fi_close(&c->fid), 0);
}

static void test_bad_input(void)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cntr *c = NULL;

	CHECK_RET(fi_cntr_open(domain, &attr, NULL, NULL), -FI_EINVAL);
	attr.wait_obj = (enum fi_wait_obj) 99;
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_SET; /* without a wait set */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_MUTEX_COND; /* deprecated */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_UNSPEC;
	attr.events = (enum fi_cntr_events) 7;
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EINVAL);
	attr.events = FI_CNTR_EVENTS_COMP;
	attr.flags = 1ULL << 3;
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EINVAL);
	attr.flags = FI_XPU;
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_ENOSYS);
	attr.flags = 0;

	/* NULL attr: documented defaults (completions, FI_WAIT_UNSPEC) */
	CHECK_RET(fi_cntr_open(domain, NULL, &c, NULL), 0);
	if (c) {
		enum fi_wait_obj w = FI_WAIT_NONE;
		CHECK_RET(fi_control(&c->fid, FI_GETWAITOBJ, &w), 0);
		CHECK(w == FI_WAIT_UNSPEC, "NULL attr gave wait object %d", w);
		CHECK_RET(fi_control(&c->fid, 12345, &w), -FI_ENOSYS);
		CHECK_RET(fi_control(&c->fid, FI_GETWAITOBJ, NULL), -FI_EINVAL);
		CHECK_RET(fi_control(&c->fid, FI_SETOPSFLAG, NULL), -FI_EINVAL);
		CHECK_RET(fi_cntr_wait(c, UINT64_MAX - 1, 0), -FI_ETIMEDOUT);

		/* a parent with children open cannot close */
		CHECK_RET(fi_close(&domain->fid), -FI_EBUSY);
		CHECK_RET(fi_close(&fabric->fid), -FI_EBUSY);
		CHECK_RET(fi_close(&c->fid), 0);
	}
	/* counters-only (FI_RSCNTR_CORE=none) has no data path: a clear ENOSYS, not a crash;
	 * over a core, CQs are the core's */
	struct fid_cq *cq = NULL;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT };
	CHECK_RET(fi_cq_open(domain, &cq_attr, &cq, NULL), standalone ? -FI_ENOSYS : 0);
	if (cq)
		CHECK_RET(fi_close(&cq->fid), 0);
}

int main(void)
{
	const char *core = getenv("FI_RSCNTR_CORE");
	standalone = core && !strcmp(core, "none");
	printf("cntr_api: FI_RSCNTR_CORE=%s\n", core ? core : "(unset)");
	test_getinfo();
	if (!info)
		return finish("cntr_api");
	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	CHECK_RET(fi_eq_open(fabric, &eq_attr, &eq, NULL), 0);
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		return finish("cntr_api");
	CHECK_RET(fi_open_ops(&domain->fid, FI_RSCNTR_DOMAIN_OPS_V1, 0, (void **) &ext, NULL), 0);
	if (!ext)
		return finish("cntr_api");
	test_hw_state();

	test_ops_each_wait_obj();
	test_cross_thread_wait();
	test_fd_trywait_poll();
	test_threads();
	test_extension_and_layout();
	test_bad_input();

	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&eq->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	return finish("cntr_api");
}
