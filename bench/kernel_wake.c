/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * One kernel wake between two processes, the yardstick of the goal for the idle wake
 * over shm ("within one kernel wake of the core's spinning median"): the shape of
 * bound_wake.c's idle wake without libfabric. The process forks; the parent blocks in recv() on
 * an AF_UNIX datagram socket; the child idles I ms (plus a random 0-1 ms) after the parent says
 * it waits, then sends 8 bytes carrying its CLOCK_MONOTONIC time. Wake latency = the parent's
 * clock when recv() returns - the time in the datagram; CPU = the receiving thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) from just before its recv() to just after.
 *
 * With -c, every other sample is two wakes in turn, the shape of a completion for a waiter that
 * does not lead a room over tcp: the thread woken by the datagram wakes a second
 * thread of the parent, asleep in futex(2) as a follower is (event_listener parks on a futex),
 * and goes on. Latency = the second thread's clock when it returns from its sleep - the time in
 * the datagram; CPU = both threads' CPU time across their sleeps. The two kinds alternate, so the
 * machine's drift hits both alike.
 *
 *   kernel_wake [-n samples] [-I idle ms] [-c]
 *
 * Prints "kwake_us <median> <p99> <max> n=<samples> cpu_us <median>", with -c also
 * "chain_us <median> <p99> <max> n=<samples> cpu_us <median>", or "noresult <why>". Every
 * sleep is bounded (2 s); the program never judges timing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t) t.tv_sec * 1000000000ull + (uint64_t) t.tv_nsec;
}

static double thread_cpu_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double) t.tv_sec * 1e6 + (double) t.tv_nsec / 1e3;
}

/* Sleeps while *word == 0, at most ms milliseconds in all; whether *word became non-zero. */
static int futex_wait_nonzero(atomic_int *word, int ms)
{
	uint64_t end = now_ns() + (uint64_t) ms * 1000000ull;
	while (atomic_load(word) == 0) {
		uint64_t t = now_ns();
		if (t >= end)
			return 0;
		struct timespec left = { (time_t) ((end - t) / 1000000000ull), (long) ((end - t) % 1000000000ull) };
		syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 0, &left, NULL, 0);
	}
	return 1;
}

static void futex_wake_one(atomic_int *word)
{
	atomic_store(word, 1);
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* The second thread of a chained sample: sleeps until rung, then reports when it woke and the
 * CPU time its sleep cost it, and rings back (outside anything measured). */
static struct {
	atomic_int ring, back, quit;
	uint64_t woke_ns;
	double cpu_us;
} second;

static void *second_thread(void *arg)
{
	(void) arg;
	for (;;) {
		double c0 = thread_cpu_us();
		if (!futex_wait_nonzero(&second.ring, 5000) || atomic_load(&second.quit))
			return NULL;
		uint64_t t = now_ns();
		second.cpu_us = thread_cpu_us() - c0;
		second.woke_ns = t;
		atomic_store(&second.ring, 0);
		futex_wake_one(&second.back);
	}
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

/* One output line: the median, p99 and max latency and the median CPU of n samples (both arrays
 * sorted in place). */
static void print_line(const char *name, double *lat, double *cpu, int n)
{
	qsort(lat, (size_t) n, sizeof(double), cmp_double);
	qsort(cpu, (size_t) n, sizeof(double), cmp_double);
	printf("%s %.2f %.2f %.2f n=%d cpu_us %.2f\n", name, lat[n / 2], lat[(int) (n * 0.99)], lat[n - 1], n,
	       cpu[n / 2]);
}

int main(int argc, char **argv)
{
	int samples = 300, idle_ms = 20, chain = 0, opt;
	while ((opt = getopt(argc, argv, "n:I:c")) != -1) {
		switch (opt) {
		case 'n': samples = atoi(optarg); break;
		case 'I': idle_ms = atoi(optarg); break;
		case 'c': chain = 1; break;
		default:
			fprintf(stderr, "usage: %s [-n samples] [-I idle ms] [-c]\n", argv[0]);
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
	pthread_t second_tid;
	if (chain && pthread_create(&second_tid, NULL, second_thread, NULL)) {
		fprintf(stderr, "pthread_create failed\n");
		chain = 0;
	}
	double *lat = calloc((size_t) samples, sizeof(double)), *cpu = calloc((size_t) samples, sizeof(double));
	double *clat = calloc((size_t) samples, sizeof(double)), *ccpu = calloc((size_t) samples, sizeof(double));
	const char *why = NULL;
	int n = 0, nc = 0;
	for (int i = 0; n < samples || (chain && nc < samples); i++) {
		int chained = chain && i % 2 == 1;
		char c = 'w';
		uint64_t t;
		if (send(sv[0], &c, 1, 0) != 1) {
			why = "send failed";
			break;
		}
		double c0 = thread_cpu_us();
		if (recv_bounded(sv[0], &t, sizeof(t), 2000 + idle_ms) != sizeof(t)) {
			why = "no datagram within the bound";
			break;
		}
		if (!chained) {
			uint64_t woke = now_ns();
			cpu[n] = thread_cpu_us() - c0;
			lat[n++] = (double) (woke - t) / 1000.0;
			continue;
		}
		futex_wake_one(&second.ring);
		double mine = thread_cpu_us() - c0;
		if (!futex_wait_nonzero(&second.back, 2000)) {
			why = "the second thread did not wake within the bound";
			break;
		}
		atomic_store(&second.back, 0);
		ccpu[nc] = mine + second.cpu_us;
		clat[nc++] = (double) (second.woke_ns - t) / 1000.0;
	}
	char c = 'q';
	(void) !send(sv[0], &c, 1, 0);
	waitpid(child, NULL, 0);
	if (chain) {
		atomic_store(&second.quit, 1);
		futex_wake_one(&second.ring);
		pthread_join(second_tid, NULL);
	}
	if (why) {
		printf("noresult %s after %d of %d samples\n", why, n + nc, chain ? 2 * samples : samples);
		return 0;
	}
	print_line("kwake_us", lat, cpu, n);
	if (chain)
		print_line("chain_us", clat, ccpu, nc);
	free(lat);
	free(cpu);
	free(clat);
	free(ccpu);
	return 0;
}
