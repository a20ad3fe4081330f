/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Sleep in poll() on an rscntr counter's file descriptor and on a pipe at the same time.
 *
 * A second thread adds to an FI_WAIT_FD counter and, halfway through, writes to a pipe. The main
 * thread blocks in poll() on both fds until the counter reaches its target. The pattern:
 *
 *     fi_control(&cntr->fid, FI_GETWAIT, &fd);          once: the counter's eventfd
 *     while (fi_cntr_read(cntr) < target) {
 *             if (fi_trywait(fabric, fids, 1) == FI_SUCCESS)
 *                     poll(fd and your other fds);        nothing changed: safe to sleep
 *             (-FI_EAGAIN: the counter changed since the last fi_trywait; read it again)
 *     }
 *
 * Never read() the counter's fd yourself: fi_trywait drains it and arms it again.
 *
 * Build: cc cntr_poll.c -o cntr_poll $(pkg-config --cflags --libs libfabric) -pthread
 * Run:   FI_PROVIDER=rscntr ./cntr_poll
 *        (add FI_PROVIDER_PATH=<directory of librscntr-fi.so> unless rscntr is installed in
 *        libfabric's provider directory). Exits 0 when every check passes.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define TARGET 50          /* the adder thread adds 1 this many times */
#define POLL_TIMEOUT_MS 10000

static struct fid_cntr *cntr;
static int pipe_fds[2];

#define DIE(...)                                                                          \
	do {                                                                              \
		fprintf(stderr, "cntr_poll: FAIL: " __VA_ARGS__);                         \
		fprintf(stderr, "\n");                                                    \
		exit(1);                                                                  \
	} while (0)

static void *adder(void *arg)
{
	(void) arg;
	for (int i = 1; i <= TARGET; i++) {
		usleep(1000); /* slow enough that the main thread really sleeps */
		if (fi_cntr_add(cntr, 1))
			DIE("fi_cntr_add");
		if (i == TARGET / 2 && write(pipe_fds[1], "x", 1) != 1)
			DIE("write to the pipe: %s", strerror(errno));
	}
	return NULL;
}

int main(void)
{
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD };
	int fd, ret, cntr_wakeups = 0, pipe_bytes = 0;
	pthread_t thread;

	/* Find rscntr and open a fabric and a domain. */
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

	/* An FI_WAIT_FD counter and its fd. */
	if ((ret = fi_cntr_open(domain, &attr, &cntr, NULL)))
		DIE("fi_cntr_open: %s", fi_strerror(-ret));
	if ((ret = fi_control(&cntr->fid, FI_GETWAIT, &fd)))
		DIE("fi_control(FI_GETWAIT): %s", fi_strerror(-ret));
	if (pipe(pipe_fds))
		DIE("pipe: %s", strerror(errno));

	if (pthread_create(&thread, NULL, adder, NULL))
		DIE("pthread_create");

	struct fid *fids[] = { &cntr->fid };
	while (fi_cntr_read(cntr) < TARGET) {
		ret = fi_trywait(fabric, fids, 1);
		if (ret == -FI_EAGAIN)
			continue; /* changed since the last fi_trywait: read before sleeping */
		if (ret)
			DIE("fi_trywait: %s", fi_strerror(-ret));

		struct pollfd pfd[] = { { .fd = fd, .events = POLLIN },
					{ .fd = pipe_fds[0], .events = POLLIN } };
		ret = poll(pfd, 2, POLL_TIMEOUT_MS);
		if (ret < 0 && errno != EINTR)
			DIE("poll: %s", strerror(errno));
		if (ret == 0)
			DIE("no wakeup within %d ms at value %lu", POLL_TIMEOUT_MS,
			    (unsigned long) fi_cntr_read(cntr));
		if (ret > 0 && (pfd[0].revents & POLLIN))
			cntr_wakeups++;
		if (ret > 0 && (pfd[1].revents & POLLIN)) {
			char c;
			if (read(pipe_fds[0], &c, 1) == 1)
				pipe_bytes++;
		}
	}
	pthread_join(thread, NULL);

	/* The pipe byte may still be waiting if the counter finished first. */
	struct pollfd pipe_pfd = { .fd = pipe_fds[0], .events = POLLIN };
	char c;
	if (poll(&pipe_pfd, 1, 0) == 1 && read(pipe_fds[0], &c, 1) == 1)
		pipe_bytes++;

	if (fi_cntr_read(cntr) != TARGET)
		DIE("counter is %lu, expected %d", (unsigned long) fi_cntr_read(cntr), TARGET);
	if (cntr_wakeups == 0)
		DIE("poll() never woke up for the counter");
	if (pipe_bytes != 1)
		DIE("received %d bytes from the pipe, expected 1", pipe_bytes);

	/* Once fi_trywait succeeds the fd stays quiet until the next change. */
	while ((ret = fi_trywait(fabric, fids, 1)) == -FI_EAGAIN)
		;
	struct pollfd cntr_pfd = { .fd = fd, .events = POLLIN };
	if (ret || poll(&cntr_pfd, 1, 0) != 0)
		DIE("the fd is readable although nothing changed after fi_trywait");
	if (fi_cntr_add(cntr, 1) || poll(&cntr_pfd, 1, 0) != 1)
		DIE("the fd is not readable after a change");

	printf("cntr_poll: counter reached %d; poll() woke %d times for the counter, "
	       "once for the pipe: PASS\n", TARGET, cntr_wakeups);

	close(pipe_fds[0]);
	close(pipe_fds[1]);
	fi_close(&cntr->fid); /* closes the fd too: never close() it yourself */
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return 0;
}
