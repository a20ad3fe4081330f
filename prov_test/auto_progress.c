/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Automatic data progress over a core (FI_RSCNTR_CORE): data reaches a receive buffer while
 * the receiving process makes no libfabric call at all.
 *
 * Two processes (fork, addresses exchanged over pipes). The receiver posts one receive of
 * 1 MiB, tells the sender, then only watches its buffer's memory for up to 3 s (1 s for manual
 * progress; no libfabric
 * call: a call would drive the core's progress itself); the sender sends 1 MiB. Over shm such
 * a message moves when the receiver's progress runs (it reads the sender's memory), over tcp
 * when the receiver's progress copies it out of the socket.
 *
 * | part   | checks                                                                          |
 * |--------|---------------------------------------------------------------------------------|
 * | info   | hints with data_progress FI_PROGRESS_AUTO get infos that say AUTO               |
 * | auto   | the domain opened from such an info: the buffer fills while the receiver sleeps; |
 * |        | then both completions arrive, the data is right                                 |
 * | manual | (cores that offer manual progress) the same with FI_PROGRESS_MANUAL: the buffer |
 * |        | does not fill while the receiver sleeps (so the auto part can fail), then does  |
 * |        | once it reads its CQ                                                             |
 *
 * The automatic part runs twice where the core has FI_ATOMIC: rxm's own automatic progress
 * thread moves data only for endpoints with FI_ATOMIC (rxm_cm_atomic_progress); without it
 * rscntr drives the domain.
 * Skipped, saying why: FI_RSCNTR_CORE=none, a core without RDM endpoints. A watchdog turns a
 * hang into a failure. RSCNTR_TEST_PROV names another provider to run the same checks on (a
 * core directly).
 */
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include "harness.h"

#define NAME "auto_progress"
#define SIZE (1 << 20)
#define ASLEEP_MS 3000 /* how long the receiver waits for automatic progress */
#define MANUAL_MS 1000 /* how long it waits to see manual progress move nothing */

static const char *prov = "rscntr";

static int getinfo(enum fi_progress progress, uint64_t caps, struct fi_info **info)
{
	struct fi_info *hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup(prov);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->data_progress = progress;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	int ret = fi_getinfo(pt_api_at_most(FI_VERSION(2, 0)), NULL, NULL, 0, hints, info);
	fi_freeinfo(hints);
	/* the provider itself: a core's name also brings the layerings over it */
	while (!ret && *info && strcmp((*info)->fabric_attr->prov_name, prov)) {
		struct fi_info *next = (*info)->next;
		(*info)->next = NULL;
		fi_freeinfo(*info);
		*info = next;
	}
	return ret ? ret : *info ? 0 : -FI_ENODATA;
}

struct side {
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *desc;
	char *buf;
	fi_addr_t peer;
};

static int open_side(struct fi_info *info, struct side *s)
{
	struct fi_av_attr av_attr = { .type = FI_AV_UNSPEC };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	int ret;
	if ((ret = fi_fabric(info->fabric_attr, &s->fabric, NULL)) ||
	    (ret = fi_domain(s->fabric, info, &s->domain, NULL)) ||
	    (ret = fi_av_open(s->domain, &av_attr, &s->av, NULL)) ||
	    (ret = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL)) ||
	    (ret = fi_endpoint(s->domain, info, &s->ep, NULL)) ||
	    (ret = fi_ep_bind(s->ep, &s->av->fid, 0)) ||
	    (ret = fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV)) ||
	    (ret = fi_enable(s->ep)))
		return ret;
	s->buf = calloc(1, SIZE);
	s->desc = NULL;
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		ret = fi_mr_reg(s->domain, s->buf, SIZE, FI_SEND | FI_RECV, 0, 0, 0, &s->mr, NULL);
		if (ret)
			return ret;
		s->desc = fi_mr_desc(s->mr);
	}
	return 0;
}

static void close_side(struct side *s)
{
	if (s->mr)
		fi_close(&s->mr->fid);
	if (s->ep)
		fi_close(&s->ep->fid);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->av)
		fi_close(&s->av->fid);
	if (s->domain)
		fi_close(&s->domain->fid);
	if (s->fabric)
		fi_close(&s->fabric->fid);
	free(s->buf);
}

