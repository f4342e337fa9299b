// Write probe (issue 15, nineteenth session): can the significance's 400 MB be written faster after the file
// has been written ahead as zeros (as `subtract` does)? (a) one thread's pwrite of 4 MB parts over the cached
// zeros, converting inline; (b) the file mapped shared and its pages made writable ahead
// (madvise MADV_POPULATE_WRITE, timed apart: it would run beside the fit), then T threads convert into the
// mapping (the tail), then munmap. Build: gcc -O2 -pthread -static -o .carry/mmap_ahead
// scripts/probes/mmap_ahead.c; run: mmap_ahead DIR.
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
int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    src = malloc(N * 4);
    for (long i = 0; i < N; ++i) src[i] = (float)(i % 1000) * 0.5f;
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
