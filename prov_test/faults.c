/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Fault injection: each case runs this program again as a child (child.h) with the fault
 * switched on, and the child checks that the failing call returns a clean error, that every
 * object opened before it still closes with 0 (nothing half-open), and that no fd is left
 * behind. The parent checks the child's exit code and its log lines.
 *
 * 1. Core calls failing (FI_RSCNTR_TEST_FAIL=<op>, src/boundary/testhook.rs), over a core only
 *    (skipped with FI_RSCNTR_CORE=none): the core's getinfo, fabric, domain, cq_open,
 *    endpoint, passive endpoint, the core counter opened at the first bind (cntr_open), the
 *    bind of that counter, mr_reg. Each fails with -FI_EIO (getinfo: -FI_ENODATA, libfabric's
 *    answer when no provider has infos) and the child then closes all it has.
 * 2. Panics (FI_RSCNTR_TEST_PANIC=<op>): fi_domain, fi_cntr_open (after the domain's counter
 *    slot is claimed: the domain must still close), fi_control's private command, the bind
 *    of an rscntr counter (over a core). The caller gets -FI_EOTHER, the process lives on and
 *    the objects keep working; the log says "panic caught at the C boundary".
 * 3. No fds left (RLIMIT_NOFILE lowered in the child): fi_cntr_open of an FI_WAIT_FD counter
 *    fails with -FI_EMFILE and a warning; counters of the other wait objects open and work;
 *    an FD counter opened before keeps working (trywait, poll); once the limit is back, FD
 *    counters open again; nothing leaks.
 *
 * The fake-verbs calls failing (FI_RSCNTR_FAKE_VERBS=fail=...) are covered by tests/hw.rs
 * (every_store_op_reaches_the_device, every_call_can_fail, failing_reads_and_updates_...)
 * and scripts/test.sh's "fake hardware: failing device calls" step.
 */
#include <dirent.h>
#include <poll.h>
#include <stdint.h>
#include <sys/resource.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include "harness.h"
#include "child.h"

#define RSCNTR_TEST_PANIC_CMD 0x52537e57 /* src/boundary/testhook.rs: PANIC_CMD */

static int standalone;

/* Open file descriptors of this process. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", ".." and the directory's own fd */
}

static struct fi_info *get_info(enum fi_ep_type type, int *ret)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	hints->fabric_attr->prov_name = strdup("rscntr");
	if (!standalone) {
		hints->ep_attr->type = type;
		hints->caps = FI_MSG;
		hints->mode = FI_CONTEXT | FI_CONTEXT2;
		hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	}
	*ret = fi_getinfo(pt_api(), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	/* (not when getinfo is what fails: in auto mode rscntr then serves counters only, and
	 * the plain hints would get that) */
	const char *failing = getenv("FI_RSCNTR_TEST_FAIL");
	if (*ret == -FI_ENODATA && !standalone && type == FI_EP_RDM && !(failing && !strcmp(failing, "getinfo"))) {
		/* cores without RDM endpoints (udp): whatever they have */
		hints = fi_allocinfo();
		hints->fabric_attr->prov_name = strdup("rscntr");
		*ret = fi_getinfo(pt_api(), NULL, NULL, 0, hints, &info);
		fi_freeinfo(hints);
	}
	return info;
}

/* ---- 1. core calls failing -------------------------------------------------------------- */

/* Where a step's result is compared: the injected op fails exactly there, every other step
 * succeeds, with one exception: tcp's RDM endpoint listens on a passive endpoint it opens
 * through the fabric's ops, i.e. rscntr's interposed passive_ep, so "pep" may already fail
 * the endpoint. A failed getinfo is -FI_ENODATA at the application: libfabric reports that
 * when no provider answers (rscntr's -FI_EIO is in the log). Returns nonzero when the step
 * failed (as it should or not). */
static int step(const char *op, const char *name, int ret, int *failed_at_op)
{
	int want = 0, maybe = 0;
	if (!strcmp(op, name))
		want = !strcmp(name, "getinfo") ? -FI_ENODATA : -FI_EIO;
	else if (!strcmp(op, "pep") && !strcmp(name, "endpoint"))
		maybe = -FI_EIO;
	printf("child: %-10s %d%s\n", name, ret, want || (maybe && ret) ? " (injected)" : "");
	CHECK(ret == want || (maybe && ret == maybe), "%s: returned %d (%s), expected %d", name,
	      ret, fi_strerror(-ret), want);
	if ((want && ret == want) || (maybe && ret == maybe))
		*failed_at_op = 1;
	return ret != 0;
}

