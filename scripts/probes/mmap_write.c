// Write probe (issue 15; docs/perf-notes.md "the difference kept on the device"): 400 MB of big-endian floats
// into a fresh file by one thread's pwrite of 4 MB parts, and through a shared mmap filled by 4, 8 and 16 threads.
// With `ahead` (nineteenth session, "the planes' files filled through a writable mapping"): over a file written
// ahead as zeros, (a) one thread's pwrite converting inline, (b) the file mapped and populated
// (MADV_POPULATE_WRITE, timed apart), then 4 and 8 threads converting into the mapping, then munmap.
// Build: gcc -O2 -pthread -static -o .carry/bench/mmapwrite scripts/probes/mmap_write.c;
// run: mmapwrite DIR [ahead].
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define N (10240L * 10240L)
static float *src;
static uint32_t *dst;
static int threads;
static void *conv(void *arg) {
    long k = (long)arg, a = N * k / threads, b = N * (k + 1) / threads;
    for (long i = a; i < b; ++i) { uint32_t v; memcpy(&v, &src[i], 4); dst[i] = __builtin_bswap32(v); }
    return 0;
}
static void write_zeros(const char *path) {
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    char *z = calloc(4 << 20, 1);
    for (long o = 0; o < N * 4; o += 4 << 20) pwrite(fd, z, 4 << 20, o);
    free(z);
    close(fd);
}
static int written_ahead(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/ahead.bin", dir);
    for (int rep = 0; rep < 3; ++rep) {
        write_zeros(path);
        double t0 = now();
        int fd = open(path, O_WRONLY);
        uint32_t *buf = malloc(4 << 20);
        for (long p = 0; p < N; p += (1 << 20)) {
            for (long i = 0; i < (1 << 20); ++i) { uint32_t v; memcpy(&v, &src[p + i], 4); buf[i] = __builtin_bswap32(v); }
            pwrite(fd, buf, 4 << 20, p * 4);
        }
        close(fd);
        free(buf);
        printf("rep %d: pwrite over cached zeros %.3f s\n", rep, now() - t0);
        int ts[2] = {4, 8};
        for (int j = 0; j < 2; ++j) {
            write_zeros(path);
            double a0 = now();
            fd = open(path, O_RDWR);
            dst = mmap(0, N * 4, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            int r = madvise(dst, N * 4, MADV_POPULATE_WRITE);
            double a1 = now();
            threads = ts[j];
            pthread_t th[64];
            for (long k = 0; k < threads; ++k) pthread_create(&th[k], 0, conv, (void *)k);
            for (int k = 0; k < threads; ++k) pthread_join(th[k], 0);
            double a2 = now();
            munmap(dst, N * 4);
            close(fd);
            double a3 = now();
            printf("rep %d: mmap+populate ahead %.3f s (madvise %s), %d threads convert %.3f s, munmap %.3f s\n", rep,
                   a1 - a0, r == 0 ? "ok" : strerror(errno), threads, a2 - a1, a3 - a2);
        }
        fflush(stdout);
    }
    unlink(path);
    return 0;
}
int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    src = malloc(N * 4);
    for (long i = 0; i < N; ++i) src[i] = (float)(i % 1000) * 0.5f;
    if (argc > 2 && strcmp(argv[2], "ahead") == 0) return written_ahead(dir);
    char path[512];
    for (int rep = 0; rep < 3; ++rep) {
        // (a) pwrite 4 MB parts, converted inline (one thread: the conversion is cheap next to the copy).
        snprintf(path, sizeof path, "%s/a%d.bin", dir, rep);
        double t0 = now();
        int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
        ftruncate(fd, N * 4);
        uint32_t *buf = malloc(4 << 20);
        for (long p = 0; p < N; p += (1 << 20)) {
            long n = N - p < (1 << 20) ? N - p : (1 << 20);
            for (long i = 0; i < n; ++i) { uint32_t v; memcpy(&v, &src[p + i], 4); buf[i] = __builtin_bswap32(v); }
            pwrite(fd, buf, n * 4, p * 4);
        }
        close(fd);
        double ta = now() - t0;
        // (b) mmap + T threads.
        double tb[3];
        int ts[3] = {4, 8, 16};
        for (int j = 0; j < 3; ++j) {
            snprintf(path, sizeof path, "%s/b%d_%d.bin", dir, rep, j);
            t0 = now();
            fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
            ftruncate(fd, N * 4);
            dst = mmap(0, N * 4, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            threads = ts[j];
            pthread_t th[64];
            for (long k = 0; k < threads; ++k) pthread_create(&th[k], 0, conv, (void *)k);
            for (int k = 0; k < threads; ++k) pthread_join(th[k], 0);
            munmap(dst, N * 4);
            close(fd);
            tb[j] = now() - t0;
        }
        printf("rep %d: pwrite %.3f s; mmap 4 threads %.3f s, 8 %.3f s, 16 %.3f s\n", rep, ta, tb[0], tb[1], tb[2]);
        fflush(stdout);
        char cmd[600]; snprintf(cmd, sizeof cmd, "rm -f %s/a%d.bin %s/b%d_*.bin", dir, rep, dir, rep); system(cmd);
    }
    return 0;
}
