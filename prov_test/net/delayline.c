/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The delay line of prov_test/net/hosts.sh: the kernel here has no netem, so each host's
 * outgoing frames are held here for a fixed delay plus a random jitter before they go on the
 * wire. One process serves every host of the network.
 *
 *   delayline [-d DELAY_US] [-j JITTER_US] [-q QLEN] [-p SPIN_US] [-s SEED] NETNS:TAP:ETH...
 *
 * For each host, NETNS is its network namespace (a name under /run/netns or a path), TAP the
 * TAP device that carries the host's address (its stack sends into it) and ETH the host's end
 * of the veth pair to the switch. Frames the host sends (read from TAP) are each held for
 * DELAY_US + U(-JITTER_US, +JITTER_US) microseconds (CLOCK_MONOTONIC; a timerfd armed for
 * the earliest head of the queues), then sent on ETH through a packet socket. Frames arriving
 * on ETH from the switch are written to TAP at once: each host delays only what it sends, so a
 * one-way trip between two hosts is delayed once and a round trip twice.
 *
 * Why one process for all hosts: on this 2-vCPU virtual machine waking a process on the other
 * CPU costs tens of microseconds, as much as the delay itself. With one process, a frame it
 * sends on host A's wire crosses the bridge inside that send (softirq on the same CPU) and is
 * already waiting on host B's packet socket when the loop polls again: no wake-up between hosts.
 * After any work the loop keeps polling, without sleeping, for SPIN_US (default 50), and
 * spins (rather than sleeping on the timer) when the next release is that close: the delay
 * is kept within a few microseconds without a process spinning while the network is idle.
 *
 * Order: one FIFO queue per host, so a host's frames leave in the order it sent them, all its
 * flows together (a frame's release time is at least its predecessor's). Under a steady
 * stream the delay therefore creeps towards DELAY_US + JITTER_US, never past it. Each queue
 * is bounded (QLEN frames, default 4096); a frame arriving at a full queue is dropped and
 * counted, as a router's tail drop.
 *
 * Prints "delayline: ready" once every device is open, and on SIGTERM/SIGINT one line of
 * counters per host (frames each way, drops, hold times achieved), then exits 0.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/ethernet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#define MAX_HOSTS 16
#define BATCH 64

struct slot {
	uint64_t arrived, release; /* ns, CLOCK_MONOTONIC */
	uint32_t len;
};

struct host {
	char name[256];
	int tap, eth;
	size_t maxframe, head, count;
	struct slot *q;
	unsigned char *frames;
	uint64_t last_release;
	uint64_t n_out, n_in, drop_full, drop_send, drop_tap, maxdepth;
	uint64_t hold_min, hold_max, hold_sum;
};

static struct host hosts[MAX_HOSTS];
static int nhosts;
static long qlen = 4096;
static uint64_t delay, jitter;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static uint64_t rng_state;
static uint64_t rng(void) /* xorshift64* */
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static void die(const char *what, const char *who)
{
	fprintf(stderr, "delayline: %s%s%s: %s\n", who ? who : "", who ? ": " : "", what, strerror(errno));
	exit(1);
}

static void usage(void)
{
	fprintf(stderr, "usage: delayline [-d DELAY_US] [-j JITTER_US] [-q QLEN] [-p SPIN_US] [-s SEED] NETNS:TAP:ETH...\n");
	exit(2);
}

