/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * An endpoint that talked to another endpoint of its own domain is closed, and the next
 * endpoint opened in that domain still works: what an OpenSHMEM library does when a thread
 * creates a context (an endpoint on the PE's domain and AV), puts or adds to its own PE (whose
 * target endpoint is in the same domain), and destroys the context while other threads create
 * theirs (Sandia OpenSHMEM's shmemx/gettid_register).
 *
 * shm maps the memory of a peer endpoint of the same process by pointer, once that peer has
 * sent to it, and keeps the pointer in the AV's map after the peer closed: enabling the next
 * endpoint bound to that AV visits every peer of the map and reads the freed memory (SIGSEGV in
 * smr_map_to_endpoint <- smr_exchange_all_peers <- FI_ENABLE).
 *
 * One run, in a child process (so that a crash is reported, not just suffered), over the core
 * FI_RSCNTR_CORE names directly and over rscntr(core): one fabric, domain, AV (FI_AV_TABLE) and
 * CQ; a long-lived target endpoint whose address is in the AV; then, ROUNDS times, a context
 * endpoint is opened, bound and enabled, sends a message to the target (received there), and
 * is closed. A last endpoint sends too, and everything closes. The run over the core directly is
 * reported (not held against rscntr when the core fails it); over rscntr it must pass.
 *
 * A second run, over rscntr(shm) alone and with automatic progress (which shm alone does not
 * give), for what shm's progress does to the endpoints of one process: endpoints are bound to a CQ and the AV and enabled only 2 ms later,
 * ENABLING times, while another process opens SENDERS endpoints one after the other, each
 * sending one message to this process's target endpoint. rscntr's progress thread maps each new
 * sender as its first message arrives, and shm's mapping visits every endpoint bound to the AV
 * (SIGSEGV in smr_map_to_endpoint <- smr_map_to_region <- smr_ep_progress, Sandia OpenSHMEM's
 * unit/many-ctx), as a CQ's progress visits every endpoint bound to it (SIGSEGV in
 * smr_ep_progress): one bound but not enabled has no region yet. Every message must arrive.
 *
 * FI_RSCNTR_CORE=none (or unset) has nothing to test; a core without FI_EP_RDM messages says so.
 */
#include <stdint.h>
#include <strings.h>
#include <unistd.h>
#include <spawn.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include "harness.h"
#include "child.h"

#define ROUNDS 4
#define ENABLING 80
#define SENDERS 80
#define WAIT_MS 10000.0 /* per completion; never reached when things work */

static struct fi_info *rdm_info_progress(const char *prov, enum fi_progress progress, int *ret)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	hints->caps = FI_MSG;
	hints->domain_attr->data_progress = progress;
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->av_type = FI_AV_TABLE;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov);
	*ret = fi_getinfo(pt_api(), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	return *ret ? NULL : info;
}

static struct fi_info *rdm_info(const char *prov, int *ret)
{
	return rdm_info_progress(prov, FI_PROGRESS_UNSPEC, ret);
}

/* One completion from `cq` within WAIT_MS; 0 or a negative error. */
static int cq_wait(struct fid_cq *cq)
{
	return CQ_WAIT(cq, WAIT_MS);
}

static int open_ep(struct fid_domain *domain, struct fi_info *info, struct fid_av *av,
		   struct fid_cq *cq, struct fid_ep **ep)
{
	int ret;
	if ((ret = fi_endpoint(domain, info, ep, NULL)) ||
	    (ret = fi_ep_bind(*ep, &av->fid, 0)) ||
	    (ret = fi_ep_bind(*ep, &cq->fid, FI_TRANSMIT | FI_RECV)) || (ret = fi_enable(*ep)))
		fprintf(stderr, "opening an endpoint: %d (%s)\n", ret, fi_strerror(-ret));
	return ret;
}

/* What each run opens: fabric, domain, AV (FI_AV_TABLE) and CQ over `prov` with `progress`.
 * 0 or a negative error; `info` stays NULL when there is none for the hints. */
struct side {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
};

static int open_side(struct side *s, const char *prov, enum fi_progress progress)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	int ret;
	s->info = rdm_info_progress(prov, progress, &ret);
	if (!s->info)
		return ret ? ret : -FI_ENODATA;
	if ((ret = fi_fabric(s->info->fabric_attr, &s->fabric, NULL)) ||
	    (ret = fi_domain(s->fabric, s->info, &s->domain, NULL)) ||
	    (ret = fi_av_open(s->domain, &av_attr, &s->av, NULL)) ||
	    (ret = fi_cq_open(s->domain, &cq_attr, &s->cq, NULL)))
		CHECK(0, "opening fabric, domain, AV, CQ over %s: %d (%s)", prov, ret,
		      fi_strerror(-ret));
	return ret;
}

