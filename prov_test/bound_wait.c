/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * How a waiter on a bound counter waits (FI_RSCNTR_CORE; skipped when it is "none"): a
 * receive counter of an RDM endpoint that sends to itself, one endpoint per wait object.
 * A thread waits for one receive (fi_cntr_wait for FI_WAIT_UNSPEC and FI_WAIT_YIELD,
 * fi_trywait + poll() on the FI_GETWAIT fd for FI_WAIT_FD) while the main thread looks at it
 * through /proc for a while, then sends; the waiter must wake with the count.
 *
 * Over cores with something to block on (tcp, tcp;ofi_rxm, udp;ofi_rxd, sockets with auto
 * progress) an idle waiter must be asleep in the kernel, in the syscall of the core's wait
 * object (ppoll on its fd; futex for sockets' counter wait; for FD counters the
 * application's own poll), its own CPU time under 10 % of the time it is looked at, and no
 * rscntr thread may be running meanwhile. With FI_RSCNTR_TEST_STUCK_FD=1 (the core's fd
 * stays readable; rscntr's leader naps between looks) its CPU time alone says whether it
 * spins: a thread woken from a nap on a loaded machine waits for a CPU in state R. Over shm,
 * which has nothing to block on, rscntr's doorbell is what they block on: its waiters must be asleep
 * too, in futex for fi_cntr_wait (FI_RSCNTR_SHM_BELL=0: they yield as shm's own do, and only
 * the wake is checked). Each endpoint sends to itself, so from the second on the domain's own
 * bell is mapped as a peer's (as in an MPI job, whose ranks have their own address in their
 * AV): an arming waiter that rang it would never sleep. So UNSPEC is checked again after FD.
 *
 * Last, an FD counter in a domain opened FI_THREAD_DOMAIN (fabtests' threading), its calls
 * serialized by a lock as that level asks: rscntr's watcher may not drive such a core, so the
 * counter's own fd must hold the core's (over tcp an epoll fd, which Linux will not add with
 * EPOLLEXCLUSIVE): its idle poller must be asleep in poll(), not told -FI_EAGAIN by every
 * fi_trywait and left to spin on reads.
 */
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include "harness.h"

#define SIZE 64
#define SAMPLES 10
/* An idle waiter that sleeps uses next to nothing (a napping leader over a stuck fd about
 * 1 %); one that polls or yields uses a whole CPU. */
#define MAX_IDLE_CPU_PCT 10.0

/* FI_RSCNTR_TEST_STUCK_FD=1 (src/boundary/testhook.rs): rscntr's sleepers poll an fd that
 * stays readable. */
static int stuck_fd;
/* The waiter wakes between looks instead of sleeping until the completion: a sample can catch
 * it woken and not yet run, so its CPU alone says whether it spins (sockets before libfabric
 * 1.22, whose own timed counter wait returns at once: 1 ms naps; udp;ofi_rxd, whose sleeps end
 * every 10 ms for rxd's timers, and tcp;ofi_rxm before 1.18, every 50 ms: a sample every few
 * ms caught the rxd leader awake in 5 of 10 at 0.4 % of a CPU on an idle machine). */
static int naps;

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static char buf[2][SIZE];

/* FI_THREAD_DOMAIN: the waiter's and the sender's calls into the domain take this lock. */
static int serialize;
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;

static void api_enter(void)
{
	if (serialize)
		pthread_mutex_lock(&api_lock);
}

static void api_leave(void)
{
	if (serialize)
		pthread_mutex_unlock(&api_lock);
}

static uint64_t read_serialized(struct fid_cntr *cntr)
{
	api_enter();
	uint64_t v = fi_cntr_read(cntr);
	api_leave();
	return v;
}

struct waiter {
	struct fid_cntr *cntr;
	enum fi_wait_obj wait_obj;
	atomic_int tid;
	atomic_int started;
	int ret;
	uint64_t value;
};

static void *wait_one(void *arg)
{
	struct waiter *w = arg;
	atomic_store(&w->tid, (int) syscall(SYS_gettid));
	atomic_store(&w->started, 1);
	if (w->wait_obj != FI_WAIT_FD) {
		w->ret = fi_cntr_wait(w->cntr, 1, 10000);
	} else {
		int fd = -1;
		w->ret = fi_control(&w->cntr->fid, FI_GETWAIT, &fd);
		double t0 = now_ms();
		while (!w->ret && read_serialized(w->cntr) < 1 && now_ms() - t0 < 10000) {
			struct fid *f = &w->cntr->fid;
			api_enter();
			int armed = fi_trywait(fabric, &f, 1);
			api_leave();
			if (armed == 0) {
				struct pollfd p = { .fd = fd, .events = POLLIN };
				(void) poll(&p, 1, 10000);
			}
		}
		if (!w->ret && read_serialized(w->cntr) < 1)
			w->ret = -FI_ETIMEDOUT;
	}
	w->value = read_serialized(w->cntr);
	return NULL;
}

/* The state letter and current syscall of a thread of this process ('?' / -2 if unknown;
 * -1 while running). */
static char thread_state(int tid, long *syscall_nr)
{
	char path[64], line[512];
	char state = '?';
	*syscall_nr = -2;
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "r");
	if (f) {
		if (fgets(line, sizeof(line), f)) {
			char *p = strrchr(line, ')');
			if (p && p[1] == ' ')
				state = p[2];
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (f) {
		if (fgets(line, sizeof(line), f))
			*syscall_nr = strncmp(line, "running", 7) ? strtol(line, NULL, 10) : -1;
		fclose(f);
	}
	return state;
}

/* Threads of rscntr's own (named rscntr-*) that are running now. */
static int rscntr_threads_running(void)
{
	int running = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[300], comm[64] = "";
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "rscntr-", 7)) {
			long nr;
			if (thread_state(atoi(e->d_name), &nr) == 'R')
				running++;
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	return running;
}

static const char *wait_name(enum fi_wait_obj w)
{
	return w == FI_WAIT_FD ? "FD" : w == FI_WAIT_YIELD ? "YIELD" : "UNSPEC";
}

/* One endpoint, one bound receive counter, one waiter. `blocks`: the core has a wait object
 * rscntr sleeps on; `sleep_calls`: the syscalls an asleep waiter may be in. */
static void one(struct fi_info *info, enum fi_wait_obj wait_obj, int blocks, const long *sleep_calls)
{
	struct fid_cq *cq = NULL;
	struct fid_ep *ep = NULL;
	struct fid_mr *mr = NULL;
	void *desc = NULL;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 16 };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = wait_obj };
	struct waiter w = { .wait_obj = wait_obj };
	/* An AV per endpoint: shm crashes enabling an endpoint whose AV still holds the address
	 * of a closed one (smr_exchange_all_peers, libfabric 2.1). */
	struct fid_av *av = NULL;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	CHECK_RET(fi_av_open(domain, &av_attr, &av, NULL), 0);
	CHECK_RET(fi_cq_open(domain, &cq_attr, &cq, NULL), 0);
	CHECK_RET(fi_cntr_open(domain, &cntr_attr, &w.cntr, NULL), 0);
	CHECK_RET(fi_endpoint(domain, info, &ep, NULL), 0);
	if (!av || !cq || !w.cntr || !ep)
		return;
	CHECK_RET(fi_ep_bind(ep, &av->fid, 0), 0);
	CHECK_RET(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION), 0);
	CHECK_RET(fi_ep_bind(ep, &w.cntr->fid, FI_RECV), 0);
	CHECK_RET(fi_enable(ep), 0);
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		CHECK_RET(fi_mr_reg(domain, buf, sizeof(buf), FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL), 0);
		desc = mr ? fi_mr_desc(mr) : NULL;
	}
	char name[256];
	size_t len = sizeof(name);
	fi_addr_t self = FI_ADDR_UNSPEC;
	CHECK_RET(fi_getname(&ep->fid, name, &len), 0);
	CHECK_RET(fi_av_insert(av, name, 1, &self, 0, NULL), 1);
	CHECK_RET(POST(fi_recv(ep, buf[1], SIZE, desc, FI_ADDR_UNSPEC, NULL), cq), 0);

	pthread_t t;
	pthread_create(&t, NULL, wait_one, &w);
	while (!atomic_load(&w.started))
		usleep(1000);
	usleep(100000);
	int asleep = 0, in_call = 0, ours_running = 0;
	long last_call = -2;
	char last_state = '?';
	/* The waiter's own CPU time over the samples: what a waiter that polls or spins would
	 * show whatever the scheduler does with it (a thread woken from a nap and waiting for a
	 * CPU on a loaded machine is in state R without running). */
	clockid_t waiter_clock;
	int have_clock = pthread_getcpuclockid(t, &waiter_clock) == 0;
	double cpu0 = have_clock ? clock_ms(waiter_clock) : 0, wall0 = now_ms();
	for (int i = 0; i < SAMPLES; i++) {
		long nr;
		char s = thread_state(atomic_load(&w.tid), &nr);
		asleep += s == 'S';
		for (const long *c = sleep_calls; *c >= 0; c++)
			in_call += nr == *c;
		ours_running += rscntr_threads_running();
		last_call = nr;
		last_state = s;
		usleep(10000);
	}
	double cpu_pct = have_clock ? 100 * (clock_ms(waiter_clock) - cpu0) / (now_ms() - wall0) : -1;
	printf("bound_wait: %s: idle waiter asleep in %d/%d samples, in the expected syscall in %d "
	       "(last: state %c, syscall %ld), its CPU %.2f %% of the time; rscntr threads running "
	       "in %d samples\n",
	       wait_name(wait_obj), asleep, SAMPLES, in_call, last_state, last_call, cpu_pct,
	       ours_running);
	if (blocks && wait_obj != FI_WAIT_YIELD) {
		CHECK(have_clock, "no CPU clock for the %s waiter", wait_name(wait_obj));
		CHECK(cpu_pct < MAX_IDLE_CPU_PCT, "%s waiter used %.1f %% of a CPU while idle",
		      wait_name(wait_obj), cpu_pct);
		/* A core fd that stays readable (FI_RSCNTR_TEST_STUCK_FD): the leader naps up to
		 * 4 ms at a time between looks (src/engine/stuck.rs), so a sample can catch it
		 * woken and not yet run; its CPU above says whether it spins. */
		if (!stuck_fd && !naps) {
			CHECK(asleep >= SAMPLES - 2, "%s waiter was not asleep (%d/%d)",
			      wait_name(wait_obj), asleep, SAMPLES);
			CHECK(in_call >= SAMPLES - 2, "%s waiter not in the core's wait (%d/%d, last %ld)",
			      wait_name(wait_obj), in_call, SAMPLES, last_call);
		}
		/* A thread polling the core would be running in every sample; allow a sample
		 * to catch rscntr's fd watcher between two sleeps. */
		CHECK(ours_running <= SAMPLES / 3,
		      "an rscntr thread ran while the %s waiter slept (%d samples)", wait_name(wait_obj),
		      ours_running);
	}

	api_enter();
	CHECK_RET(POST(fi_send(ep, buf[0], SIZE, desc, self, NULL), cq), 0);
	api_leave();
	pthread_join(t, NULL);
	CHECK(w.ret == 0 && w.value == 1, "%s waiter: ret %d value %lu", wait_name(wait_obj), w.ret,
	      (unsigned long) w.value);

	if (mr)
		CHECK_RET(fi_close(&mr->fid), 0);
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&w.cntr->fid), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
}

