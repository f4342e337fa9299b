// 400 MB written by one thread with pwrite in 4 MB parts: into a new file, over the pages a first write left
// cached (same descriptor, and reopened), and into a new file after fallocate. Usage: page_cache_overwrite [PATH]
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t n=400ull<<20, part=4<<20; char*buf=malloc(n); memset(buf,7,n);
  const char*path=argc>1?argv[1]:"/tmp/probe/f.bin";
  for(int rep=0;rep<3;rep++){
    unlink(path);
    int fd=open(path,O_CREAT|O_WRONLY|O_TRUNC,0644);
    double t0=now();
    for(size_t o=0;o<n;o+=part) pwrite(fd,buf+o,part,o);
    double t1=now();
    for(size_t o=0;o<n;o+=part) pwrite(fd,buf+o,part,o);
    double t2=now();
    close(fd);
    int fd2=open(path,O_WRONLY);
    double t3=now();
    for(size_t o=0;o<n;o+=part) pwrite(fd2,buf+o,part,o);
    double t4=now();
    close(fd2);
    unlink(path);
    fd=open(path,O_CREAT|O_WRONLY|O_TRUNC,0644);
    double t5=now(); fallocate(fd,0,0,n); double t6=now();
    for(size_t o=0;o<n;o+=part) pwrite(fd,buf+o,part,o);
    double t7=now(); close(fd);
    printf("fresh %.3f s, overwrite cached %.3f s, reopened overwrite %.3f s, fallocate %.3f then write %.3f s\n",t1-t0,t2-t1,t4-t3,t6-t5,t7-t6);
  }
  unlink(path); return 0;}
