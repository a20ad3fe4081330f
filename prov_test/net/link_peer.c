/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * One side of a stream of messages over rscntr (RDM endpoint over its core, FI_RSCNTR_CORE,
 * tcp in link_cut.sh), counted by rscntr counters bound to the endpoints. Used by
 * prov_test/net/link_cut.sh between two network namespaces whose link it cuts.
 *
 *   link_peer server <addr> <port> <idle_s>
 *       receives until nothing arrived for idle_s seconds (after a first message), waiting on
 *       its receive counter with 500 ms timeouts; prints "server: received N".
 *   link_peer client <addr> <port> <count> <mode>
 *       sends <count> messages (a window of 8 in flight, FI_DELIVERY_COMPLETE: a send
 *       completes once the server has it), waiting on its send counter with 500 ms timeouts;
 *       each timed-out wait lets one more send go (an application that keeps sending).
 *       mode "clean": every send must complete, no error, no -FI_EAVAIL.
 *       mode "cut": the link goes down during the run (the script cuts it after the client
 *       prints "client: progress", at a tenth of count or 20000 completions); the client must then see the sends complete in error
 *       (error entries on the CQ, each counted: readerr = their number, > 0), its waits
 *       return -FI_ETIMEDOUT or -FI_EAVAIL, and it stops once errors showed, within a
 *       deadline: nothing hangs. With RSCNTR_CORE_SKIPS_FLUSHED set (the tcp core: see
 *       below) readerr may count fewer than the CQ shows, never more.
 * Every wait has a timeout; a watchdog (alarm) turns a hang into exit code 3. Exit 0 on
 * success, 1 on a failed check.
 *
 * Each fi_cntr_wait is timed: both sides print how many waits there were, the longest one and
 * how many took longer than their timeout plus LINK_PEER_SLACK_MS (50); with
 * LINK_PEER_CHECK_WAITS set a late wait, or a -FI_ETIMEDOUT before the timeout, is a failed
 * check (prov_test/net/faults.sh). LINK_PEER_DEADLINE_S (90) bounds a cut run. The
 * provider asked for is LINK_PEER_PROV (default rscntr): faults.sh runs the core directly too.
 */
#include <signal.h>
#include <stdint.h>
#include <unistd.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include "../harness.h"

#define SIZE 64
#define WINDOW 8
static double cut_deadline_ms = 90000.0; /* LINK_PEER_DEADLINE_S */
#define WAIT_MS 500

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cq;
static struct fid_ep *ep;
static struct fid_cntr *cntr;
static char buf[WINDOW][SIZE];

/* every fi_cntr_wait, timed against its timeout */
static uint64_t waits, late_waits, early_timeouts, met_at_timeout;
static double longest_wait_ms, slack_ms = 50;

static int timed_wait(uint64_t threshold)
{
	double t0 = now_ms();
	int ret = fi_cntr_wait(cntr, threshold, WAIT_MS);
	double d = now_ms() - t0;
	waits++;
	if (d > longest_wait_ms)
		longest_wait_ms = d;
	if (d > WAIT_MS + slack_ms)
		late_waits++;
	if (ret == -FI_ETIMEDOUT && d < WAIT_MS - 1)
		early_timeouts++;
	/* the threshold met when a wait timed out: a wake-up missed, or a completion only the
	 * read's own progress made (a core with manual progress), or one just in time */
	if (ret == -FI_ETIMEDOUT && fi_cntr_read(cntr) >= threshold)
		met_at_timeout++;
	return ret;
}

static void check_waits(const char *who)
{
	printf("%s: %lu waits (timeout %d ms), longest %.1f ms, %lu -FI_ETIMEDOUT with the threshold met after, "
	       "%lu -FI_ETIMEDOUT early, %lu past the timeout + %.0f ms\n",
	       who, (unsigned long) waits, WAIT_MS, longest_wait_ms, (unsigned long) met_at_timeout,
	       (unsigned long) early_timeouts, (unsigned long) late_waits, slack_ms);
	if (getenv("LINK_PEER_CHECK_WAITS")) {
		CHECK(late_waits == 0, "%lu waits slept past their timeout + %.0f ms (longest %.1f ms)",
		      (unsigned long) late_waits, slack_ms, longest_wait_ms);
		CHECK(early_timeouts == 0, "%lu waits returned -FI_ETIMEDOUT before their timeout",
		      (unsigned long) early_timeouts);
	}
}

static void on_alarm(int sig)
{
	(void) sig;
	static const char msg[] = "link_peer: HANG (watchdog fired)\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	(void) r;
	_exit(3);
}

