/* MPI_Bcast of basic datatypes, 8 B to 1 MiB, from every root, each result checked byte for
 * byte (and the bytes past the end left alone). Written for MPICH's triggered broadcasts
 * (MPIR_CVAR_BCAST_OFI_INTRA_ALGORITHM=trigger_tree_tagged|trigger_tree_rma): under
 * MPIR_CVAR_COLLECTIVE_FALLBACK=error a broadcast MPICH cannot run that way is an error, so a
 * pass means the triggered tree carried every broadcast. Any MPI runs it.
 *
 * Ends with one line on rank 0: "PASS: bcasts=N checked=B errors=0" or "FAIL: ... errors=E".
 * BCAST_TRIGGER_MAX (bytes, default 1 MiB) caps the sizes; BCAST_TRIGGER_ROOTS=0 broadcasts
 * from root 0 only. The reduction that gathers the error counts is an MPI_Reduce, which does
 * not go through MPI_Bcast.
 */
#include <complex.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64 /* bytes past the message, which no rank may see changed */

static uint8_t pattern(size_t i, int root, int type, size_t bytes)
{
    return (uint8_t)(i * 131u + (size_t)root * 17u + (size_t)type * 7u + bytes * 3u + 1u);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    const struct {
        MPI_Datatype type;
        const char *name;
        size_t size;
    } types[] = {
        {MPI_CHAR, "char", sizeof(char)},
        {MPI_SHORT, "short", sizeof(short)},
        {MPI_INT, "int", sizeof(int)},
        {MPI_LONG, "long", sizeof(long)},
        {MPI_UNSIGNED_LONG_LONG, "unsigned long long", sizeof(unsigned long long)},
        {MPI_FLOAT, "float", sizeof(float)},
        {MPI_DOUBLE, "double", sizeof(double)},
        {MPI_C_DOUBLE_COMPLEX, "double complex", sizeof(double complex)},
    };
    const size_t sizes[] = {8, 64, 512, 1000, 4096, 32768, 262144, 1048576};
    size_t max = 1048576;
    const char *env = getenv("BCAST_TRIGGER_MAX");
    if (env)
        max = strtoull(env, NULL, 0);
    int roots = nranks;
    env = getenv("BCAST_TRIGGER_ROOTS");
    if (env && strcmp(env, "0") == 0)
        roots = 1;

    uint8_t *buf = malloc(max + GUARD);
    if (!buf) {
        fprintf(stderr, "rank %d: no memory for %zu bytes\n", rank, max + GUARD);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long errors = 0, bcasts = 0, checked = 0;
    for (int root = 0; root < roots; root++) {
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                size_t count = sizes[s] / types[t].size, bytes;
                if (count == 0)
                    count = 1;
                bytes = count * types[t].size;
                if (bytes > max)
                    continue;
                for (size_t i = 0; i < bytes; i++)
                    buf[i] = rank == root ? pattern(i, root, (int)t, bytes)
                                          : (uint8_t)(0x5a ^ rank ^ i);
                memset(buf + bytes, 0xa5, GUARD);
                MPI_Bcast(buf, (int)count, types[t].type, root, MPI_COMM_WORLD);
                bcasts++;
                long bad = 0;
                size_t first = 0;
                for (size_t i = 0; i < bytes; i++) {
                    if (buf[i] != pattern(i, root, (int)t, bytes)) {
                        if (bad++ == 0)
                            first = i;
                    }
                }
                for (size_t i = 0; i < GUARD; i++) {
                    if (buf[bytes + i] != 0xa5) {
                        if (bad++ == 0)
                            first = bytes + i;
                    }
                }
                checked += (long)bytes;
                if (bad) {
                    errors++;
                    if (errors <= 5)
                        printf("rank %d: root %d, %zu x %s (%zu B): %ld bytes wrong, the first at "
                               "%zu (0x%02x, expected 0x%02x)\n",
                               rank, root, count, types[t].name, bytes, bad, first, buf[first],
                               first < bytes ? pattern(first, root, (int)t, bytes) : 0xa5);
                    fflush(stdout);
                }
            }
        }
    }
    free(buf);

    long mine[2] = {errors, checked}, all[2] = {0, 0};
    MPI_Reduce(mine, all, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s: ranks=%d roots=%d bcasts=%ld checked=%ld errors=%ld\n",
               all[0] == 0 && bcasts > 0 ? "PASS" : "FAIL", nranks, roots, bcasts, all[1],
               all[0]);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