static int child_core_fail(void)
{
	const char *op = getenv("FI_RSCNTR_TEST_FAIL");
	int ret, hit = 0;
	struct fi_info *info, *msg_info;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_cq *cq = NULL;
	struct fid_av *av = NULL;
	struct fid_cntr *cntr = NULL;
	struct fid_ep *ep = NULL;
	struct fid_pep *pep = NULL;
	struct fid_mr *mr = NULL;
	static char buf[4096];

	/* what libfabric and the cores keep open once loaded is the baseline */
	info = get_info(FI_EP_RDM, &ret);
	fi_freeinfo(info);
	int fds0 = count_fds();

	info = get_info(FI_EP_RDM, &ret);
	if (step(op, "getinfo", ret, &hit))
		goto out;
	if (step(op, "fabric", fi_fabric(info->fabric_attr, &fabric, NULL), &hit))
		goto out;
	if (step(op, "domain", fi_domain(fabric, info, &domain, NULL), &hit))
		goto out;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 64 };
	if (step(op, "cq_open", fi_cq_open(domain, &cq_attr, &cq, NULL), &hit))
		goto out;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	if (step(op, "av_open", fi_av_open(domain, &av_attr, &av, NULL), &hit))
		goto out;
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	if (step(op, "rscntr", fi_cntr_open(domain, &cntr_attr, &cntr, NULL), &hit))
		goto out;
	if (step(op, "endpoint", fi_endpoint(domain, info, &ep, NULL), &hit))
		goto out;
	/* an AV only where the endpoint addresses peers through one (not MSG: libfabric 1.17's
	 * tcp takes it and never lets go, so it could not close, rscntr or not) */
	if (info->ep_attr->type != FI_EP_MSG)
		CHECK_RET(fi_ep_bind(ep, &av->fid, 0), 0);
	CHECK_RET(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	/* the core counter behind an rscntr counter is opened at its first bind; a core
	 * without counters (udp) refuses it, documented -FI_ENOSYS, before any bind */
	ret = fi_ep_bind(ep, &cntr->fid, FI_SEND | FI_RECV);
	if (ret == -FI_ENOSYS && strcmp(op, "cntr_open")) {
		printf("child: the core has no counters (bind: -FI_ENOSYS)%s\n",
		       strcmp(op, "bind") ? "" : ": bind not reached here");
		if (!strcmp(op, "bind"))
			hit = 2;
	} else {
		step(op, strcmp(op, "bind") ? "cntr_open" : "bind", ret, &hit);
	}
	CHECK_RET(fi_enable(ep), 0);
	if (step(op, "mr_reg", fi_mr_reg(domain, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL), &hit))
		goto out;
	if (ret == 0 && info->ep_attr->type == FI_EP_RDM) {
		/* nothing failed on the way: the data path counts */
		char name[256];
		size_t len = sizeof(name);
		fi_addr_t self;
		void *desc = fi_mr_desc(mr);
		CHECK_RET(fi_getname(&ep->fid, name, &len), 0);
		CHECK_RET(fi_av_insert(av, name, 1, &self, 0, NULL), 1);
		CHECK_RET(fi_recv(ep, buf + 2048, 64, desc, FI_ADDR_UNSPEC, NULL), 0);
		double t0 = now_ms();
		while ((ret = fi_send(ep, buf, 64, desc, self, NULL)) == -FI_EAGAIN && now_ms() - t0 < 10000) {
			struct fi_cq_entry e;
			(void) fi_cq_read(cq, &e, 1);
		}
		CHECK_RET(ret, 0);
		CHECK_RET(fi_cntr_wait(cntr, 2, 10000), 0);
	}
	/* a passive endpoint: MSG cores only (tcp), not shm */
	msg_info = get_info(FI_EP_MSG, &ret);
	if (msg_info) {
		struct fid_fabric *f2 = NULL;
		if (fi_fabric(msg_info->fabric_attr, &f2, NULL) == 0) {
			step(op, "pep", fi_passive_ep(f2, msg_info, &pep, NULL), &hit);
			if (pep)
				CHECK_RET(fi_close(&pep->fid), 0);
			CHECK_RET(fi_close(&f2->fid), 0);
		}
		fi_freeinfo(msg_info);
	} else if (!strcmp(op, "pep")) {
		printf("child: no FI_EP_MSG over this core: pep not reached here\n");
		hit = 2;
	}
out:
	/* nothing half-open: whatever was opened closes */
	if (mr)
		CHECK_RET(fi_close(&mr->fid), 0);
	if (ep)
		CHECK_RET(fi_close(&ep->fid), 0);
	if (cntr)
		CHECK_RET(fi_close(&cntr->fid), 0);
	if (av)
		CHECK_RET(fi_close(&av->fid), 0);
	if (cq)
		CHECK_RET(fi_close(&cq->fid), 0);
	if (domain)
		CHECK_RET(fi_close(&domain->fid), 0);
	if (fabric)
		CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	int fds1 = count_fds();
	CHECK(fds1 == fds0, "%d fds open after closing everything, %d before", fds1, fds0);
	CHECK(hit, "the injected %s failure never showed", op);
	if (hit == 1)
		printf("child: injected failure seen\n");
	printf("child: all closed, fds %d -> %d\n", fds0, fds1);
	return finish("faults child") ? 1 : 0;
}

