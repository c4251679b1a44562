/*
 * The pod sandbox's first process, asynckubelet's own.
 *
 * It holds the pod's namespaces open by doing nothing for as long as the pod
 * lives. When the pod shares one PID namespace it is PID 1 there, so orphaned
 * processes are reparented to it and it must reap them, or they stay zombies.
 * SIGTERM and SIGINT end it with status 0, so `docker stop` finishes at once
 * instead of waiting out the grace period and killing it.
 *
 * Built statically (musl or glibc), so the image holds this one file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef VERSION
#define VERSION "3.10"
#endif

static void write_all(int fd, const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t n = write(fd, text, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        text += n;
        left -= (size_t)n;
    }
}

static void on_stop(int signo) {
    (void)signo;
    _exit(0);
}

static void reap_children(void) {
    int saved = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static void on_child(int signo) {
    (void)signo;
    reap_children();
}

static int install(int signo, void (*handler)(int), int flags) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = handler;
    action.sa_flags = flags;
    sigemptyset(&action.sa_mask);
    return sigaction(signo, &action, NULL);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "-v") == 0) {
        write_all(STDOUT_FILENO, "asynckubelet pause " VERSION "\n");
        return 0;
    }
    if (argc > 1) {
        write_all(STDERR_FILENO, "usage: pause [-v]\n");
        return 2;
    }
    if (getpid() != 1)
        write_all(STDERR_FILENO, "pause: not PID 1: only own children are reaped\n");

    if (install(SIGINT, on_stop, 0) < 0 || install(SIGTERM, on_stop, 0) < 0 ||
        install(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART) < 0) {
        write_all(STDERR_FILENO, "pause: sigaction failed\n");
        return 1;
    }
    /* Children inherited across exec may have exited before the handler existed. */
    reap_children();

    for (;;)
        pause();
    return 42;
}
