/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * Measures a path between two hosts of prov_test/net/hosts.sh (there is no ping or iperf3
 * on the machine, and ping could not tell one-way loss from round-trip loss anyway).
 *
 *   netprobe echo PORT IDLE_S              UDP: sends every datagram back; exits after IDLE_S
 *                                          seconds without one
 *   netprobe ping ADDR PORT COUNT GAP_US   UDP round trips one at a time, GAP_US apart; a
 *                                          reply not back within 100 ms is lost. Prints
 *                                          "rtt_us min M median M p99 M max M lost L of N"
 *   netprobe sink PORT IDLE_S              UDP: counts datagrams until IDLE_S seconds without
 *                                          one (after the first); prints "received N"
 *   netprobe flood ADDR PORT COUNT PPS     UDP: COUNT small datagrams at PPS per second;
 *                                          prints "sent N"
 *   netprobe tcp-sink PORT                 TCP: one connection, read to EOF; prints
 *                                          "tcp bytes B seconds S mbit_s R" (from the first
 *                                          byte to EOF)
 *   netprobe tcp-send ADDR PORT SECONDS    TCP: writes for SECONDS, then closes
 *
 * Servers print "ready" once bound. Every blocking call has a timeout; exit 0 on success.
 * With NETPROBE_BUSY=1 every wait spins instead of sleeping, as a busy-polling MPI rank does:
 * the RTT then leaves out the cost of waking the two processes (tens of microseconds each on a
 * virtual machine).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	struct timespec ts = {.tv_sec = (time_t) t, .tv_nsec = (long) ((t - (double) (time_t) t) * 1e9)};
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static struct sockaddr_in addr_of(const char *host, const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t) atoi(port))};
	if (!host)
		a.sin_addr.s_addr = htonl(INADDR_ANY);
	else if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "netprobe: not an IPv4 address: %s\n", host);
		exit(2);
	}
	return a;
}

static int udp_bound(const char *port)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = addr_of(NULL, port);
	int one = 1, buf = 4 << 20;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	setsockopt(s, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
	if (s < 0 || bind(s, (struct sockaddr *) &a, sizeof a) < 0) {
		perror("netprobe: udp bind");
		exit(1);
	}
	printf("ready\n");
	fflush(stdout);
	return s;
}

static int busy; /* NETPROBE_BUSY=1: waits spin (as a busy-polling MPI rank does) */

static int wait_in(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (!busy)
		return poll(&p, 1, ms) > 0;
	double end = now() + ms / 1e3;
	do
		if (poll(&p, 1, 0) > 0)
			return 1;
	while (now() < end);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *) a, y = *(const double *) b;
	return x < y ? -1 : x > y;
}

static int echo_or_sink(const char *port, int idle_s, int echo)
{
	int s = udp_bound(port);
	char buf[2048];
	unsigned long n = 0;
	/* before the first datagram, wait longer: the peer may still be starting */
	while (wait_in(s, (n ? idle_s : 4 * idle_s) * 1000)) {
		struct sockaddr_in from;
		socklen_t fl = sizeof from;
		ssize_t r = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *) &from, &fl);
		if (r < 0)
			continue;
		n++;
		if (echo)
			sendto(s, buf, (size_t) r, 0, (struct sockaddr *) &from, fl);
	}
	printf("received %lu\n", n);
	return 0;
}

static int ping(const char *host, const char *port, long count, long gap_us)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = addr_of(host, port);
	if (s < 0 || connect(s, (struct sockaddr *) &a, sizeof a) < 0) {
		perror("netprobe: connect");
		return 1;
	}
	double *rtt = calloc((size_t) count, sizeof *rtt);
	long got = 0, lost = 0;
	double next = now();
	for (long i = 0; i < count; i++) {
		uint64_t seq = (uint64_t) i, back;
		double t0 = now();
		if (send(s, &seq, sizeof seq, 0) < 0) {
			lost++;
		} else {
			/* wait for this sequence number; late replies of earlier ones are skipped */
			double deadline = t0 + 0.1;
			int ok = 0;
			while (!ok) {
				int ms = (int) ((deadline - now()) * 1000) + 1;
				if (ms <= 0 || !wait_in(s, ms))
					break;
				if (recv(s, &back, sizeof back, 0) == (ssize_t) sizeof back && back == seq)
					ok = 1;
			}
			if (ok)
				rtt[got++] = (now() - t0) * 1e6;
			else
				lost++;
		}
		next += (double) gap_us / 1e6;
		if (next > now())
			sleep_until(next);
		else
			next = now();
	}
	if (!got) {
		printf("rtt_us none lost %ld of %ld\n", lost, count);
		return 1;
	}
	qsort(rtt, (size_t) got, sizeof *rtt, cmp_double);
	printf("rtt_us min %.1f median %.1f p99 %.1f max %.1f lost %ld of %ld\n", rtt[0], rtt[got / 2],
	       rtt[(long) ((double) (got - 1) * 0.99)], rtt[got - 1], lost, count);
	return 0;
}

