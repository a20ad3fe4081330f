/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * A dynamic process under MPI_THREAD_MULTIPLE: the parent (one rank) spawns one
 * child, the same program, on MPI_COMM_SELF and enters MPI_Barrier on the intercommunicator;
 * the child enters MPI_Barrier on its parent communicator. Then one message each way over the
 * intercommunicator, checked, and both disconnect. Over rscntr(sockets) under
 * MPI_THREAD_MULTIPLE the parent waited forever for the child's message: the child's inject was
 * still in sockets' transmit ring when MPI_Finalize closed the context (MPICH flushes it only
 * for a provider named "sockets"; under MPI_Init its MPI_Comm_disconnect happened to progress
 * it). prov_test/mpi/spawn_barrier.sh runs it over each core, directly and over rscntr.
 *
 *   mpiexec -n 1 spawn_barrier [single]   (single: MPI_Init instead of MPI_THREAD_MULTIPLE)
 *
 * The parent prints "PASS: spawn_barrier" when everything checked held; any failure prints
 * FAIL and exits non-zero.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int init(int argc, char **argv)
{
	int single = argc > 1 && !strcmp(argv[1], "single");
	if (single)
		return MPI_Init(&argc, &argv) == MPI_SUCCESS ? 0 : 1;
	int provided = -1;
	if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
		return 1;
	if (provided != MPI_THREAD_MULTIPLE) {
		printf("FAIL: MPI_THREAD_MULTIPLE asked, %d provided\n", provided);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	MPI_Comm parent, inter;
	int errors = 0, value;
	if (init(argc, argv))
		return 1;
	MPI_Comm_get_parent(&parent);
	if (parent == MPI_COMM_NULL) {
		int errcodes[1] = { -1 };
		char *args[] = { argc > 1 ? argv[1] : NULL, NULL };
		printf("parent: spawning one child (%s)\n", argc > 1 ? argv[1] : "thread multiple");
		fflush(stdout);
		MPI_Comm_spawn(argv[0], args[0] ? args : MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0,
			       MPI_COMM_SELF, &inter, errcodes);
		if (errcodes[0] != MPI_SUCCESS) {
			printf("FAIL: spawn error code %d\n", errcodes[0]);
			errors++;
		}
		printf("parent: spawned, entering the barrier\n");
		fflush(stdout);
		MPI_Barrier(inter);
		printf("parent: barrier returned\n");
		fflush(stdout);
		value = 0x5a5a;
		MPI_Send(&value, 1, MPI_INT, 0, 7, inter);
		value = 0;
		MPI_Recv(&value, 1, MPI_INT, 0, 8, inter, MPI_STATUS_IGNORE);
		if (value != 0x5a5a + 1) {
			printf("FAIL: the child answered %#x, expected %#x\n", value, 0x5a5a + 1);
			errors++;
		}
		printf("parent: message exchanged, disconnecting\n");
		fflush(stdout);
		MPI_Comm_disconnect(&inter);
		if (!errors)
			printf("PASS: spawn_barrier\n");
	} else {
		printf("child: entering the barrier\n");
		fflush(stdout);
		MPI_Barrier(parent);
		printf("child: barrier returned\n");
		fflush(stdout);
		MPI_Recv(&value, 1, MPI_INT, 0, 7, parent, MPI_STATUS_IGNORE);
		value++;
		MPI_Send(&value, 1, MPI_INT, 0, 8, parent);
		printf("child: message exchanged, disconnecting\n");
		fflush(stdout);
		MPI_Comm_disconnect(&parent);
		printf("child: disconnected\n");
	}
	fflush(stdout);
	MPI_Finalize();
	return errors ? 1 : 0;
}
