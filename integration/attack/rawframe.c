/* Send UDP datagrams as raw Ethernet frames, bypassing the sender's routing table.
 *
 * usage: rawframe IFNAME DST-MAC DST-IP PORT PAYLOAD [DST-IP PORT PAYLOAD]...
 *
 * Each (DST-IP, PORT, PAYLOAD) triple becomes one IPv4/UDP frame from IFNAME's own MAC and
 * IPv4 address to DST-MAC, sent three times, in the order given. A pod holding NET_RAW
 * (Docker's default capabilities) can address the bridge's MAC with a destination of
 * 127.0.0.1 this way, which its own kernel would never route; the node's loopback guard
 * is what must drop it. Exit 0 when every frame was sent.
 */
#include <arpa/inet.h>
#include <netpacket/packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static unsigned short checksum(const void *data, size_t len) {
    const unsigned char *p = data;
    unsigned long sum = 0;
    for (; len > 1; len -= 2, p += 2) sum += (unsigned long)((p[0] << 8) | p[1]);
    if (len) sum += (unsigned long)(p[0] << 8);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return (unsigned short)~sum;
}

static int parse_mac(const char *text, unsigned char mac[6]) {
    unsigned int b[6];
    if (sscanf(text, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
        return -1;
    for (int i = 0; i < 6; i++) mac[i] = (unsigned char)b[i];
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 6 || (argc - 3) % 3 != 0) {
        fprintf(stderr, "usage: %s IFNAME DST-MAC (DST-IP PORT PAYLOAD)...\n", argv[0]);
        return 2;
    }
    int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_IP));
    if (fd < 0) {
        perror("socket(AF_PACKET)");
        return 1;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, argv[1], IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFINDEX, &ifr) < 0) { perror("SIOCGIFINDEX"); return 1; }
    int ifindex = ifr.ifr_ifindex;
    if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) { perror("SIOCGIFHWADDR"); return 1; }
    unsigned char src_mac[6];
    memcpy(src_mac, ifr.ifr_hwaddr.sa_data, 6);
    if (ioctl(fd, SIOCGIFADDR, &ifr) < 0) { perror("SIOCGIFADDR"); return 1; }
    struct in_addr src_ip = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr;
    unsigned char dst_mac[6];
    if (parse_mac(argv[2], dst_mac) < 0) { fprintf(stderr, "bad MAC %s\n", argv[2]); return 2; }

    struct sockaddr_ll to;
    memset(&to, 0, sizeof to);
    to.sll_family = AF_PACKET;
    to.sll_ifindex = ifindex;
    to.sll_halen = 6;
    memcpy(to.sll_addr, dst_mac, 6);

    for (int a = 3; a + 2 < argc; a += 3) {
        struct in_addr dst_ip;
        if (inet_pton(AF_INET, argv[a], &dst_ip) != 1) {
            fprintf(stderr, "bad IPv4 address %s\n", argv[a]);
            return 2;
        }
        int port = atoi(argv[a + 1]);
        const char *payload = argv[a + 2];
        size_t plen = strlen(payload);
        if (port <= 0 || port > 65535 || plen > 1024) { fprintf(stderr, "bad port or payload\n"); return 2; }

        unsigned char frame[1600];
        memset(frame, 0, sizeof frame);
        struct ether_header *eth = (struct ether_header *)frame;
        memcpy(eth->ether_dhost, dst_mac, 6);
        memcpy(eth->ether_shost, src_mac, 6);
        eth->ether_type = htons(ETHERTYPE_IP);
        struct iphdr *ip = (struct iphdr *)(frame + sizeof *eth);
        struct udphdr *udp = (struct udphdr *)((unsigned char *)ip + sizeof *ip);
        memcpy((unsigned char *)udp + sizeof *udp, payload, plen);
        size_t ulen = sizeof *udp + plen;
        ip->version = 4;
        ip->ihl = 5;
        ip->ttl = 64;
        ip->protocol = IPPROTO_UDP;
        ip->id = htons((unsigned short)(getpid() + a));
        ip->tot_len = htons((unsigned short)(sizeof *ip + ulen));
        ip->saddr = src_ip.s_addr;
        ip->daddr = dst_ip.s_addr;
        ip->check = htons(checksum(ip, sizeof *ip));
        udp->uh_sport = htons(40000);
        udp->uh_dport = htons((unsigned short)port);
        udp->uh_ulen = htons((unsigned short)ulen);
        udp->uh_sum = 0; /* optional for UDP over IPv4 */
        size_t total = sizeof *eth + sizeof *ip + ulen;
        for (int i = 0; i < 3; i++) {
            if (sendto(fd, frame, total, 0, (struct sockaddr *)&to, sizeof to) != (ssize_t)total) {
                perror("sendto");
                return 1;
            }
            usleep(20000);
        }
    }
    return 0;
}