static int setup(const char *node, const char *port, int server)
{
	struct fi_info *hints = fi_allocinfo();
	const char *prov = getenv("LINK_PEER_PROV");
	hints->fabric_attr->prov_name = strdup(prov && *prov ? prov : "rscntr");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	int ret = fi_getinfo(fi_version(), node, port, server ? FI_SOURCE : 0, hints, &info);
	fi_freeinfo(hints);
	CHECK_RET(ret, 0);
	if (ret)
		return ret;
	const char *core = getenv("FI_RSCNTR_CORE");
	printf("%s: %s over %s, fabric %s\n", server ? "server" : "client", info->fabric_attr->prov_name,
	       strcmp(info->fabric_attr->prov_name, "rscntr") ? "nothing (the core directly)" : core ? core : "the default core",
	       info->fabric_attr->name);
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 256 };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	if ((ret = fi_fabric(info->fabric_attr, &fabric, NULL)) || (ret = fi_domain(fabric, info, &domain, NULL)) ||
	    (ret = fi_av_open(domain, &av_attr, &av, NULL)) || (ret = fi_cq_open(domain, &cq_attr, &cq, NULL)) ||
	    (ret = fi_cntr_open(domain, &cntr_attr, &cntr, NULL)) || (ret = fi_endpoint(domain, info, &ep, NULL)) ||
	    (ret = fi_ep_bind(ep, &av->fid, 0)) ||
	    (ret = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION)) ||
	    (ret = fi_ep_bind(ep, &cntr->fid, server ? FI_RECV : FI_SEND)) || (ret = fi_enable(ep))) {
		CHECK_RET(ret, 0);
		return ret;
	}
	return 0;
}

