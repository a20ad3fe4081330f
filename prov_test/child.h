/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/* Running this test program again as a child process with a changed environment: how the
 * prov_test programs check what happens when a variable is set at load time (rscntr reads its
 * parameters once), when a test hook is on, or with a lowered resource limit. */
#ifndef RSCNTR_CHILD_H
#define RSCNTR_CHILD_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The program's own path, resolved before any child is made: under valgrind /proc/self/exe
 * names valgrind itself once exec'ed, but readlink() reports the client program. */
static char self_path[PATH_MAX];

static inline int child_init(void)
{
	ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
	if (n <= 0)
		return -1;
	self_path[n] = '\0';
	return 0;
}

static inline int env_name_is(const char *entry, const char *assignment)
{
	size_t len = strcspn(assignment, "=");
	return !strncmp(entry, assignment, len) && entry[len] == '=';
}

/* Runs `self_path mode` with `extra` applied to the environment: "VAR=value" sets VAR, a bare
 * "VAR" unsets it (NULL-terminated list). Its stdout and stderr go to `out` (NUL-terminated,
 * truncated to outsz). The child is killed after timeout_s seconds. Returns its exit code,
 * 128 + the signal that ended it, or -1 if it could not be run. */
static inline int run_self(const char *mode, const char *const *extra, char *out, size_t outsz,
			   int timeout_s)
{
	size_t n_env = 0, n_extra = 0, k = 0;
	while (environ[n_env])
		n_env++;
	while (extra && extra[n_extra])
		n_extra++;
	char **envp = calloc(n_env + n_extra + 1, sizeof(char *));
	if (!envp || !self_path[0])
		return -1;
	for (size_t i = 0; i < n_env; i++) {
		int replaced = 0;
		for (size_t j = 0; j < n_extra; j++)
			replaced |= env_name_is(environ[i], extra[j]);
		if (!replaced)
			envp[k++] = environ[i];
	}
	for (size_t j = 0; j < n_extra; j++)
		if (strchr(extra[j], '='))
			envp[k++] = (char *) extra[j];
	envp[k] = NULL;

	int p[2];
	if (pipe(p)) {
		free(envp);
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		free(envp);
		return -1;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		char *argv[] = { self_path, (char *) mode, NULL };
		execve(self_path, argv, envp);
		_exit(127);
	}
	free(envp);
	close(p[1]);
	size_t used = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left_ms = timeout_s * 1000L - ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L);
		if (left_ms <= 0) {
			kill(pid, SIGKILL);
			break;
		}
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		int ready = poll(&pfd, 1, (int) left_ms);
		if (ready < 0 && errno != EINTR)
			break;
		if (ready <= 0)
			continue; /* interrupted, or the deadline: checked above */
		char buf[4096];
		ssize_t r = read(p[0], buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		size_t take = (size_t) r < outsz - 1 - used ? (size_t) r : outsz - 1 - used;
		memcpy(out + used, buf, take);
		used += take;
	}
	out[used] = '\0';
	close(p[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

/* Prints a child's output, indented, for the log of a failed check. */
static inline void show_child(const char *what, const char *out)
{
	fprintf(stderr, "---- output of %s:\n", what);
	for (const char *l = out; *l;) {
		const char *e = strchr(l, '\n');
		int len = e ? (int) (e - l) : (int) strlen(l);
		fprintf(stderr, "    %.*s\n", len, l);
		l += len + (e ? 1 : 0);
	}
}

#endif