int main(void)
{
	const char *core = NULL;
	const char *stuck = getenv("FI_RSCNTR_TEST_STUCK_FD");
	stuck_fd = stuck && !strcmp(stuck, "1");
	struct fi_info *info = rdm_thread_safe_info("bound_wait", &core);
	if (!info)
		return finish("bound_wait");

	/* What rscntr sleeps on over this core (see src/layer/wait/blocker.rs). */
	static const long fd_calls[] = { SYS_ppoll, SYS_poll, -1 };
	static const long cond_calls[] = { SYS_futex, -1 };
	/* sockets before libfabric 1.22: its own timed counter wait returns at once (its deadline
	 * on the wrong clock), so rscntr naps 1 ms between pulls instead */
	static const long nap_calls[] = { SYS_clock_nanosleep, SYS_nanosleep, -1 };
	static const long app_poll[] = { SYS_poll, -1 };
	int auto_progress = info->domain_attr->data_progress == FI_PROGRESS_AUTO;
	const long *calls = fd_calls;
	int blocks = 1;
	if (!strcmp(core, "sockets")) {
		naps = fi_version() < FI_VERSION(1, 22);
		calls = naps ? nap_calls : cond_calls;
		blocks = auto_progress;
	} else if (!strcmp(core, "shm")) {
		const char *bell = getenv("FI_RSCNTR_SHM_BELL");
		calls = cond_calls;
		blocks = !bell || strcmp(bell, "0");
	} else if (strstr(core, ";ofi_rxd") || (strstr(core, ";ofi_rxm") && fi_version() < FI_VERSION(1, 18))) {
		naps = 1;
	} else if (strcmp(core, "tcp") && !strstr(core, ";ofi_rxm") && !strstr(core, ";ofi_rxd")) {
		blocks = 0;
	}
	printf("bound_wait: core %s (%s progress): waiters %s\n", core,
	       auto_progress ? "auto" : "manual",
	       blocks ? "must sleep in the core's wait object (shm: the doorbell)"
		      : "yield (nothing to block on)");

	CHECK_RET(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	CHECK_RET(fi_domain(fabric, info, &domain, NULL), 0);
	if (domain) {
		one(info, FI_WAIT_UNSPEC, blocks, calls);
		/* The application sleeps in its own poll() on the counter's fd. */
		one(info, FI_WAIT_FD, blocks, app_poll);
		one(info, FI_WAIT_UNSPEC, blocks, calls);
		one(info, FI_WAIT_YIELD, 0, calls);
	}
	CHECK_RET(fi_close(&domain->fid), 0);

	struct fi_info *serial = fi_dupinfo(info);
	serial->domain_attr->threading = FI_THREAD_DOMAIN;
	domain = NULL;
	CHECK_RET(fi_domain(fabric, serial, &domain, NULL), 0);
	if (domain) {
		printf("bound_wait: an FD counter in an FI_THREAD_DOMAIN domain\n");
		serialize = 1;
		one(serial, FI_WAIT_FD, blocks, app_poll);
		serialize = 0;
		CHECK_RET(fi_close(&domain->fid), 0);
	}
	fi_freeinfo(serial);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	return finish("bound_wait");
}
