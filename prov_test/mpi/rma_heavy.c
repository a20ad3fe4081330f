/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A counter-heavy MPI RMA program: many small one-sided operations completed through every
 * synchronisation MPI has, so that an MPI library over libfabric completes them through its
 * RMA counters (MPICH's ch4:ofi waits on the window's counter in fence, flush, complete and
 * unlock). Every result is checked; rank 0 prints "PASS: errors=0 checks=C" or
 * "FAIL: errors=N checks=C" and the exit code follows. Any even number of ranks >= 2.
 *
 *   rma_heavy [iterations]      (default 1: everything below once)
 *
 * 1. fence epochs (MPI_Win_allocate): each round every rank puts a block into every other rank,
 *    accumulates (MPI_SUM) into every rank including itself and puts 1 MiB into its peer (the
 *    rank half the world away: with 2 hosts x 2 ranks in blocks, one on the other host);
 *    fence; everything checked; then gets of what a third rank put into the next rank, and of
 *    the peer's 1 MiB; fence; checked.
 * 2. passive target, MPI_Win_lock_all:
 *    - put then MPI_Win_flush, get back then MPI_Win_flush, to the other ranks in turn: each
 *      get must see the put before it;
 *    - puts to every rank, MPI_Win_flush_all, a barrier, MPI_Win_sync: every block in place;
 *    - MPI_Fetch_and_op (MPI_SUM of 1) on one counter at rank 0, flushed each time: the values
 *      fetched across all ranks are exactly 0 .. N*K-1;
 *    - tickets from MPI_Compare_and_swap on a counter at rank N-1 (read by MPI_Fetch_and_op
 *      MPI_NO_OP, then swapped for one more until the swap succeeds): the tickets across all
 *      ranks are exactly 0 .. N*K-1;
 *    - MPI_Get_accumulate (MPI_SUM of 1) on an array at the peer of rank 0: per element the
 *      values fetched are exactly 0 .. N*K-1;
 *    - MPI_Accumulate MPI_BXOR of each rank's own bit into an array at rank 0;
 *    then, after MPI_Win_unlock_all, each counter's final value under an exclusive lock.
 * 3. PSCW (a second window, MPI_Win_create over malloc'd memory): in a ring, each rank exposes
 *    its window to its predecessor (MPI_Win_post/wait) and accesses its successor's
 *    (MPI_Win_start/complete): a put, an accumulate and a get of what it put the round
 *    before, checked after each epoch; the accumulated sums at the end.
 * Each wrong value counts one error (the first few are printed with their part, rank and
 * index); "checks" counts every value compared, so a run that checked nothing cannot pass.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B 256            /* ints in a block */
#define BIG (1 << 18)    /* ints: 1 MiB */
#define FENCE_ROUNDS 8
#define LA_ROUNDS 40     /* put + flush, get + flush */
#define FAO_K 40         /* fetch-and-adds per rank */
#define CAS_K 15         /* compare-and-swap tickets per rank */
#define GACC_K 10        /* get-accumulates per rank */
#define GACC_E 16        /* elements in the get-accumulate array */
#define PSCW_ROUNDS 10

static int rank, size;
static long errors, checks;

static void check(const char *part, long want, long got, long index)
{
	checks++;
	if (want == got)
		return;
	if (errors < 10)
		fprintf(stderr, "rank %d: %s[%ld]: want %ld, got %ld\n", rank, part, index, want, got);
	errors++;
}

/* Values put: who put it, in which round, for which target, where. */
static int val(int round, int origin, int target, int i)
{
	return round * 1000003 + origin * 10007 + target * 101 + i;
}

/* Rank 0 checks that the n values gathered from every rank are exactly 0 .. n*size-1. */
static void check_permutation(const char *part, const int *mine, int n)
{
	int *all = rank == 0 ? malloc(sizeof(int) * n * size) : NULL;
	MPI_Gather(mine, n, MPI_INT, all, n, MPI_INT, 0, MPI_COMM_WORLD);
	if (rank)
		return;
	int total = n * size;
	char *seen = calloc(total, 1);
	for (int i = 0; i < total; i++) {
		int v = all[i];
		checks++;
		if (v < 0 || v >= total || seen[v]) {
			if (errors < 10)
				fprintf(stderr, "rank 0: %s: value %d (from rank %d) out of range or repeated\n",
					part, v, i / n);
			errors++;
		} else {
			seen[v] = 1;
		}
	}
	free(seen);
	free(all);
}

/* ---- window layout (ints), the window of parts 1 and 2 ------------------------------------ */
/* FENCE: a block per origin; FACC: fence accumulates; BIGR: the peer's 1 MiB; LA: a block per
 * origin for lock-all puts; CNT: fetch-and-add counter, CAS counter; GACC: get-accumulate
 * array; XOR: bxor array */
#define OFF_FENCE 0
#define OFF_FACC(n) (OFF_FENCE + (n) * B)
#define OFF_BIG(n) (OFF_FACC(n) + B)
#define OFF_LA(n) (OFF_BIG(n) + BIG)
#define OFF_CNT(n) (OFF_LA(n) + (n) * B)
#define OFF_GACC(n) (OFF_CNT(n) + 2)
#define OFF_XOR(n) (OFF_GACC(n) + GACC_E)
#define WIN_INTS(n) (OFF_XOR(n) + B)

static void fence_part(MPI_Win win, int *base, int peer)
{
	int *out = malloc(sizeof(int) * size * B), *acc = malloc(sizeof(int) * B);
	int *big = malloc(sizeof(int) * BIG), *got = malloc(sizeof(int) * B);
	int *bigback = malloc(sizeof(int) * BIG);
	int next = (rank + 1) % size, third = (rank + 2) % size;

	for (int r = 0; r < FENCE_ROUNDS; r++) {
		for (int i = 0; i < B; i++)
			base[OFF_FACC(size) + i] = 0;
		MPI_Win_fence(0, win);
		for (int t = 0; t < size; t++) {
			if (t == rank)
				continue;
			for (int i = 0; i < B; i++)
				out[t * B + i] = val(r, rank, t, i);
			MPI_Put(out + t * B, B, MPI_INT, t, OFF_FENCE + rank * B, B, MPI_INT, win);
		}
		for (int i = 0; i < B; i++)
			acc[i] = (rank + 1) * (i + 1) + r;
		for (int t = 0; t < size; t++)
			MPI_Accumulate(acc, B, MPI_INT, t, OFF_FACC(size), B, MPI_INT, MPI_SUM, win);
		for (int i = 0; i < BIG; i++)
			big[i] = val(r, rank, peer, i);
		MPI_Put(big, BIG, MPI_INT, peer, OFF_BIG(size), BIG, MPI_INT, win);
		MPI_Win_fence(0, win);

		for (int t = 0; t < size; t++) {
			if (t == rank)
				continue;
			for (int i = 0; i < B; i++)
				check("fence put", val(r, t, rank, i), base[OFF_FENCE + t * B + i], t * B + i);
		}
		for (int i = 0; i < B; i++) /* sum over t of (t+1)(i+1) + r */
			check("fence accumulate", (long) (i + 1) * size * (size + 1) / 2 + (long) size * r,
			      base[OFF_FACC(size) + i], i);
		for (int i = 0; i < BIG; i++)
			check("fence 1 MiB put", val(r, peer, rank, i), base[OFF_BIG(size) + i], i);

		/* what the rank after next put into the next rank; the peer's 1 MiB, which we put */
		MPI_Get(got, B, MPI_INT, next, OFF_FENCE + third * B, B, MPI_INT, win);
		MPI_Get(bigback, BIG, MPI_INT, peer, OFF_BIG(size), BIG, MPI_INT, win);
		/* the last fence ends the fence epochs (part 2 locks the window) */
		MPI_Win_fence(r == FENCE_ROUNDS - 1 ? MPI_MODE_NOSUCCEED : 0, win);
		for (int i = 0; i < B; i++)
			check("fence get", val(r, third, next, i), got[i], i);
		for (int i = 0; i < BIG; i++)
			check("fence 1 MiB get", val(r, rank, peer, i), bigback[i], i);
	}
	free(out);
	free(acc);
	free(big);
	free(got);
	free(bigback);
}

static void lock_all_part(MPI_Win win, int *base)
{
	int *out = malloc(sizeof(int) * B), *got = malloc(sizeof(int) * B);
	int one = 1, nothing = 0;
	int cas_at = size - 1, gacc_at = size / 2; /* rank 0's peer */
	int fao[FAO_K], tickets[CAS_K], gacc[GACC_K * GACC_E];

	MPI_Win_lock_all(0, win);
	/* put, flush, get back, flush: to the other ranks in turn */
	for (int k = 0; k < LA_ROUNDS; k++) {
		int t = (rank + 1 + k % (size - 1)) % size;
		for (int i = 0; i < B; i++)
			out[i] = val(k, rank, t, i);
		MPI_Put(out, B, MPI_INT, t, OFF_LA(size) + rank * B, B, MPI_INT, win);
		MPI_Win_flush(t, win);
		memset(got, 0xff, sizeof(int) * B);
		MPI_Get(got, B, MPI_INT, t, OFF_LA(size) + rank * B, B, MPI_INT, win);
		MPI_Win_flush(t, win);
		for (int i = 0; i < B; i++)
			check("lock_all put/flush/get", val(k, rank, t, i), got[i], i);
	}

	/* a last block to every other rank, flush_all, then everyone looks at its own window */
	int *outs = malloc(sizeof(int) * size * B);
	for (int t = 0; t < size; t++) {
		if (t == rank)
			continue;
		for (int i = 0; i < B; i++)
			outs[t * B + i] = val(LA_ROUNDS, rank, t, i);
		MPI_Put(outs + t * B, B, MPI_INT, t, OFF_LA(size) + rank * B, B, MPI_INT, win);
	}
	MPI_Win_flush_all(win);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_sync(win);
	for (int t = 0; t < size; t++) {
		if (t == rank)
			continue;
		for (int i = 0; i < B; i++)
			check("lock_all flush_all", val(LA_ROUNDS, t, rank, i), base[OFF_LA(size) + t * B + i],
			      t * B + i);
	}
	free(outs);

	/* fetch-and-add: every value fetched once */
	for (int k = 0; k < FAO_K; k++) {
		fao[k] = -1;
		MPI_Fetch_and_op(&one, &fao[k], MPI_INT, 0, OFF_CNT(size), MPI_SUM, win);
		MPI_Win_flush(0, win);
	}

	/* compare-and-swap tickets */
	for (int k = 0; k < CAS_K; k++) {
		for (int tries = 0;; tries++) {
			int seen = -1, want, result = -1;
			MPI_Fetch_and_op(&nothing, &seen, MPI_INT, cas_at, OFF_CNT(size) + 1, MPI_NO_OP, win);
			MPI_Win_flush(cas_at, win);
			want = seen + 1;
			MPI_Compare_and_swap(&want, &seen, &result, MPI_INT, cas_at, OFF_CNT(size) + 1, win);
			MPI_Win_flush(cas_at, win);
			if (result == seen) {
				tickets[k] = seen;
				break;
			}
			if (tries > 100000) { /* a CAS that never succeeds is a failure, not a hang */
				check("compare_and_swap never succeeded", seen, result, k);
				tickets[k] = -1;
				break;
			}
		}
	}

	/* get-accumulate: per element, every value fetched once */
	int ones[GACC_E];
	for (int e = 0; e < GACC_E; e++)
		ones[e] = 1;
	for (int k = 0; k < GACC_K; k++) {
		MPI_Get_accumulate(ones, GACC_E, MPI_INT, gacc + k * GACC_E, GACC_E, MPI_INT, gacc_at,
				   OFF_GACC(size), GACC_E, MPI_INT, MPI_SUM, win);
		MPI_Win_flush(gacc_at, win);
	}

	/* bxor of this rank's bit into every element at rank 0 */
	for (int i = 0; i < B; i++)
		out[i] = 1 << (rank % 31);
	MPI_Accumulate(out, B, MPI_INT, 0, OFF_XOR(size), B, MPI_INT, MPI_BXOR, win);
	MPI_Win_unlock_all(win);

	check_permutation("fetch_and_op values", fao, FAO_K);
	check_permutation("compare_and_swap tickets", tickets, CAS_K);
	int col[GACC_K];
	for (int e = 0; e < GACC_E; e++) {
		for (int k = 0; k < GACC_K; k++)
			col[k] = gacc[k * GACC_E + e];
		check_permutation("get_accumulate values", col, GACC_K);
	}

	/* the final values, read under an exclusive lock of one's own window */
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win);
	if (rank == 0) {
		check("fetch_and_op counter", (long) size * FAO_K, base[OFF_CNT(size)], 0);
		long x = 0;
		for (int r = 0; r < size; r++)
			x ^= 1 << (r % 31);
		for (int i = 0; i < B; i++)
			check("bxor accumulate", x, base[OFF_XOR(size) + i], i);
	}
	if (rank == cas_at)
		check("compare_and_swap counter", (long) size * CAS_K, base[OFF_CNT(size) + 1], 0);
	if (rank == gacc_at)
		for (int e = 0; e < GACC_E; e++)
			check("get_accumulate array", (long) size * GACC_K, base[OFF_GACC(size) + e], e);
	MPI_Win_unlock(rank, win);
	free(out);
	free(got);
}

