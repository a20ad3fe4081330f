/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * An MPI program for running MPI over rscntr: eager and rendezvous send/recv,
 * MPI_Win fence put/get, passive-target lock + accumulate, a barrier. Every result is
 * checked; rank 0 prints "PASS: errors=0" or "FAIL: errors=N" and the exit code follows.
 * Any even number of ranks: each pairs with the rank half the world away (with 2 ranks, the
 * other one; with 2 hosts x 2 ranks placed in blocks, a rank on the other host), and every
 * rank accumulates into rank 0. With RSCNTR_MPI_WHERE set, each rank first prints
 * "rank R of N on HOST" (MPI_Get_processor_name). An optional argument, a count of iterations
 * (default 1), repeats everything from the send/recv to the window's free that many times
 * (prov_test/net/faults.sh: a run long enough to cut a link in); with more than one, rank 0
 * prints "iteration I" after each (MPI_Barrier first: every rank has finished it).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define SMALL 16
#define LARGE (1 << 20) /* ints: 4 MiB, far past any eager limit */
#define WIN 64

int main(int argc, char **argv)
{
	int rank, size, errors = 0, total = 0;

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

	int *buf = malloc(sizeof(int) * LARGE);
	for (int it = 0; it < iterations; it++) {
	/* eager and rendezvous send/recv, both directions */
	for (int n = SMALL; n <= LARGE; n = (n == SMALL) ? LARGE : LARGE + 1) {
		for (int dir = 0; dir < 2; dir++) {
			/* dir 0: the lower half sends to its peer, dir 1 the upper half */
			int sends = (rank < size / 2) == (dir == 0);
			if (sends) {
				for (int i = 0; i < n; i++)
					buf[i] = i * 3 + dir + n;
				MPI_Send(buf, n, MPI_INT, peer, 7, MPI_COMM_WORLD);
			} else {
				for (int i = 0; i < n; i++)
					buf[i] = -1;
				MPI_Recv(buf, n, MPI_INT, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (int i = 0; i < n; i++)
					if (buf[i] != i * 3 + dir + n) {
						errors++;
						break;
					}
			}
		}
	}

	/* one-sided: fence put/get */
	int *base;
	MPI_Win win;
	MPI_Win_allocate(WIN * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	for (int i = 0; i < WIN; i++)
		base[i] = 0;
	MPI_Win_fence(0, win);
	int put[WIN], got[WIN];
	for (int i = 0; i < WIN; i++)
		put[i] = 1000 * (rank + 1) + i;
	MPI_Put(put, WIN, MPI_INT, peer, 0, WIN, MPI_INT, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < WIN; i++)
		if (base[i] != 1000 * (peer + 1) + i)
			errors++;
	MPI_Get(got, WIN, MPI_INT, peer, 0, WIN, MPI_INT, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < WIN; i++)
		if (got[i] != 1000 * (rank + 1) + i) /* the peer holds what we put */
			errors++;

	/* passive target: every rank accumulates into rank 0 under a lock */
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		for (int i = 0; i < WIN; i++)
			base[i] = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	int one[WIN];
	for (int i = 0; i < WIN; i++)
		one[i] = i + 1;
	for (int rep = 0; rep < 10; rep++) {
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		MPI_Accumulate(one, WIN, MPI_INT, 0, 0, WIN, MPI_INT, MPI_SUM, win);
		MPI_Win_unlock(0, win);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
		for (int i = 0; i < WIN; i++)
			if (base[i] != size * 10 * (i + 1))
				errors++;
		MPI_Win_unlock(0, win);
	}
	MPI_Win_free(&win);
	if (iterations > 1) {
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0) {
			printf("iteration %d\n", it + 1);
			fflush(stdout);
		}
	}
	}
	free(buf);

	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s: errors=%d\n", total ? "FAIL" : "PASS", total);
	MPI_Finalize();
	return total ? 1 : 0;
}