static int flood(const char *host, const char *port, long count, long pps)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = addr_of(host, port);
	if (s < 0 || connect(s, (struct sockaddr *) &a, sizeof a) < 0) {
		perror("netprobe: connect");
		return 1;
	}
	char msg[32] = {0};
	long sent = 0;
	double t0 = now();
	for (long i = 0; i < count; i++) {
		/* bursts of 10 keep the pacing cheap at high rates */
		if (i % 10 == 0)
			sleep_until(t0 + (double) i / (double) pps);
		memcpy(msg, &i, sizeof i);
		if (send(s, msg, sizeof msg, 0) == (ssize_t) sizeof msg)
			sent++;
	}
	printf("sent %ld\n", sent);
	return 0;
}

static int tcp_sink(const char *port)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = addr_of(NULL, port);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (l < 0 || bind(l, (struct sockaddr *) &a, sizeof a) < 0 || listen(l, 1) < 0) {
		perror("netprobe: tcp listen");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	if (!wait_in(l, 30000)) {
		fprintf(stderr, "netprobe: no connection\n");
		return 1;
	}
	int s = accept(l, NULL, NULL);
	static char buf[1 << 16];
	unsigned long long bytes = 0;
	double t0 = 0, t1 = 0;
	while (wait_in(s, 10000)) {
		ssize_t r = read(s, buf, sizeof buf);
		if (r <= 0)
			break;
		if (!bytes)
			t0 = now();
		bytes += (unsigned long long) r;
		t1 = now();
	}
	double secs = t1 - t0;
	printf("tcp bytes %llu seconds %.3f mbit_s %.1f\n", bytes, secs, secs > 0 ? (double) bytes * 8 / secs / 1e6 : 0.0);
	return bytes ? 0 : 1;
}

static int tcp_send(const char *host, const char *port, double secs)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = addr_of(host, port);
	struct timeval tv = {.tv_sec = 10};
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (s < 0 || connect(s, (struct sockaddr *) &a, sizeof a) < 0) {
		perror("netprobe: tcp connect");
		return 1;
	}
	static char buf[1 << 16];
	double end = now() + secs;
	while (now() < end)
		if (write(s, buf, sizeof buf) < 0) {
			perror("netprobe: tcp write");
			return 1;
		}
	close(s);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	busy = getenv("NETPROBE_BUSY") && !strcmp(getenv("NETPROBE_BUSY"), "1");
	const char *m = argc > 1 ? argv[1] : "";
	if (!strcmp(m, "echo") && argc == 4)
		return echo_or_sink(argv[2], atoi(argv[3]), 1);
	if (!strcmp(m, "sink") && argc == 4)
		return echo_or_sink(argv[2], atoi(argv[3]), 0);
	if (!strcmp(m, "ping") && argc == 6)
		return ping(argv[2], argv[3], atol(argv[4]), atol(argv[5]));
	if (!strcmp(m, "flood") && argc == 6)
		return flood(argv[2], argv[3], atol(argv[4]), atol(argv[5]));
	if (!strcmp(m, "tcp-sink") && argc == 3)
		return tcp_sink(argv[2]);
	if (!strcmp(m, "tcp-send") && argc == 5)
		return tcp_send(argv[2], argv[3], atof(argv[4]));
	fprintf(stderr, "usage: see the comment at the top of prov_test/net/netprobe.c\n");
	return 2;
}