static void teardown(void)
{
	CHECK_RET(fi_close(&ep->fid), 0);
	CHECK_RET(fi_close(&cntr->fid), 0);
	CHECK_RET(fi_close(&cq->fid), 0);
	CHECK_RET(fi_close(&av->fid), 0);
	CHECK_RET(fi_close(&domain->fid), 0);
	CHECK_RET(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
}

/* Error entries on the CQ: how many, and the first one's error. */
static int drain_cq_errors(int *first_err)
{
	int n = 0;
	for (;;) {
		struct fi_cq_entry e[16];
		ssize_t r = fi_cq_read(cq, e, 16);
		if (r > 0)
			continue;
		if (r != -FI_EAVAIL)
			return n;
		struct fi_cq_err_entry err = { 0 };
		if (fi_cq_readerr(cq, &err, 0) != 1)
			return n;
		if (!n++)
			*first_err = err.err;
	}
}

static int server(const char *node, const char *port, int idle_s)
{
	if (setup(node, port, 1))
		return finish("server");
	uint64_t posted = 0, got = 0, timeouts = 0, eavail = 0;
	double last = now_ms(), start = now_ms();
	for (; posted < WINDOW; posted++)
		CHECK_RET(fi_recv(ep, buf[posted % WINDOW], SIZE, NULL, FI_ADDR_UNSPEC, NULL), 0);
	printf("server: ready\n");
	fflush(stdout);
	for (;;) {
		int ret = timed_wait(got + 1);
		if (ret == 0) {
			uint64_t now = fi_cntr_read(cntr);
			for (; got < now; got++, posted++)
				CHECK_RET(fi_recv(ep, buf[posted % WINDOW], SIZE, NULL, FI_ADDR_UNSPEC, NULL), 0);
			last = now_ms();
		} else if (ret == -FI_ETIMEDOUT) {
			timeouts++;
		} else if (ret == -FI_EAVAIL) {
			eavail++;
		} else {
			CHECK(0, "fi_cntr_wait returned %d", ret);
			break;
		}
		/* idle: after the first message, or before any for long */
		if (now_ms() - last > idle_s * 1000.0 && (got || now_ms() - start > 4 * idle_s * 1000.0))
			break;
	}
	int first_err = 0;
	int cq_errs = drain_cq_errors(&first_err);
	printf("server: received %lu, %lu -FI_ETIMEDOUT, %lu -FI_EAVAIL, readerr %lu, %d CQ errors\n",
	       (unsigned long) got, (unsigned long) timeouts, (unsigned long) eavail,
	       (unsigned long) fi_cntr_readerr(cntr), cq_errs);
	CHECK(got > 0, "received nothing");
	check_waits("server");
	/* the posted receives are cancelled by the close */
	teardown();
	return finish("server");
}

/* now_ms(), and the wall clock printed: the script measures from the moment it cut the link */
static double first_error_seen(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	printf("client: first error seen at %ld.%09ld\n", (long) ts.tv_sec, ts.tv_nsec);
	return now_ms();
}

static int client(const char *node, const char *port, uint64_t count, int cut)
{
	if (setup(node, port, 0))
		return finish("client");
	fi_addr_t peer;
	CHECK_RET(fi_av_insert(av, info->dest_addr, 1, &peer, 0, NULL), 1);
	uint64_t sent = 0, timeouts = 0, eavail = 0, post_errors = 0, window = WINDOW;
	double start = now_ms(), t_first_err = 0;
	int progress_said = 0;
	for (;;) {
		uint64_t done = fi_cntr_read(cntr), errs = fi_cntr_readerr(cntr);
		/* keep WINDOW sends in flight */
		while (sent < count && sent - done - errs < window) {
			ssize_t r = fi_send(ep, buf[sent % WINDOW], SIZE, NULL, peer, NULL);
			if (r == -FI_EAGAIN) {
				struct fi_cq_entry e;
				(void) fi_cq_read(cq, &e, 1); /* progress */
				break;
			}
			if (r) {
				/* a send refused at once (the connection is gone) is a clean error too */
				post_errors++;
				break;
			}
			sent++;
		}
		if (!progress_said && (done >= count / 10 || done >= 20000)) {
			printf("client: progress %lu\n", (unsigned long) done);
			fflush(stdout);
			progress_said = 1;
		}
		if (done + errs >= count)
			break;
		uint64_t target = done + 1;
		int ret = timed_wait(target);
		if (ret == -FI_ETIMEDOUT) {
			timeouts++;
			/* An application keeps sending: one more in flight per stalled wait. Only a
			 * sender with unacknowledged data notices a dead TCP connection (the sends in
			 * flight reached the server; it is the server's acks that are stuck). */
			window++;
		}
		else if (ret == -FI_EAVAIL) {
			eavail++;
			if (!t_first_err)
				t_first_err = first_error_seen();
		} else
			CHECK(ret == 0, "fi_cntr_wait returned %d", ret);
		if (cut) {
			/* once errors are counted, give the rest of the window a moment to fail,
			 * then stop: the connection is gone */
			if ((fi_cntr_readerr(cntr) > 0 || post_errors) && !t_first_err)
				t_first_err = first_error_seen();
			if (t_first_err && now_ms() - t_first_err > 2000)
				break;
			if (now_ms() - start > cut_deadline_ms) {
				CHECK(0, "no error within %.0f s of a cut link", cut_deadline_ms / 1000);
				break;
			}
		}
	}
	uint64_t done = fi_cntr_read(cntr), errs = fi_cntr_readerr(cntr);
	int first_err = 0;
	int cq_errs = drain_cq_errors(&first_err);
	printf("client: sent %lu, completed %lu, readerr %lu, CQ errors %d (first: %s), "
	       "%lu -FI_ETIMEDOUT, %lu -FI_EAVAIL, %lu sends refused, %.1f s\n",
	       (unsigned long) sent, (unsigned long) done, (unsigned long) errs, cq_errs,
	       cq_errs ? fi_strerror(first_err) : "-", (unsigned long) timeouts,
	       (unsigned long) eavail, (unsigned long) post_errors, (now_ms() - start) / 1000);
	check_waits("client");
	if (cut) {
		CHECK(cq_errs > 0, "a cut link left no CQ error entries");
		if (getenv("RSCNTR_CORE_SKIPS_FLUSHED")) {
			/* libfabric's tcp provider (xnet_ep_flush_all_queues, 2.1 to 2.5.1 at
			 * least) reports the operations it cancels when a connection dies on the
			 * CQ only, without counting them in the counters bound to the endpoint:
			 * rscntr never hears of them. What it is told is counted. */
			CHECK(errs <= (uint64_t) cq_errs, "readerr %lu > %d CQ errors", (unsigned long) errs, cq_errs);
			printf("client: readerr %lu of %d CQ errors: the core does not count what it flushes\n",
			       (unsigned long) errs, cq_errs);
		} else {
			CHECK(errs > 0, "a cut link counted no errors");
			CHECK(errs == (uint64_t) cq_errs, "readerr %lu, but %d CQ error entries",
			      (unsigned long) errs, cq_errs);
		}
		CHECK(timeouts + eavail > 0, "no wait saw the cut");
		CHECK(done < count, "everything completed although the link was cut");
	} else {
		CHECK(done == count, "completed %lu of %lu", (unsigned long) done, (unsigned long) count);
		CHECK(errs == 0 && cq_errs == 0 && eavail == 0 && post_errors == 0, "errors on a clean run");
	}
	teardown();
	return finish("client");
}

int main(int argc, char **argv)
{
	signal(SIGALRM, on_alarm);
	const char *slack = getenv("LINK_PEER_SLACK_MS");
	if (slack && *slack)
		slack_ms = atof(slack);
	const char *deadline = getenv("LINK_PEER_DEADLINE_S");
	if (deadline && *deadline)
		cut_deadline_ms = atof(deadline) * 1000;
	alarm(150);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && !strcmp(argv[1], "server"))
		return server(argv[2], argv[3], atoi(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], strtoull(argv[4], NULL, 0), !strcmp(argv[5], "cut"));
	fprintf(stderr, "usage: %s server <addr> <port> <idle_s> | client <addr> <port> <count> clean|cut\n", argv[0]);
	return 2;
}
