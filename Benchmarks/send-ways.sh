#!/usr/bin/env bash
# What it costs this machine to send a cold 2 MiB body to a loopback peer, by way (issue 39): the sender's and the
# receiver's CPU per body, measured with getrusage, outside hlscache. A C program sends FILES different 2 MiB files
# (written once, in the page cache; not in the CPU's caches when sent) to a peer process that reads 8 KiB at a time,
# as wrk does, over a blocking loopback TCP connection:
#   sendfile   sendfile(2) from the file (nginx's and hlscache's file path)
#   memory     write(2) from a copy in anonymous memory (a memory tier's; Varnish -s malloc)
#   mapped     write(2) from an mmap of the file (MAP_POPULATE, 512 KiB at a time, unmapped after each)
#   pread      pread(2) 512 KiB into a buffer, then write(2)
# With BUSY_THREAD=1 the sender has a second thread spinning on the other core, as a server's other event loop is:
# then every munmap must shoot down that core's TLB (an inter-processor interrupt, dear in a virtual machine).
# Prints one line per way and round: sender, receiver and total CPU µs per body.
#
#   Benchmarks/send-ways.sh [rounds] [files]          (defaults 3 and 200)
#   WAYS="sendfile mapped" BUSY_THREAD=1 Benchmarks/send-ways.sh
set -euo pipefail
rounds=${1:-3}
files=${2:-200}
ways=${WAYS:-sendfile memory mapped pread}
work=$(mktemp -d /tmp/hlscache-send-ways.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/ways.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#define SIZE (2 << 20)
#define WINDOW (512 << 10)
static double cpu(int who) {
  struct rusage r;
  getrusage(who, &r);
  return r.ru_utime.tv_sec * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_sec * 1e6 + r.ru_stime.tv_usec;
}
static void all(int s, const char *p, size_t n) {
  while (n) { ssize_t w = write(s, p, n); if (w <= 0) { perror("write"); exit(1); } p += w; n -= w; }
}
static volatile int stop;
static void *spin(void *arg) { (void)arg; while (!stop) {} return 0; }
int main(int argc, char **argv) {
  int n = atoi(argv[1]); const char *way = argv[2], *dir = argv[3]; int busy = argc > 4 && atoi(argv[4]);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0}; a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(0x7f000001);
  socklen_t length = sizeof a;
  bind(listener, (void *)&a, sizeof a); getsockname(listener, (void *)&a, &length); listen(listener, 1);
  int report[2]; if (pipe(report)) return 1;
  if (fork() == 0) {
    int c = socket(AF_INET, SOCK_STREAM, 0); connect(c, (void *)&a, sizeof a);
    char buffer[8192]; double before = cpu(RUSAGE_SELF);
    while (read(c, buffer, sizeof buffer) > 0) {}
    double used = cpu(RUSAGE_SELF) - before;
    if (write(report[1], &used, sizeof used) != sizeof used) _exit(1);
    _exit(0);
  }
  int s = accept(listener, 0, 0);
  char path[4096], **copies = calloc(n, sizeof *copies), *window = malloc(WINDOW);
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/f%04d", dir, i);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
      fd = open(path, O_CREAT | O_WRONLY, 0644); char *b = malloc(SIZE);
      for (int j = 0; j < SIZE; j++) b[j] = rand();
      all(fd, b, SIZE); free(b); close(fd); fd = open(path, O_RDONLY);
    }
    if (!strcmp(way, "memory")) { copies[i] = malloc(SIZE); if (pread(fd, copies[i], SIZE, 0) != SIZE) return 1; }
    close(fd);
  }
  pthread_t spinner; if (busy) pthread_create(&spinner, 0, spin, 0);
  double before = cpu(RUSAGE_THREAD);
  for (int i = 0; i < n; i++) {
    if (copies[i]) { all(s, copies[i], SIZE); continue; }
    snprintf(path, sizeof path, "%s/f%04d", dir, i);
    int fd = open(path, O_RDONLY);
    if (!strcmp(way, "sendfile")) {
      off_t o = 0; while (o < SIZE) if (sendfile(s, fd, &o, SIZE - o) <= 0) { perror("sendfile"); return 1; }
    } else if (!strcmp(way, "mapped")) {
      for (off_t o = 0; o < SIZE; o += WINDOW) {
        char *m = mmap(0, WINDOW, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, o); all(s, m, WINDOW); munmap(m, WINDOW);
      }
    } else if (!strcmp(way, "pread")) {
      for (off_t o = 0; o < SIZE; o += WINDOW) { if (pread(fd, window, WINDOW, o) != WINDOW) return 1; all(s, window, WINDOW); }
    }
    close(fd);
  }
  double sender = (cpu(RUSAGE_THREAD) - before) / n;
  stop = 1; if (busy) pthread_join(spinner, 0);
  shutdown(s, SHUT_WR); close(s);
  double receiver; if (read(report[0], &receiver, sizeof receiver) != sizeof receiver) return 1;
  wait(0); receiver /= n;
  printf("%-9s sender %6.0f  receiver %6.0f  total %6.0f\n", way, sender, receiver, sender + receiver);
  return 0;
}
C
cc -O2 -pthread -o "$work/ways" "$work/ways.c"
mkdir -p "$work/files"
"$work/ways" "$files" sendfile "$work/files" >/dev/null  # writes the files, and warms the page cache
echo "CPU µs per 2 MiB body, $files files, busy second thread: ${BUSY_THREAD:-0}; load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  for way in $ways; do
    printf 'round %d  ' "$round"
    "$work/ways" "$files" "$way" "$work/files" "${BUSY_THREAD:-0}"
  done
done