/* ---- 2. panics -------------------------------------------------------------------------- */

static int child_panic(void)
{
	const char *op = getenv("FI_RSCNTR_TEST_PANIC");
	int ret;
	struct fi_info *info = get_info(FI_EP_RDM, &ret);
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_cntr *c = NULL;
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };

	CHECK_RET(ret, 0);
	if (!info)
		return 1;
	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	if (!strcmp(op, "domain")) {
		CHECK_RET(fi_domain(fabric, info, &domain, NULL), -FI_EOTHER);
		CHECK(domain == NULL, "a panicking fi_domain wrote its out pointer");
		CHECK_RET(fi_close(&fabric->fid), 0); /* nothing was left open */
		fi_freeinfo(info);
		printf("child: lived on\n");
		return finish("panic child");
	}
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		return 1;
	if (!strcmp(op, "cntr_open")) {
		CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EOTHER);
		CHECK(c == NULL, "a panicking fi_cntr_open wrote its out pointer");
	} else {
		CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), 0);
	}
	if (!strcmp(op, "control") && c) {
		int arg = 0;
		CHECK_RET(fi_control(&c->fid, RSCNTR_TEST_PANIC_CMD, &arg), -FI_EOTHER);
		enum fi_wait_obj w = FI_WAIT_NONE;
		CHECK_RET(fi_control(&c->fid, FI_GETWAITOBJ, &w), 0); /* other commands still work */
		CHECK(w == FI_WAIT_UNSPEC, "wait obj %d", w);
	}
	if (!strcmp(op, "bind") && c) {
		struct fid_ep *ep = NULL;
		CHECK_RET(fi_endpoint(domain, info, &ep, NULL), 0);
		if (ep) {
			CHECK_RET(fi_ep_bind(ep, &c->fid, FI_SEND), -FI_EOTHER);
			CHECK_RET(close_unenabled_ep(ep, domain), 0);
		}
	}
	if (c) {
		/* the counter works after a panic in one of its ops */
		CHECK(fi_cntr_add(c, 2) == 0 && fi_cntr_read(c) == 2 && fi_cntr_wait(c, 2, 1000) == 0,
		      "counter broken after the panic");
		CHECK_RET(fi_close(&c->fid), 0);
	}
	/* and another one opens */
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), strcmp(op, "cntr_open") ? 0 : -FI_EOTHER);
	if (c && strcmp(op, "cntr_open"))
		CHECK_RET(fi_close(&c->fid), 0);
	CHECK_RET(fi_close(&domain->fid), 0); /* the slot a panicking open claimed came back */
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	printf("child: lived on\n");
	return finish("panic child");
}

/* ---- 3. no fds left --------------------------------------------------------------------- */

static int readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

static int child_nofile(void)
{
	int ret;
	struct fi_info *info = get_info(FI_EP_RDM, &ret);
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_cntr *before = NULL, *c = NULL;
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD };
	struct rlimit saved, low;

	if (!info)
		return 1;
	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (!domain)
		return 1;
	CHECK_RET(fi_cntr_open(domain, &attr, &before, NULL), 0);
	int fd = -1;
	CHECK_RET(fi_control(&before->fid, FI_GETWAIT, &fd), 0);
	int fds0 = count_fds();

	/* no new fd can be made: the limit is the lowest free descriptor */
	int lowest = dup(0);
	close(lowest);
	getrlimit(RLIMIT_NOFILE, &saved);
	low = saved;
	low.rlim_cur = lowest;
	CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
	CHECK(dup(0) < 0 && errno == EMFILE, "the lowered limit does not bite");

	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), -FI_EMFILE);
	CHECK(c == NULL, "a failed open wrote its out pointer");
	const enum fi_wait_obj others[] = { FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_YIELD };
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		struct fi_cntr_attr a = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = others[i] };
		struct fid_cntr *o = NULL;
		CHECK_RET(fi_cntr_open(domain, &a, &o, NULL), 0);
		if (!o)
			continue;
		CHECK(fi_cntr_add(o, 3) == 0 && fi_cntr_read(o) == 3, "wait obj %d does not count", others[i]);
		if (others[i] != FI_WAIT_NONE)
			CHECK_RET(fi_cntr_wait(o, 3, 1000), 0);
		CHECK_RET(fi_close(&o->fid), 0);
	}
	/* the FD counter opened before still signals */
	struct fid *fids[1] = { &before->fid };
	while (fi_trywait(fabric, fids, 1) == -FI_EAGAIN)
		;
	CHECK_RET(fi_cntr_add(before, 1), 0);
	CHECK(readable(fd, 1000), "the fd of the counter opened before did not fire");

	CHECK(setrlimit(RLIMIT_NOFILE, &saved) == 0, "restoring the limit");
	int fds1 = count_fds();
	CHECK(fds1 == fds0, "fds %d after the failures, %d before", fds1, fds0);
	CHECK_RET(fi_cntr_open(domain, &attr, &c, NULL), 0);
	if (c)
		CHECK_RET(fi_close(&c->fid), 0);
	CHECK_RET(fi_close(&before->fid), 0);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	printf("child: lived on, fds %d -> %d\n", fds0, fds1);
	return finish("nofile child");
}