static void close_side(struct side *s)
{
	struct fid *fids[] = { s->cq ? &s->cq->fid : NULL, s->av ? &s->av->fid : NULL,
			       s->domain ? &s->domain->fid : NULL, s->fabric ? &s->fabric->fid : NULL };
	for (size_t i = 0; i < sizeof(fids) / sizeof(fids[0]); i++)
		if (fids[i])
			CHECK_RET(fi_close(fids[i]), 0);
	fi_freeinfo(s->info);
}

/* A message from `from` to the target (fi_addr 0), received there. */
static void one_message(struct fid_ep *target, struct fid_ep *from, struct fid_cq *cq, int round)
{
	char buf[64] = { 0 }, msg[64];
	struct fi_context2 rctx, sctx;
	snprintf(msg, sizeof(msg), "round %d", round);
	CHECK_RET(fi_recv(target, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, &rctx), 0);
	CHECK_RET(POST(fi_send(from, msg, strlen(msg) + 1, NULL, 0, &sctx), cq), 0);
	/* One CQ serves both endpoints: two completions, the send's and the receive's. */
	CHECK_RET(cq_wait(cq), 0);
	CHECK_RET(cq_wait(cq), 0);
	CHECK(!strcmp(buf, msg), "round %d: the target received \"%.*s\"", round, (int) sizeof(buf),
	      buf);
}

/* The child: everything in one process, over `prov`. Exit 0 when every check passed. */
static int run(const char *prov)
{
	struct side s = { 0 };
	struct fid_ep *target = NULL, *ep = NULL;
	char addr[256];
	size_t addrlen = sizeof(addr);
	fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;

	setvbuf(stdout, NULL, _IOLBF, 0); /* what was printed survives a crash */
	int ret = open_side(&s, prov, FI_PROGRESS_UNSPEC);
	if (!s.info) {
		printf("%s: no FI_EP_RDM info: %d (%s)\n", prov, ret, fi_strerror(-ret));
		return 3;
	}
	printf("%s: provider %s, fabric %s\n", prov, s.info->fabric_attr->prov_name,
	       s.info->fabric_attr->name);
	if (ret)
		goto out;
	struct fid_domain *domain = s.domain;
	struct fid_av *av = s.av;
	struct fid_cq *cq = s.cq;
	struct fi_info *info = s.info;
	CHECK_RET(open_ep(domain, info, av, cq, &target), 0);
	CHECK_RET(fi_getname(&target->fid, addr, &addrlen), 0);
	CHECK_RET(fi_av_insert(av, addr, 1, &fi_addr, 0, NULL), 1);
	CHECK(fi_addr == 0, "the target's fi_addr is %llu, expected 0", (unsigned long long) fi_addr);
	if (fi_addr != 0)
		goto out;

	for (int round = 0; round <= ROUNDS; round++) {
		ret = open_ep(domain, info, av, cq, &ep);
		CHECK(ret == 0, "round %d: the context endpoint: %d", round, ret);
		if (ret)
			goto out;
		one_message(target, ep, cq, round);
		if (round == ROUNDS)
			break;
		CHECK_RET(fi_close(&ep->fid), 0);
		ep = NULL;
		printf("%s: round %d: a context endpoint sent to the target and closed\n", prov, round);
	}
	printf("%s: %d context endpoints opened after one that talked to the target closed\n", prov,
	       ROUNDS);
out:
	if (ep)
		CHECK_RET(fi_close(&ep->fid), 0);
	if (target)
		CHECK_RET(fi_close(&target->fid), 0);
	close_side(&s);
	return finish("local_peer_close child");
}

/* The sending process: SENDERS endpoints, one after the other, each sends one message to the
 * target whose address LOCAL_PEER_TARGET holds (hex) and closes. */
