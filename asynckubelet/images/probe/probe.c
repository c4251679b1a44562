/*
 * The probe helper, asynckubelet's own: HTTP and TCP probes from inside a pod's
 * network namespace, for nodes that cannot reach the pod's address (a remote
 * Docker daemon, Docker Desktop, a rootless engine).
 *
 * A helper container runs `probe wait` with the pod sandbox's network namespace
 * (NetworkMode container:<sandbox>); the agent runs the probes through Docker
 * exec, so the user's image needs no wget, nc or shell. One line tells the
 * verdict, so the agent can word it as the kubelet does:
 *
 *   probe tcp HOST PORT TIMEOUT_MS                -> ok | dial ERRNO | timeout dial
 *   probe http HOST PORT PATH TIMEOUT_MS HEADER... -> status CODE (then up to 10 KiB
 *                                                     of the body) | dial ERRNO |
 *                                                     timeout dial | timeout headers |
 *                                                     error TEXT
 *
 * HEADER is a whole "Name: value" line; the request is an HTTP/1.1 GET with
 * exactly those headers and "Connection: close". TIMEOUT_MS bounds the whole
 * exchange. The exit status is 0 for any verdict and 2 for a usage error.
 * `probe wait` does nothing until SIGTERM or SIGINT, then exits 0.
 *
 * Built statically (musl or glibc), so the image holds this one file.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define MAX_BODY 10240
#define MAX_HEAD 16384

static void on_stop(int signo) {
    (void)signo;
    _exit(0);
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int left_ms(long long deadline) {
    long long left = deadline - now_ms();
    return left > 0 ? (int)left : 0;
}

/* Connect within the deadline; the socket, or -1 with the verdict printed. */
static int dial(const char *host, const char *port, long long deadline) {
    struct addrinfo hints, *found = NULL, *ai;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, port, &hints, &found);
    if (rc != 0) {
        printf("error lookup %s: %s\n", host, gai_strerror(rc));
        return -1;
    }
    int err = ECONNREFUSED;
    for (ai = found; ai != NULL; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            freeaddrinfo(found);
            return fd;
        }
        if (errno != EINPROGRESS) {
            err = errno;
            close(fd);
            continue;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int ready = poll(&p, 1, left_ms(deadline));
        if (ready == 0) {
            close(fd);
            freeaddrinfo(found);
            printf("timeout dial\n");
            return -1;
        }
        socklen_t len = sizeof(err);
        if (ready < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
            err = errno;
        }
        if (err == 0) {
            freeaddrinfo(found);
            return fd;
        }
        close(fd);
    }
    freeaddrinfo(found);
    printf("dial %d\n", err);
    return -1;
}

static int send_all(int fd, const char *data, size_t size, long long deadline) {
    while (size > 0) {
        ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, left_ms(deadline)) <= 0)
                return -1;
            continue;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

/* Read what arrives before the deadline: bytes read, 0 at the end, -1 on timeout,
 * -2 on an error. */
static ssize_t recv_some(int fd, char *buf, size_t size, long long deadline) {
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, left_ms(deadline));
        if (ready == 0)
            return -1;
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            return -2;
        }
        ssize_t n = recv(fd, buf, size, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        return n < 0 ? -2 : n;
    }
}

static int do_tcp(char **argv) {
    long long deadline = now_ms() + atoll(argv[2]);
    int fd = dial(argv[0], argv[1], deadline);
    if (fd < 0)
        return 0;
    close(fd);
    printf("ok\n");
    return 0;
}

static int do_http(int argc, char **argv) {
    const char *host = argv[0], *port = argv[1], *path = argv[2];
    long long deadline = now_ms() + atoll(argv[3]);
    size_t size = strlen(path) + 64;
    for (int i = 4; i < argc; i++)
        size += strlen(argv[i]) + 2;
    char *request = malloc(size);
    if (request == NULL) {
        printf("error out of memory\n");
        return 0;
    }
    int used = snprintf(request, size, "GET %s HTTP/1.1\r\n", path);
    for (int i = 4; i < argc; i++)
        used += snprintf(request + used, size - (size_t)used, "%s\r\n", argv[i]);
    used += snprintf(request + used, size - (size_t)used, "Connection: close\r\n\r\n");

    int fd = dial(host, port, deadline);
    if (fd < 0)
        return 0;
    if (send_all(fd, request, (size_t)used, deadline) < 0) {
        printf("error write: %s\n", strerror(errno));
        close(fd);
        return 0;
    }
    static char head[MAX_HEAD + MAX_BODY + 1];
    size_t got = 0;
    char *end = NULL;
    while (end == NULL) {
        if (got >= MAX_HEAD) {
            printf("error the response's header is larger than %d bytes\n", MAX_HEAD);
            close(fd);
            return 0;
        }
        ssize_t n = recv_some(fd, head + got, MAX_HEAD - got, deadline);
        if (n == -1) {
            printf("timeout headers\n");
            close(fd);
            return 0;
        }
        if (n == 0) {
            printf("error EOF\n");
            close(fd);
            return 0;
        }
        if (n < 0) {
            printf("error read: %s\n", strerror(errno));
            close(fd);
            return 0;
        }
        got += (size_t)n;
        head[got] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    int code = 0;
    if (sscanf(head, "HTTP/%*d.%*d %d", &code) != 1 && sscanf(head, "HTTP/%*d %d", &code) != 1) {
        printf("error malformed HTTP response\n");
        close(fd);
        return 0;
    }
    char *body = end + 4;
    size_t have = got - (size_t)(body - head);
    while (have < MAX_BODY) {
        ssize_t n = recv_some(fd, body + have, MAX_BODY - have, deadline);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    close(fd);
    printf("status %d\n", code);
    fwrite(body, 1, have, stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "wait") == 0) {
        signal(SIGTERM, on_stop);
        signal(SIGINT, on_stop);
        for (;;)
            pause();
    }
    if (argc == 5 && strcmp(argv[1], "tcp") == 0)
        return do_tcp(argv + 2);
    if (argc >= 6 && strcmp(argv[1], "http") == 0)
        return do_http(argc - 2, argv + 2);
    fprintf(stderr, "usage: probe wait | probe tcp HOST PORT TIMEOUT_MS | "
                    "probe http HOST PORT PATH TIMEOUT_MS [HEADER]...\n");
    return 2;
}