static void put_all(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t) n)
		_exit(4);
}

static void get_all(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *) p + got, n - got);
		if (r <= 0)
			_exit(4);
		got += r;
	}
}

/* Reads the CQ until one completion (or an error), for at most 10 s. */
static int complete_one(struct fid_cq *cq)
{
	struct fi_cq_entry e;
	double t0 = now_ms();
	while (now_ms() - t0 < 10000) {
		ssize_t r = fi_cq_read(cq, &e, 1);
		if (r == 1)
			return 0;
		if (r != -FI_EAGAIN)
			return (int) r;
	}
	return -FI_ETIMEDOUT;
}

/* One process of a run: the receiver reports (by exit status) whether its buffer filled while
 * it slept, the sender whether its send completed. 0 filled/done, 1 not filled, 2 failed. */
static int run_side(int receiver, struct fi_info *info, int rd, int wr)
{
	int asleep_ms = info->domain_attr->data_progress == FI_PROGRESS_AUTO ? ASLEEP_MS : MANUAL_MS;
	struct side s = { 0 };
	int ret = open_side(info, &s);
	if (ret) {
		fprintf(stderr, NAME ": %s: opening failed: %s\n", receiver ? "receiver" : "sender",
			fi_strerror(-ret));
		return 2;
	}
	char name[256];
	size_t len = sizeof(name);
	if (fi_getname(&s.ep->fid, name, &len))
		return 2;
	put_all(wr, &len, sizeof(len));
	put_all(wr, name, len);
	size_t plen;
	char pname[256];
	get_all(rd, &plen, sizeof(plen));
	if (plen > sizeof(pname))
		return 2;
	get_all(rd, pname, plen);
	if (fi_av_insert(s.av, pname, 1, &s.peer, 0, NULL) != 1)
		return 2;
	int status = 2;
	if (receiver) {
		struct fi_context2 ctx;
		if (POST(fi_recv(s.ep, s.buf, SIZE, s.desc, s.peer, &ctx), s.cq))
			return 2;
		char go = 1;
		put_all(wr, &go, 1);
		/* no libfabric call from here until the buffer filled or the time is up */
		volatile char *last = s.buf + SIZE - 1;
		double t0 = now_ms();
		while (*last != 'z' && now_ms() - t0 < asleep_ms)
			usleep(2000);
		int filled = *last == 'z';
		if (filled)
			printf(NAME ": the buffer filled %.0f ms into the receiver's sleep\n", now_ms() - t0);
		ret = complete_one(s.cq);
		int right = 1;
		for (size_t i = 0; i < SIZE; i++)
			right &= s.buf[i] == (char) ('a' + i % 26) || (i == SIZE - 1 && s.buf[i] == 'z');
		status = ret ? 2 : !right ? 2 : filled ? 0 : 1;
		if (ret)
			fprintf(stderr, NAME ": receive: %s\n", fi_strerror(-ret));
		if (!right)
			fprintf(stderr, NAME ": the received data is wrong\n");
		put_all(wr, &go, 1); /* done: the sender may close */
	} else {
		for (size_t i = 0; i < SIZE; i++)
			s.buf[i] = (char) ('a' + i % 26);
		s.buf[SIZE - 1] = 'z';
		char go;
		get_all(rd, &go, 1);
		struct fi_context2 ctx;
		ret = POST(fi_send(s.ep, s.buf, SIZE, s.desc, s.peer, &ctx), s.cq);
		if (!ret)
			ret = complete_one(s.cq);
		if (ret)
			fprintf(stderr, NAME ": send: %s\n", fi_strerror(-ret));
		get_all(rd, &go, 1);
		status = ret ? 2 : 0;
	}
	close_side(&s);
	return status;
}

static struct fi_info *info_for(enum fi_progress progress, int atomic);

/* A receiver and a sender in two processes, each with its own info for `progress` (an info
 * carries its process's shm name), with FI_ATOMIC where the core has it when `atomic`;
 * returns the receiver's status (see run_side). */
