/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * MPI_Bcast latency, 8 B to 1 MiB (powers of 8, and 1 MiB), root 0, MPI_CHAR, in the manner of
 * the OSU broadcast test: per size, `warm` broadcasts, a barrier, then `iters` broadcasts
 * timed on every rank; the figure is the largest of the ranks' means. Which broadcast MPICH
 * runs is the environment's (MPIR_CVAR_BCAST_OFI_INTRA_ALGORITHM, ...); scripts/
 * bench_mpich_bcast.sh runs it once per configuration, interleaved.
 *
 *   mpi_bcast_lat [iters (default 200)] [max bytes (default 1 MiB)]
 *
 * Output on rank 0, one line per size:  bcast_us <bytes> <microseconds>
 * The program never judges timing; it checks that the last broadcast of each size delivered
 * the root's bytes, and exits 1 (printing FAIL) if one did not.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    size_t max = argc > 2 ? strtoull(argv[2], NULL, 0) : 1048576;
    char *buf = malloc(max);
    if (!buf || iters < 1)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int bad = 0;
    for (size_t bytes = 8; bytes <= max; bytes = bytes * 8 > max && bytes < max ? max : bytes * 8) {
        int n = bytes > 65536 ? (iters / 4 > 10 ? iters / 4 : 10) : iters;
        int warm = n / 10 > 2 ? n / 10 : 2;
        for (int i = 0; i < warm; i++)
            MPI_Bcast(buf, (int)bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++)
            MPI_Bcast(buf, (int)bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
        double mine = (MPI_Wtime() - t0) / n * 1e6, worst = 0;
        MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        /* One checked broadcast per size: the timing above must not time a broken one. */
        memset(buf, rank == 0 ? (int)(bytes & 0x7f) + 1 : 0, bytes);
        MPI_Bcast(buf, (int)bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
        for (size_t i = 0; i < bytes; i++)
            if (buf[i] != (char)((bytes & 0x7f) + 1)) {
                bad = 1;
                break;
            }
        if (rank == 0) {
            printf("bcast_us %zu %.2f\n", bytes, worst);
            fflush(stdout);
        }
        if (bytes == max)
            break;
    }
    int anybad = 0;
    MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0 && anybad)
        printf("FAIL: a broadcast delivered wrong bytes\n");
    free(buf);
    MPI_Finalize();
    return anybad;
}
