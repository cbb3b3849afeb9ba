/*
 * paddock-idle is what an idle sandbox's PID 1 runs while its guest agent
 * hibernates (see package internal/agent, hibernate.go).
 *
 *     paddock-idle FD AGENT [ARG...]
 *
 * The agent of a sandbox in which nothing runs, to which nobody is
 * connected and which had no call for the spare shim's idle time execs
 * this program in its own place: the same PID 1, holding the agent's
 * listening socket as descriptor FD. A Go process costs the host about
 * 1.3 MiB of private memory and six tasks; this one a few pages and one
 * task. It waits until a connection is pending on FD, then execs AGENT
 * with ARGs (the agent's own command line, naming FD and its saved
 * state), which accepts that connection: nothing the daemon sends is lost,
 * it waits in the socket's backlog for the agent's start.
 *
 * Meanwhile it reaps any child that ends, as PID 1 must. It installs no
 * signal handler, so no signal sent from inside the sandbox reaches it
 * (the kernel drops those for a PID 1 without a handler), and it makes
 * itself undumpable first thing, as the agent does. If the agent cannot
 * be exec'd it exits, which ends the sandbox: the daemon sees its init
 * die, as for any agent that dies.
 *
 * It uses only the C library's system call wrappers, is linked
 * statically, and is not built with Go on purpose: its whole point is to
 * cost less than a Go runtime.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

static void reap(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: paddock-idle FD AGENT [ARG...]\n");
		return 2;
	}
	char *end;
	errno = 0;
	long fd = strtol(argv[1], &end, 10);
	if (errno || *end || end == argv[1] || fd < 0 || fd > 1 << 20) {
		fprintf(stderr, "paddock-idle: bad descriptor %s\n", argv[1]);
		return 2;
	}
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &chld, &old) != 0) {
		perror("paddock-idle: sigprocmask");
		return 1;
	}
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		perror("paddock-idle: signalfd");
		return 1;
	}
	reap();
	for (;;) {
		struct pollfd p[2] = {{.fd = (int)fd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		int n = poll(p, 2, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			perror("paddock-idle: poll");
			break; /* exec the agent: it can serve without us */
		}
		if (p[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) == sizeof si)
				;
			reap();
		}
		if (p[0].revents & POLLNVAL) {
			fprintf(stderr, "paddock-idle: descriptor %ld is not open\n", fd);
			break;
		}
		if (p[0].revents)
			break; /* a connection is pending (or the socket failed) */
	}
	close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	execv(argv[2], &argv[2]);
	perror("paddock-idle: exec the agent");
	return 127;
}