static int run_pair(enum fi_progress progress, int atomic)
{
	int to_send[2], to_recv[2];
	if (pipe(to_send) || pipe(to_recv))
		return 2;
	fflush(stdout);
	pid_t pids[2];
	for (int r = 0; r < 2; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			alarm(60);
			struct fi_info *info = info_for(progress, atomic);
			if (!info)
				_exit(2);
			int st = r ? run_side(1, info, to_recv[0], to_send[1])
				   : run_side(0, info, to_send[0], to_recv[1]);
			fi_freeinfo(info);
			fflush(stdout);
			_exit(st);
		}
	}
	int statuses[2] = { 2, 2 };
	for (int r = 0; r < 2; r++) {
		int st;
		if (waitpid(pids[r], &st, 0) == pids[r] && WIFEXITED(st))
			statuses[r] = WEXITSTATUS(st);
	}
	close(to_send[0]), close(to_send[1]), close(to_recv[0]), close(to_recv[1]);
	CHECK(statuses[0] == 0, "the sender failed (%d)", statuses[0]);
	return statuses[1];
}

static struct fi_info *info_for(enum fi_progress progress, int atomic)
{
	struct fi_info *info = NULL;
	/* FI_ATOMIC where the core has it: rxm's own thread moves data only then */
	if ((!atomic || getinfo(progress, FI_MSG | FI_ATOMIC, &info)) &&
	    getinfo(progress, FI_MSG, &info))
		return NULL;
	return info;
}

int main(void)
{
	const char *core = getenv("FI_RSCNTR_CORE");
	if (getenv("RSCNTR_TEST_PROV")) {
		prov = getenv("RSCNTR_TEST_PROV");
		core = prov;
	}
	signal(SIGALRM, SIG_DFL);
	alarm(120);
	if (core && !strcmp(core, "none")) {
		printf(NAME ": FI_RSCNTR_CORE=none, no endpoints: skipped\n");
		return finish(NAME);
	}
	struct fi_info *plain = NULL;
	if (getinfo(FI_PROGRESS_UNSPEC, FI_MSG, &plain)) {
		printf(NAME ": no RDM endpoints over %s: skipped\n", core ? core : "the default core");
		return finish(NAME);
	}
	printf(NAME ": over %s (domain %s)\n", core ? core : "the default core",
	       plain->domain_attr->name);
	fi_freeinfo(plain);

	/* automatic progress for endpoints with FI_ATOMIC (where the core has it), then without */
	struct fi_info *info = NULL;
	for (int atomic = 1; atomic >= 0; atomic--) {
		info = info_for(FI_PROGRESS_AUTO, atomic);
		CHECK(info != NULL, "no info for hints with data_progress FI_PROGRESS_AUTO");
		if (!info)
			break;
		int has_atomic = !!(info->caps & FI_ATOMIC);
		CHECK(info->domain_attr->data_progress == FI_PROGRESS_AUTO, "data_progress %d",
		      info->domain_attr->data_progress);
		fi_freeinfo(info);
		info = NULL;
		if (atomic && !has_atomic)
			continue; /* the same as the run without */
		int st = run_pair(FI_PROGRESS_AUTO, atomic);
		CHECK(st == 0, "automatic progress%s: the data did not arrive while the receiver made "
		      "no calls (%s)", has_atomic ? " (FI_ATOMIC)" : " (FI_MSG only)",
		      st == 1 ? "it arrived once the receiver read its CQ" : "failed");
	}

	/* the parent's infos only look: each child process gets its own */
	info = NULL;
	if (getinfo(FI_PROGRESS_MANUAL, FI_MSG, &info) == 0 &&
	    info->domain_attr->data_progress == FI_PROGRESS_MANUAL) {
		int st = run_pair(FI_PROGRESS_MANUAL, 0);
		CHECK(st == 1, "manual progress: %s", st == 0 ? "the data arrived while the receiver "
		      "made no calls (this test cannot tell automatic progress apart here)" : "failed");
	} else {
		printf(NAME ": no manual progress over this core: the manual part is skipped\n");
	}
	fi_freeinfo(info);
	return finish(NAME);
}
