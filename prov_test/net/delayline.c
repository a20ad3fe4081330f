/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A delay line between a TAP device and an Ethernet device, for prov_test/net/hosts.sh: the
 * kernel here has no netem, so a host's outgoing frames are held here for a fixed delay plus
 * a random jitter before they go on the wire.
 *
 *   delayline -t TAP -e ETH [-d DELAY_US] [-j JITTER_US] [-q QLEN] [-s SEED]
 *
 * TAP carries the host's address (the host's stack sends into it); ETH is the host's end of
 * the veth pair to the switch. Frames the host sends (read from TAP) are each held for
 * DELAY_US + U(-JITTER_US, +JITTER_US) microseconds (CLOCK_MONOTONIC, a timerfd armed for the
 * head of the queue), then sent on ETH through a packet socket. Frames arriving on ETH from
 * the switch are written to TAP at once: each host delays only what it sends, so a one-way
 * trip between two hosts is delayed once and a round trip twice.
 *
 * Order: one FIFO queue, so frames leave in the order they came, all flows together (a frame
 * never leaves before the one ahead of it: its release time is at least its predecessor's).
 * Under a steady stream the delay therefore creeps towards DELAY_US + JITTER_US, never past it.
 * The queue is bounded (QLEN frames, default 4096); a frame arriving at a full queue is dropped
 * and counted, as a router's tail drop.
 *
 * Prints "delayline: ready" once both devices are open, and on SIGTERM/SIGINT a line of
 * counters (frames each way, drops, the hold times actually achieved), then exits 0.
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

struct slot {
	uint64_t arrived, release; /* ns, CLOCK_MONOTONIC */
	uint32_t len;
};

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

static void die(const char *what)
{
	fprintf(stderr, "delayline: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void usage(void)
{
	fprintf(stderr, "usage: delayline -t TAP -e ETH [-d DELAY_US] [-j JITTER_US] [-q QLEN] [-s SEED]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *tap_name = NULL, *eth_name = NULL;
	long delay_us = 200, jitter_us = 20, qlen = 4096;
	unsigned long long seed = 0;
	int opt;

	while ((opt = getopt(argc, argv, "t:e:d:j:q:s:")) != -1) {
		switch (opt) {
		case 't': tap_name = optarg; break;
		case 'e': eth_name = optarg; break;
		case 'd': delay_us = atol(optarg); break;
		case 'j': jitter_us = atol(optarg); break;
		case 'q': qlen = atol(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (!tap_name || !eth_name || delay_us < 0 || jitter_us < 0 || jitter_us > delay_us || qlen < 1)
		usage();
	rng_state = seed ? seed : ((uint64_t) getpid() << 32) ^ now_ns();
	if (!rng_state)
		rng_state = 1;

	/* The default timer slack (50 us) would be a quarter of the delay: ask for none. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	/* the TAP device (hosts.sh made it persistent and configured it; we attach to it) */
	int tap = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (tap < 0)
		die("open /dev/net/tun");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", tap_name);
	if (ioctl(tap, TUNSETIFF, &ifr) < 0)
		die("TUNSETIFF");

	/* a frame holds at most the TAP's MTU plus an Ethernet header and a VLAN tag */
	int ctl = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", tap_name);
	if (ctl < 0 || ioctl(ctl, SIOCGIFMTU, &ifr) < 0)
		die("SIOCGIFMTU");
	size_t maxframe = (size_t) ifr.ifr_mtu + 18;
	memset(&ifr, 0, sizeof ifr);
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", eth_name);
	if (ioctl(ctl, SIOCGIFINDEX, &ifr) < 0)
		die("SIOCGIFINDEX");
	int ifindex = ifr.ifr_ifindex;
	close(ctl);

	/* the wire: every frame on ETH, none of the ones we send ourselves */
	int eth = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (eth < 0)
		die("socket(AF_PACKET)");
	struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = ifindex};
	if (bind(eth, (struct sockaddr *) &sll, sizeof sll) < 0)
		die("bind(AF_PACKET)");
	int one = 1;
	setsockopt(eth, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
	struct packet_mreq mr = {.mr_ifindex = ifindex, .mr_type = PACKET_MR_PROMISC};
	if (setsockopt(eth, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) < 0)
		die("PACKET_MR_PROMISC");
	int buf = 4 << 20;
	setsockopt(eth, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
	setsockopt(eth, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);

	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (tfd < 0)
		die("timerfd_create");
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
	if (sfd < 0)
		die("signalfd");

	struct slot *q = calloc((size_t) qlen, sizeof *q);
	unsigned char *frames = malloc((size_t) qlen * maxframe);
	unsigned char *in = malloc(maxframe > 65536 ? maxframe : 65536);
	if (!q || !frames || !in)
		die("malloc");
	size_t head = 0, count = 0;
	uint64_t last_release = 0, armed = 0;
	uint64_t n_out = 0, n_in = 0, drop_full = 0, drop_send = 0, drop_tap = 0, maxdepth = 0;
	uint64_t hold_min = UINT64_MAX, hold_max = 0, hold_sum = 0;
	const uint64_t delay = (uint64_t) delay_us * 1000, jitter = (uint64_t) jitter_us * 1000;

	printf("delayline: ready (%s -> %s, delay %ld us +- %ld us, queue %ld frames of %zu bytes)\n",
	       tap_name, eth_name, delay_us, jitter_us, qlen, maxframe);
	fflush(stdout);

	for (;;) {
		struct pollfd p[4] = {
			{.fd = tap, .events = POLLIN},
			{.fd = eth, .events = POLLIN},
			{.fd = tfd, .events = POLLIN},
			{.fd = sfd, .events = POLLIN},
		};
		if (poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (p[3].revents)
			break;

		/* from the host: stamp and queue (a batch, so the wire side is not starved) */
		for (int k = 0; (p[0].revents & POLLIN) && k < 64; k++) {
			ssize_t n = read(tap, in, maxframe);
			if (n < 0)
				break; /* EAGAIN, or EIO while the device is down */
			uint64_t t = now_ns();
			if (count == (size_t) qlen) {
				drop_full++;
				continue;
			}
			uint64_t r = t + delay;
			if (jitter)
				r = r - jitter + rng() % (2 * jitter + 1);
			if (r < last_release)
				r = last_release; /* FIFO: never before the frame ahead */
			last_release = r;
			size_t tail = (head + count) % (size_t) qlen;
			q[tail] = (struct slot){.arrived = t, .release = r, .len = (uint32_t) n};
			memcpy(frames + tail * maxframe, in, (size_t) n);
			if (++count > maxdepth)
				maxdepth = count;
		}

		/* from the wire: straight to the host */
		for (int k = 0; (p[1].revents & (POLLIN | POLLERR)) && k < 64; k++) {
			ssize_t n = recv(eth, in, maxframe > 65536 ? maxframe : 65536, MSG_DONTWAIT);
			if (n < 0) {
				if (errno == ENETDOWN || errno == ENXIO)
					continue; /* reported once when the link goes down; go on */
				break;
			}
			if (write(tap, in, (size_t) n) < 0)
				drop_tap++; /* EIO: the TAP is down */
			else
				n_in++;
		}

		if (p[2].revents & POLLIN) {
			uint64_t ticks;
			ssize_t r = read(tfd, &ticks, sizeof ticks);
			(void) r;
			armed = 0;
		}

		/* release what is due, then arm the timer for the next head */
		uint64_t t = now_ns();
		while (count && q[head].release <= t) {
			struct slot *s = &q[head];
			if (send(eth, frames + head * maxframe, s->len, 0) < 0)
				drop_send++; /* the link is down */
			else
				n_out++;
			uint64_t hold = t - s->arrived;
			hold_sum += hold;
			if (hold < hold_min)
				hold_min = hold;
			if (hold > hold_max)
				hold_max = hold;
			head = (head + 1) % (size_t) qlen;
			count--;
		}
		if (count && armed != q[head].release) {
			struct itimerspec its = {
				.it_value = {.tv_sec = (time_t) (q[head].release / 1000000000u),
					     .tv_nsec = (long) (q[head].release % 1000000000u)}};
			if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
				die("timerfd_settime");
			armed = q[head].release;
		}
	}

	uint64_t held = n_out + drop_send;
	fprintf(stderr,
		"delayline: %s: out %llu, in %llu, dropped: queue full %llu, link down %llu (out) %llu (in); "
		"max queue %llu; hold us min %.1f avg %.1f max %.1f\n",
		tap_name, (unsigned long long) n_out, (unsigned long long) n_in, (unsigned long long) drop_full,
		(unsigned long long) drop_send, (unsigned long long) drop_tap, (unsigned long long) maxdepth,
		held ? hold_min / 1e3 : 0.0, held ? hold_sum / 1e3 / (double) held : 0.0, hold_max / 1e3);
	return 0;
}
