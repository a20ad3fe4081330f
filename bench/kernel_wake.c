/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * One kernel wake between two processes, the yardstick of issue 27's goal for the idle wake
 * over shm ("within one kernel wake of the core's spinning median"): the shape of
 * bound_wake.c's idle wake without libfabric. The process forks; the parent blocks in recv() on
 * an AF_UNIX datagram socket; the child idles I ms (plus a random 0-1 ms) after the parent says
 * it waits, then sends 8 bytes carrying its CLOCK_MONOTONIC time. Wake latency = the parent's
 * clock when recv() returns - the time in the datagram.
 *
 *   kernel_wake [-n samples] [-I idle ms]
 *
 * Prints "kwake_us <median> <p99> <max> n=<samples>", or "noresult <why>". Every recv is
 * bounded (2 s); the program never judges timing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t) t.tv_sec * 1000000000ull + (uint64_t) t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;
	return (x > y) - (x < y);
}

/* recv with a bound: the bytes received, or -1 */
static ssize_t recv_bounded(int fd, void *buf, size_t len, int ms)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		ssize_t n = recv(fd, buf, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		return n;
	}
}

int main(int argc, char **argv)
{
	int samples = 300, idle_ms = 20, opt;
	while ((opt = getopt(argc, argv, "n:I:")) != -1) {
		switch (opt) {
		case 'n': samples = atoi(optarg); break;
		case 'I': idle_ms = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-n samples] [-I idle ms]\n", argv[0]);
			return 2;
		}
	}
	if (samples < 1 || idle_ms < 0 || idle_ms > 10000) {
		fprintf(stderr, "-n positive, -I 0 to 10000 ms\n");
		return 2;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) { /* the sender */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		unsigned seed = (unsigned) getpid() ^ (unsigned) now_ns();
		char c;
		while (recv_bounded(sv[1], &c, 1, 5000) == 1 && c == 'w') {
			long ns = idle_ms * 1000000L + (long) (rand_r(&seed) % 1000001);
			struct timespec idle = { ns / 1000000000L, ns % 1000000000L };
			nanosleep(&idle, NULL);
			uint64_t t = now_ns();
			if (send(sv[1], &t, sizeof(t), 0) != sizeof(t))
				break;
		}
		_exit(0);
	}
	double *lat = calloc((size_t) samples, sizeof(double));
	const char *why = NULL;
	int n = 0;
	while (n < samples) {
		char c = 'w';
		uint64_t t;
		if (send(sv[0], &c, 1, 0) != 1) {
			why = "send failed";
			break;
		}
		if (recv_bounded(sv[0], &t, sizeof(t), 2000 + idle_ms) != sizeof(t)) {
			why = "no datagram within the bound";
			break;
		}
		lat[n++] = (double) (now_ns() - t) / 1000.0;
	}
	char c = 'q';
	(void) !send(sv[0], &c, 1, 0);
	waitpid(child, NULL, 0);
	if (why) {
		printf("noresult %s after %d of %d samples\n", why, n, samples);
		return 0;
	}
	qsort(lat, (size_t) n, sizeof(double), cmp_double);
	printf("kwake_us %.2f %.2f %.2f n=%d\n", lat[n / 2], lat[(int) (n * 0.99)], lat[n - 1], n);
	free(lat);
	return 0;
}