/* opens host h's TAP and packet socket from inside its network namespace */
static void open_host(struct host *h, const char *spec, int home_ns)
{
	char ns[256], tap_name[IFNAMSIZ], eth_name[IFNAMSIZ], path[300];
	if (sscanf(spec, "%255[^:]:%15[^:]:%15s", ns, tap_name, eth_name) != 3)
		usage();
	snprintf(h->name, sizeof h->name, "%s", ns);
	if (ns[0] == '/')
		snprintf(path, sizeof path, "%s", ns);
	else
		snprintf(path, sizeof path, "/run/netns/%s", ns);
	int nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) < 0)
		die("setns", path);
	close(nsfd);

	/* the TAP (hosts.sh made it persistent and configured it; attach to it) */
	h->tap = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (h->tap < 0)
		die("open /dev/net/tun", ns);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", tap_name);
	if (ioctl(h->tap, TUNSETIFF, &ifr) < 0)
		die("TUNSETIFF", ns);

	/* a frame holds at most the TAP's MTU plus an Ethernet header and a VLAN tag */
	int ctl = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", tap_name);
	if (ctl < 0 || ioctl(ctl, SIOCGIFMTU, &ifr) < 0)
		die("SIOCGIFMTU", ns);
	h->maxframe = (size_t) ifr.ifr_mtu + 18;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", eth_name);
	if (ioctl(ctl, SIOCGIFINDEX, &ifr) < 0)
		die("SIOCGIFINDEX", ns);
	int ifindex = ifr.ifr_ifindex;
	close(ctl);

	/* the wire: every frame arriving on ETH, none of those sent on it */
	h->eth = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (h->eth < 0)
		die("socket(AF_PACKET)", ns);
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = ifindex};
	if (bind(h->eth, (struct sockaddr *) &sll, sizeof sll) < 0)
		die("bind(AF_PACKET)", ns);
	int one = 1;
	setsockopt(h->eth, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
	struct packet_mreq mr = {.mr_ifindex = ifindex, .mr_type = PACKET_MR_PROMISC};
	if (setsockopt(h->eth, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) < 0)
		die("PACKET_MR_PROMISC", ns);
	int buf = 4 << 20;
	setsockopt(h->eth, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
	setsockopt(h->eth, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);

	if (setns(home_ns, CLONE_NEWNET) < 0)
		die("setns back", ns);

	h->q = calloc((size_t) qlen, sizeof *h->q);
	h->frames = malloc((size_t) qlen * h->maxframe);
	if (!h->q || !h->frames)
		die("malloc", ns);
	h->hold_min = UINT64_MAX;
}

/* from the host: stamp and queue */
static int from_host(struct host *h, unsigned char *in)
{
	int k;
	for (k = 0; k < BATCH; k++) {
		ssize_t n = read(h->tap, in, h->maxframe);
		if (n < 0)
			break; /* EAGAIN, or EIO while the device is down */
		uint64_t t = now_ns();
		if (h->count == (size_t) qlen) {
			h->drop_full++;
			continue;
		}
		uint64_t r = t + delay;
		if (jitter)
			r = r - jitter + rng() % (2 * jitter + 1);
		if (r < h->last_release)
			r = h->last_release; /* FIFO: never before the frame ahead */
		h->last_release = r;
		size_t tail = (h->head + h->count) % (size_t) qlen;
		h->q[tail] = (struct slot){.arrived = t, .release = r, .len = (uint32_t) n};
		memcpy(h->frames + tail * h->maxframe, in, (size_t) n);
		if (++h->count > h->maxdepth)
			h->maxdepth = h->count;
	}
	return k;
}

/* from the wire: straight to the host */
static int from_wire(struct host *h, unsigned char *in, size_t insz)
{
	int k;
	for (k = 0; k < BATCH; k++) {
		ssize_t n = recv(h->eth, in, insz, 0);
		if (n < 0) {
			if (errno == ENETDOWN || errno == ENXIO)
				continue; /* reported once when the link goes down; go on */
			break;
		}
		if (write(h->tap, in, (size_t) n) < 0)
			h->drop_tap++; /* EIO: the TAP is down */
		else
			h->n_in++;
	}
	return k;
}

/* sends what is due; returns how many */
static int release_due(struct host *h, uint64_t t)
{
	int k = 0;
	while (h->count && h->q[h->head].release <= t) {
		struct slot *s = &h->q[h->head];
		if (send(h->eth, h->frames + h->head * h->maxframe, s->len, 0) < 0)
			h->drop_send++; /* the link is down, or the socket's buffer full */
		else
			h->n_out++;
		uint64_t hold = t - s->arrived;
		h->hold_sum += hold;
		if (hold < h->hold_min)
			h->hold_min = hold;
		if (hold > h->hold_max)
			h->hold_max = hold;
		h->head = (h->head + 1) % (size_t) qlen;
		h->count--;
		k++;
	}
	return k;
}

int main(int argc, char **argv)
{
	long delay_us = 200, jitter_us = 20, spin_us = 50;
	unsigned long long seed = 0;
	int opt;

	while ((opt = getopt(argc, argv, "d:j:q:p:s:")) != -1) {
		switch (opt) {
		case 'd': delay_us = atol(optarg); break;
		case 'j': jitter_us = atol(optarg); break;
		case 'q': qlen = atol(optarg); break;
		case 'p': spin_us = atol(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (optind >= argc || argc - optind > MAX_HOSTS || delay_us < 0 || jitter_us < 0 || jitter_us > delay_us ||
	    qlen < 1 || spin_us < 0)
		usage();
	delay = (uint64_t) delay_us * 1000;
	jitter = (uint64_t) jitter_us * 1000;
	const uint64_t spin = (uint64_t) spin_us * 1000;
	rng_state = seed ? seed : ((uint64_t) getpid() << 32) ^ now_ns();
	if (!rng_state)
		rng_state = 1;

	/* The default timer slack (50 us) would be a quarter of the delay: ask for none. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	int home_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home_ns < 0)
		die("open /proc/self/ns/net", NULL);
	size_t insz = 65536;
	for (int i = optind; i < argc; i++) {
		open_host(&hosts[nhosts], argv[i], home_ns);
		if (hosts[nhosts].maxframe > insz)
			insz = hosts[nhosts].maxframe;
		nhosts++;
	}
	unsigned char *in = malloc(insz);

	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (tfd < 0 || !in)
		die("timerfd_create", NULL);
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (sfd < 0)
		die("signalfd", NULL);

	printf("delayline: ready (%d hosts, delay %ld us +- %ld us, spin %ld us, queues of %ld frames)\n", nhosts,
	       delay_us, jitter_us, spin_us, qlen);
	fflush(stdout);

	struct pollfd p[2 * MAX_HOSTS + 2];
	for (int i = 0; i < nhosts; i++) {
		p[2 * i] = (struct pollfd){.fd = hosts[i].tap, .events = POLLIN};
		p[2 * i + 1] = (struct pollfd){.fd = hosts[i].eth, .events = POLLIN};
	}
	const int np = 2 * nhosts + 2;
	p[np - 2] = (struct pollfd){.fd = tfd, .events = POLLIN};
	p[np - 1] = (struct pollfd){.fd = sfd, .events = POLLIN};
	uint64_t armed = 0, busy_until = 0;

	for (;;) {
		/* the earliest release over all queues */
		uint64_t next = UINT64_MAX;
		for (int i = 0; i < nhosts; i++)
			if (hosts[i].count && hosts[i].q[hosts[i].head].release < next)
				next = hosts[i].q[hosts[i].head].release;
		uint64_t t = now_ns();
		/* sleep in poll unless just busy or a release is near; then only look */
		int timeout = (t < busy_until || (next != UINT64_MAX && next <= t + spin)) ? 0 : -1;
		/* the timer wakes us SPIN_US early: waking takes tens of microseconds here */
		if (timeout < 0 && next != UINT64_MAX && armed != next - spin) {
			uint64_t at = next - spin;
			struct itimerspec its = {.it_value = {.tv_sec = (time_t) (at / 1000000000u),
							      .tv_nsec = (long) (at % 1000000000u)}};
			if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
				die("timerfd_settime", NULL);
			armed = at;
		}
		int r = poll(p, (nfds_t) np, timeout);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("poll", NULL);
		}
		if (p[np - 1].revents)
			break;
		int work = 0;
		if (p[np - 2].revents & POLLIN) {
			uint64_t ticks;
			ssize_t n = read(tfd, &ticks, sizeof ticks);
			(void) n;
			armed = 0;
		}
		for (int i = 0; i < nhosts; i++) {
			if (p[2 * i].revents & POLLIN)
				work += from_host(&hosts[i], in);
			if (p[2 * i + 1].revents & (POLLIN | POLLERR))
				work += from_wire(&hosts[i], in, insz);
		}
		t = now_ns();
		for (int i = 0; i < nhosts; i++)
			work += release_due(&hosts[i], t);
		if (work)
			busy_until = now_ns() + spin;
	}

	for (int i = 0; i < nhosts; i++) {
		struct host *h = &hosts[i];
		uint64_t held = h->n_out + h->drop_send;
		fprintf(stderr,
			"delayline: %s: out %llu, in %llu; dropped: queue full %llu, not sent %llu, not taken %llu; "
			"max queue %llu; hold us min %.1f avg %.1f max %.1f\n",
			h->name, (unsigned long long) h->n_out, (unsigned long long) h->n_in,
			(unsigned long long) h->drop_full, (unsigned long long) h->drop_send,
			(unsigned long long) h->drop_tap, (unsigned long long) h->maxdepth,
			held ? (double) h->hold_min / 1e3 : 0.0, held ? (double) h->hold_sum / 1e3 / (double) held : 0.0,
			(double) h->hold_max / 1e3);
	}
	return 0;
}