static int run_senders(void)
{
	struct side s = { 0 };
	const char *hex = getenv("LOCAL_PEER_TARGET");
	unsigned char addr[256];
	size_t len = 0;
	fi_addr_t target = FI_ADDR_NOTAVAIL;
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (hex && hex[2 * len] && hex[2 * len + 1] && len < sizeof(addr)) {
		unsigned v;
		sscanf(hex + 2 * len, "%2x", &v);
		addr[len++] = (unsigned char) v;
	}
	CHECK(len > 0, "LOCAL_PEER_TARGET holds no address");
	if (!len || open_side(&s, "rscntr", FI_PROGRESS_AUTO))
		goto out;
	CHECK_RET(fi_av_insert(s.av, addr, 1, &target, 0, NULL), 1);
	int sent = 0;
	for (int i = 0; i < SENDERS && target != FI_ADDR_NOTAVAIL; i++) {
		struct fid_ep *ep = NULL;
		struct fi_context2 ctx;
		char msg[32];
		snprintf(msg, sizeof(msg), "sender %d", i);
		if (open_ep(s.domain, s.info, s.av, s.cq, &ep))
			break;
		ssize_t r = POST(fi_send(ep, msg, strlen(msg) + 1, NULL, target, &ctx), s.cq);
		CHECK(r == 0, "sender %d: fi_send: %zd", i, r);
		if (r == 0) {
			r = cq_wait(s.cq);
			CHECK(r == 0, "sender %d: its send's completion: %zd", i, r);
			sent += r == 0;
		}
		CHECK_RET(fi_close(&ep->fid), 0);
		if (r != 0)
			break; /* the receiver is gone: each further send would wait its 10 s */
		usleep(1000); /* spread over the receiver's enables */
	}
	printf("senders: %d of %d endpoints sent their message and closed\n", sent, SENDERS);
out:
	close_side(&s);
	return finish("local_peer_close senders");
}

/* The receiving process of the second run: its target endpoint receives the senders' messages
 * while endpoints are bound to the AV and enabled 2 ms later. */
static int run_bound_while_mapping(void)
{
	struct side s = { 0 };
	struct fid_ep *target = NULL;
	static char bufs[SENDERS][32];
	static struct fi_context2 ctxs[SENDERS];
	char addr[256], hex[2 * sizeof(addr) + 32];
	size_t addrlen = sizeof(addr);
	pid_t pid = -1;
	int received = 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (open_side(&s, "rscntr", FI_PROGRESS_AUTO))
		goto out;
	printf("rscntr over %s, data progress %d\n", s.info->fabric_attr->name,
	       s.info->domain_attr->data_progress);
	if (open_ep(s.domain, s.info, s.av, s.cq, &target))
		goto out;
	for (int i = 0; i < SENDERS; i++)
		CHECK_RET(fi_recv(target, bufs[i], sizeof(bufs[i]), NULL, FI_ADDR_UNSPEC, &ctxs[i]), 0);
	CHECK_RET(fi_getname(&target->fid, addr, &addrlen), 0);
	int n = snprintf(hex, sizeof(hex), "LOCAL_PEER_TARGET=");
	for (size_t i = 0; i < addrlen && i < sizeof(addr); i++)
		n += snprintf(hex + n, sizeof(hex) - n, "%02x", (unsigned char) addr[i]);
	char *argv[] = { self_path, "--senders", NULL };
	size_t n_env = 0;
	while (environ[n_env])
		n_env++;
	char **envp = calloc(n_env + 2, sizeof(char *));
	memcpy(envp, environ, n_env * sizeof(char *));
	envp[n_env] = hex;
	CHECK(posix_spawn(&pid, self_path, NULL, NULL, argv, envp) == 0, "spawning the senders");
	free(envp);
	/* The first half of the endpoints enabled meanwhile have a CQ of their own, as OpenSHMEM's
	 * contexts do: the target's CQ is driven while they are bound to the AV and not enabled.
	 * The second half share the target's CQ: it is driven up to their bind. */
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE };
	struct fid_cq *own_cq = NULL;
	CHECK_RET(fi_cq_open(s.domain, &cq_attr, &own_cq, NULL), 0);
	for (int i = 0; i < ENABLING && own_cq; i++) {
		struct fid_ep *ep = NULL;
		int r = fi_endpoint(s.domain, s.info, &ep, NULL);
		CHECK(r == 0, "endpoint %d: fi_endpoint: %d", i, r);
		if (r)
			break;
		CHECK_RET(fi_ep_bind(ep, i < ENABLING / 2 ? &own_cq->fid : &s.cq->fid,
				     FI_TRANSMIT | FI_RECV), 0);
		CHECK_RET(fi_ep_bind(ep, &s.av->fid, 0), 0);
		usleep(2000); /* bound to the AV, not enabled: the window */
		CHECK_RET(fi_enable(ep), 0);
		CHECK_RET(fi_close(&ep->fid), 0);
	}
	if (own_cq)
		CHECK_RET(fi_close(&own_cq->fid), 0);
	while (received < SENDERS && cq_wait(s.cq) == 0)
		received++;
	CHECK(received == SENDERS, "%d of %d messages received", received, SENDERS);
	printf("%d endpoints bound and enabled while %d of %d senders' messages arrived\n", ENABLING,
	       received, SENDERS);
