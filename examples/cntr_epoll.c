/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Sleep in epoll_wait() on two rscntr counters and a pipe, as an event loop would.
 *
 * A second thread counts "sends" on one FI_WAIT_FD counter and "receives" on another, then
 * writes 'q' to a pipe. The main thread registers both counters' fds and the pipe with one epoll
 * instance and sleeps until both counters reach their targets and the 'q' has arrived.
 *
 * One fi_trywait() call prepares every counter fd before each epoll_wait():
 *
 *     struct fid *fids[] = { &tx->fid, &rx->fid };
 *     if (fi_trywait(fabric, fids, 2) == FI_SUCCESS)
 *             epoll_wait(...);            no change since the last fi_trywait: safe to sleep
 *     else if -FI_EAGAIN                  a counter changed: read the counters, then try again
 *
 * Level-triggered epoll (the default) is right here: a counter's fd stays readable from the
 * change that signalled it until the next fi_trywait drains it. Never read() the fd yourself.
 *
 * Build: cc cntr_epoll.c -o cntr_epoll $(pkg-config --cflags --libs libfabric) -pthread
 * Run:   FI_PROVIDER=rscntr ./cntr_epoll
 *        (add FI_PROVIDER_PATH=<directory of librscntr-fi.so> unless rscntr is installed in
 *        libfabric's provider directory). Exits 0 when every check passes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define SENDS 40            /* tx gets +1 per send, rx gets +2 per receive */
#define TIMEOUT_MS 10000

enum { TAG_TX, TAG_RX, TAG_PIPE };

static struct fid_cntr *tx, *rx;
static int pipe_fds[2];

#define DIE(...)                                                                          \
	do {                                                                              \
		fprintf(stderr, "cntr_epoll: FAIL: " __VA_ARGS__);                        \
		fprintf(stderr, "\n");                                                    \
		exit(1);                                                                  \
	} while (0)

static void *worker(void *arg)
{
	(void) arg;
	for (int i = 0; i < SENDS; i++) {
		usleep(1000);
		if (fi_cntr_add(tx, 1) || fi_cntr_add(rx, 2))
			DIE("fi_cntr_add");
	}
	if (write(pipe_fds[1], "q", 1) != 1)
		DIE("write to the pipe: %s", strerror(errno));
	return NULL;
}

static struct fid_cntr *open_fd_cntr(struct fid_domain *domain, int *fd)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD };
	struct fid_cntr *c;
	int ret;

	if ((ret = fi_cntr_open(domain, &attr, &c, NULL)))
		DIE("fi_cntr_open: %s", fi_strerror(-ret));
	if ((ret = fi_control(&c->fid, FI_GETWAIT, fd)))
		DIE("fi_control(FI_GETWAIT): %s", fi_strerror(-ret));
	return c;
}

static void watch(int epfd, int fd, uint32_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev))
		DIE("epoll_ctl: %s", strerror(errno));
}

int main(void)
{
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	int tx_fd, rx_fd, epfd, ret, quit = 0, wakeups[3] = { 0 };
	pthread_t thread;

	hints = fi_allocinfo();
	if (!hints)
		DIE("fi_allocinfo");
	hints->fabric_attr->prov_name = strdup("rscntr");
	ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &info);
	if (ret)
		DIE("fi_getinfo: %s (is rscntr installed, or FI_PROVIDER_PATH set?)", fi_strerror(-ret));
	if ((ret = fi_fabric(info->fabric_attr, &fabric, NULL)) ||
	    (ret = fi_domain(fabric, info, &domain, NULL)))
		DIE("fi_fabric/fi_domain: %s", fi_strerror(-ret));

	tx = open_fd_cntr(domain, &tx_fd);
	rx = open_fd_cntr(domain, &rx_fd);
	if (pipe(pipe_fds))
		DIE("pipe: %s", strerror(errno));
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		DIE("epoll_create1: %s", strerror(errno));
	watch(epfd, tx_fd, TAG_TX);
	watch(epfd, rx_fd, TAG_RX);
	watch(epfd, pipe_fds[0], TAG_PIPE);

	if (pthread_create(&thread, NULL, worker, NULL))
		DIE("pthread_create");

	struct fid *fids[] = { &tx->fid, &rx->fid };
	while (!quit || fi_cntr_read(tx) < SENDS || fi_cntr_read(rx) < 2 * SENDS) {
		ret = fi_trywait(fabric, fids, 2);
		if (ret == -FI_EAGAIN)
			continue; /* a counter changed: the loop condition reads them again */
		if (ret)
			DIE("fi_trywait: %s", fi_strerror(-ret));

		struct epoll_event events[3];
		int n = epoll_wait(epfd, events, 3, TIMEOUT_MS);
		if (n < 0 && errno != EINTR)
			DIE("epoll_wait: %s", strerror(errno));
		if (n == 0)
			DIE("no wakeup within %d ms (tx %lu, rx %lu, quit %d)", TIMEOUT_MS,
			    (unsigned long) fi_cntr_read(tx), (unsigned long) fi_cntr_read(rx), quit);
		for (int i = 0; i < n; i++) {
			uint32_t tag = events[i].data.u32;
			wakeups[tag]++;
			if (tag == TAG_PIPE) {
				char c;
				if (read(pipe_fds[0], &c, 1) == 1 && c == 'q')
					quit = 1;
			}
		}
	}
	pthread_join(thread, NULL);

	if (fi_cntr_read(tx) != SENDS || fi_cntr_read(rx) != 2 * SENDS)
		DIE("tx %lu rx %lu, expected %d and %d", (unsigned long) fi_cntr_read(tx),
		    (unsigned long) fi_cntr_read(rx), SENDS, 2 * SENDS);
	if (!wakeups[TAG_TX] && !wakeups[TAG_RX])
		DIE("epoll_wait never woke up for a counter");
	if (wakeups[TAG_PIPE] != 1)
		DIE("%d wakeups for the pipe, expected 1", wakeups[TAG_PIPE]);

	printf("cntr_epoll: tx %d, rx %d; epoll woke %d times for tx, %d for rx, once for the "
	       "pipe: PASS\n", SENDS, 2 * SENDS, wakeups[TAG_TX], wakeups[TAG_RX]);

	close(epfd);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	fi_close(&tx->fid); /* closes the counters' fds too */
	fi_close(&rx->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
