/*
 * A user's web server for the remote-daemon tests, in an image that holds nothing
 * else: no shell, no wget, no nc. Probes and hooks against it can only work if the
 * node brings its own tools into the pod's network namespace.
 *
 *   tinyweb PORT STATUS [DELAY_S]
 *
 * Waits DELAY_S seconds, then answers every request on 0.0.0.0:PORT with STATUS and
 * prints its request line. On SIGTERM it prints "TERM" and exits 0.
 */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void on_term(int signo) {
    (void)signo;
    static const char text[] = "TERM\n";
    write(STDOUT_FILENO, text, sizeof(text) - 1);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: tinyweb PORT STATUS [DELAY_S]\n");
        return 2;
    }
    signal(SIGTERM, on_term);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 3)
        sleep((unsigned)atoi(argv[3]));
    int server = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(argv[1]));
    if (bind(server, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(server, 16) < 0) {
        perror("tinyweb: listen");
        return 1;
    }
    printf("listening on %s\n", argv[1]);
    for (;;) {
        int client = accept(server, NULL, NULL);
        if (client < 0)
            continue;
        char request[4096];
        ssize_t got = recv(client, request, sizeof(request) - 1, 0);
        if (got > 0) {
            request[got] = '\0';
            request[strcspn(request, "\r\n")] = '\0';
            printf("%s\n", request);
            char response[256];
            int size = snprintf(response, sizeof(response),
                                "HTTP/1.1 %s tinyweb\r\nContent-Length: 3\r\n"
                                "Connection: close\r\n\r\nok\n",
                                argv[2]);
            send(client, response, (size_t)size, MSG_NOSIGNAL);
        }
        close(client);
    }
}