out:
	if (pid > 0) {
		int status = 0;
		double t0 = now_ms();
		while (waitpid(pid, &status, WNOHANG) == 0) {
			if (now_ms() - t0 > 60000) {
				kill(pid, SIGKILL);
				waitpid(pid, &status, 0);
				break;
			}
			usleep(10000);
		}
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the senders' process: status %#x",
		      status);
	}
	if (target)
		CHECK_RET(fi_close(&target->fid), 0);
	close_side(&s);
	return finish("local_peer_close bound while mapping");
}

/* A run over rscntr, in a child: it must exit 0 (not be killed by a signal: a crash in the core)
 * and print `done`; its output is shown when not. */
static void held_run(const char *mode, const char *const *extra, int timeout_s, const char *core,
		     const char *what, const char *done)
{
	static char out[65536];
	int rc = run_self(mode, extra, out, sizeof(out), timeout_s);
	printf("local_peer_close: %s (%s): exit %d\n", what, core, rc);
	CHECK(rc == 0, "%s (%s): the run exited %d%s", what, core, rc,
	      rc > 128 ? " (killed by a signal)" : "");
	CHECK(strstr(out, done) != NULL, "%s (%s): the run did not finish", what, core);
	if (rc != 0 || !strstr(out, done))
		show_child(what, out);
}

int main(int argc, char **argv)
{
	const char *core = getenv("FI_RSCNTR_CORE");
	if (child_init()) {
		fprintf(stderr, "cannot resolve /proc/self/exe\n");
		return 1;
	}
	if (argc > 1 && !strcmp(argv[1], "--run"))
		return run(getenv("LOCAL_PEER_CLOSE_PROV"));
	if (argc > 1 && !strcmp(argv[1], "--senders"))
		return run_senders();
	if (argc > 1 && !strcmp(argv[1], "--bound-while-mapping"))
		return run_bound_while_mapping();
	printf("local_peer_close: FI_RSCNTR_CORE=%s\n", core ? core : "(unset)");
	if (!core || !*core || !strcasecmp(core, "none") || !strcasecmp(core, "auto")) {
		printf("local_peer_close: no core named: nothing to test\n");
		return finish("local_peer_close");
	}
	int ret;
	struct fi_info *info = rdm_info("rscntr", &ret);
	if (!info) {
		printf("local_peer_close: no FI_EP_RDM messages over %s (%d, %s): nothing to test\n",
		       core, ret, fi_strerror(-ret));
		return finish("local_peer_close");
	}
	fi_freeinfo(info);

	static char out[65536];
	char prov_env[128];
	snprintf(prov_env, sizeof(prov_env), "LOCAL_PEER_CLOSE_PROV=%s", core);
	const char *direct[] = { prov_env, "FI_PROVIDER", NULL };
	int rc = run_self("--run", direct, out, sizeof(out), 120);
	printf("local_peer_close: %s directly: exit %d%s\n", core, rc,
	       rc > 128 ? " (killed by a signal)" : "");
	if (rc != 0)
		show_child("the run over the core directly (not held against rscntr)", out);

	const char *layered[] = { "LOCAL_PEER_CLOSE_PROV=rscntr", NULL };
	held_run("--run", layered, 120, core, "rscntr over the core",
		 "context endpoints opened after one that talked");

	/* The second run: rscntr's automatic progress maps senders while endpoints are bound, over
	 * shm (the visits of bound endpoints are shm's). */
	if (strcasecmp(core, "shm")) {
		printf("local_peer_close: second run made over shm only\n");
		return finish("local_peer_close");
	}
	info = rdm_info_progress("rscntr", FI_PROGRESS_AUTO, &ret);
	if (!info) {
		printf("local_peer_close: no automatic progress over rscntr(%s): second run not made\n",
		       core);
		return finish("local_peer_close");
	}
	fi_freeinfo(info);
	const char *layered_only[] = { NULL };
	held_run("--bound-while-mapping", layered_only, 180, core,
		 "endpoints bound while rscntr maps senders", "endpoints bound and enabled while");
	return finish("local_peer_close");
}