/* ---- PSCW on a window over memory of our own: P[2] blocks, PACC ---------------------------- */
static void pscw_part(void)
{
	int *mem = calloc(3 * B, sizeof(int)), *out = malloc(sizeof(int) * B);
	int *acc = malloc(sizeof(int) * B), *got = malloc(sizeof(int) * B);
	int pred = (rank + size - 1) % size, succ = (rank + 1) % size;
	MPI_Win win;
	MPI_Group world, from, to;

	MPI_Win_create(mem, 3 * B * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Group_incl(world, 1, &pred, &from);
	MPI_Group_incl(world, 1, &succ, &to);
	for (int r = 0; r < PSCW_ROUNDS; r++) {
		MPI_Win_post(from, 0, win);
		MPI_Win_start(to, 0, win);
		for (int i = 0; i < B; i++) {
			out[i] = val(r, rank, succ, i);
			acc[i] = (r + 1) * (i + 1);
		}
		MPI_Put(out, B, MPI_INT, succ, (r % 2) * B, B, MPI_INT, win);
		MPI_Accumulate(acc, B, MPI_INT, succ, 2 * B, B, MPI_INT, MPI_SUM, win);
		if (r > 0) /* what this rank put there the round before */
			MPI_Get(got, B, MPI_INT, succ, ((r - 1) % 2) * B, B, MPI_INT, win);
		MPI_Win_complete(win);
		MPI_Win_wait(win);
		for (int i = 0; i < B; i++)
			check("pscw put", val(r, pred, rank, i), mem[(r % 2) * B + i], i);
		if (r > 0)
			for (int i = 0; i < B; i++)
				check("pscw get", val(r - 1, rank, succ, i), got[i], i);
	}
	for (int i = 0; i < B; i++)
		check("pscw accumulate", (long) (i + 1) * PSCW_ROUNDS * (PSCW_ROUNDS + 1) / 2, mem[2 * B + i], i);
	MPI_Group_free(&from);
	MPI_Group_free(&to);
	MPI_Group_free(&world);
	MPI_Win_free(&win);
	free(mem);
	free(out);
	free(acc);
	free(got);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2 || size % 2) {
		if (!rank)
			fprintf(stderr, "needs an even number of ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int peer = (rank + size / 2) % size;
	int iterations = argc > 1 ? atoi(argv[1]) : 1;
	if (iterations < 1)
		iterations = 1;
	if (getenv("RSCNTR_MPI_WHERE")) {
		char host[MPI_MAX_PROCESSOR_NAME];
		int len;
		MPI_Get_processor_name(host, &len);
		printf("rank %d of %d on %s\n", rank, size, host);
		fflush(stdout);
	}

	for (int it = 0; it < iterations; it++) {
		int *base;
		MPI_Win win;
		MPI_Win_allocate((MPI_Aint) WIN_INTS(size) * sizeof(int), sizeof(int), MPI_INFO_NULL,
				 MPI_COMM_WORLD, &base, &win);
		memset(base, 0, (size_t) WIN_INTS(size) * sizeof(int));
		MPI_Barrier(MPI_COMM_WORLD);
		fence_part(win, base, peer);
		lock_all_part(win, base);
		MPI_Win_free(&win);
		pscw_part();
		if (iterations > 1 && rank == 0) {
			printf("iteration %d\n", it + 1);
			fflush(stdout);
		}
	}

	long totals[2], mine[2] = { errors, checks };
	MPI_Allreduce(mine, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s: errors=%ld checks=%ld\n", totals[0] ? "FAIL" : "PASS", totals[0], totals[1]);
	MPI_Finalize();
	return totals[0] ? 1 : 0;
}