/* ---- the parent ------------------------------------------------------------------------- */

static char out[1 << 16];

static void expect_child(const char *mode, const char *var, const char *const *want)
{
	/* RUST_BACKTRACE unset: with it, the panic message comes with a backtrace whose symbol
	 * cache is a process-lifetime static of Rust's std inside the DSO, which valgrind then
	 * counts as lost once libfabric unloads rscntr at exit (prov_test/sanitize.sh). The
	 * containment under test does not depend on it. */
	const char *env[] = { var, "FI_LOG_LEVEL=warn", "RUST_BACKTRACE", NULL };
	int rc = run_self(mode, env, out, sizeof(out), 120);
	int ok = rc == 0;
	if (strstr(out, "child: injected failure seen")) {
		/* a failed core call is logged, naming it */
		int logged = strstr(out, "FI_RSCNTR_TEST_FAIL: failing the core's") != NULL;
		CHECK(logged, "%s: the injected failure was not logged", var);
		ok &= logged;
	}
	CHECK(rc == 0, "%s %s: child exited %d", mode, var, rc);
	for (; want && *want; want++) {
		int found = strstr(out, *want) != NULL;
		CHECK(found, "%s %s: no \"%s\" in the child's output", mode, var, *want);
		ok &= found;
	}
	if (!ok)
		show_child(var, out);
	else
		printf("faults: %s %s: ok\n", mode, var);
}

int main(int argc, char **argv)
{
	const char *core = getenv("FI_RSCNTR_CORE");
	standalone = core && !strcmp(core, "none");
	if (argc > 1 && !strcmp(argv[1], "--core-fail"))
		return child_core_fail();
	if (argc > 1 && !strcmp(argv[1], "--panic"))
		return child_panic();
	if (argc > 1 && !strcmp(argv[1], "--nofile"))
		return child_nofile();
	CHECK(child_init() == 0, "cannot resolve /proc/self/exe");
	printf("faults: FI_RSCNTR_CORE=%s\n", core ? core : "(unset)");

	if (standalone) {
		printf("faults: FI_RSCNTR_CORE=none: no core calls to fail\n");
	} else {
		static const char *const ops[] = { "getinfo", "fabric", "domain", "cq_open", "endpoint",
			"cntr_open", "bind", "mr_reg", "pep" };
		for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
			char var[64];
			snprintf(var, sizeof(var), "FI_RSCNTR_TEST_FAIL=%s", ops[i]);
			/* the child demands that the injected failure showed where it can; the
			 * warning shows wherever the hook fired (not for pep over shm: no MSG) */
			expect_child("--core-fail", var, (const char *const[]) { "child: all closed", NULL });
		}
	}

	const char *const panic_log[] = { "panic caught at the C boundary",
		"FI_RSCNTR_TEST_PANIC: forced panic", "child: lived on", NULL };
	expect_child("--panic", "FI_RSCNTR_TEST_PANIC=domain", panic_log);
	expect_child("--panic", "FI_RSCNTR_TEST_PANIC=cntr_open", panic_log);
	expect_child("--panic", "FI_RSCNTR_TEST_PANIC=control", panic_log);
	if (!standalone)
		expect_child("--panic", "FI_RSCNTR_TEST_PANIC=bind", panic_log);

	expect_child("--nofile", "RSCNTR_NOFILE=1", (const char *const[]) {
		"cannot create the counter's eventfd or watcher: Too many open files", "child: lived on", NULL });
	return finish("faults");
}
