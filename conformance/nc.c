/* nc for the e2e test images: busybox's nc has no UDP, and the suite's node-to-pod UDP
 * check runs `echo hostName | nc -w 1 -u IP PORT` (upstream's Alpine busybox has -u).
 * With -u: send standard input as one datagram, print the first reply (waiting -w seconds,
 * default 1). Without -u: busybox nc with the same arguments. */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int udp = 0, wait = 1, i;
    const char *host = NULL, *port = NULL;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-u") == 0) udp = 1;
        else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc) wait = atoi(argv[++i]);
        else if (strncmp(argv[i], "-w", 2) == 0) wait = atoi(argv[i] + 2);
        else if (!host) host = argv[i];
        else if (!port) port = argv[i];
    }
    if (!udp) {
        argv[0] = "nc";
        execv("/bin/busybox", argv);
        perror("nc: busybox");
        return 1;
    }
    if (!host || !port) {
        fprintf(stderr, "usage: nc -u [-w SEC] HOST PORT\n");
        return 2;
    }
    struct addrinfo hints = {0}, *addr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, port, &hints, &addr) != 0) {
        fprintf(stderr, "nc: bad address %s %s\n", host, port);
        return 1;
    }
    int fd = socket(addr->ai_family, SOCK_DGRAM, 0);
    char buf[65536];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf && (n = read(0, buf + len, sizeof buf - len)) > 0) len += (size_t)n;
    if (fd < 0 || sendto(fd, buf, len, 0, addr->ai_addr, addr->ai_addrlen) < 0) {
        perror("nc: send");
        return 1;
    }
    struct timeval tv = {wait > 0 ? wait : 1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) fwrite(buf, 1, (size_t)n, stdout);
    return 0;
}
