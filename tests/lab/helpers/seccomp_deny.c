/* Runs a command under a seccomp filter that refuses some system calls with EPERM, as a
 * container runtime's profile does: seccomp_deny ptrace,unshare -- CMD ARGS...
 * (tests/lab/test_lab_faults.py builds it with cc and runs the lab behind it). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp_deny: unknown architecture"
#endif

static long number(const char *name) {
    if (strcmp(name, "ptrace") == 0) return SYS_ptrace;
    if (strcmp(name, "unshare") == 0) return SYS_unshare;
    fprintf(stderr, "seccomp_deny: unknown system call %s\n", name);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: seccomp_deny CALL[,CALL] -- COMMAND [ARGS]\n");
        return 2;
    }
    struct sock_filter code[64];
    int n = 0;
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (char *name = strtok(argv[1], ","); name != NULL && n < 60; name = strtok(NULL, ",")) {
        code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, number(name), 0, 1);
        code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
    }
    code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog program = {.len = (unsigned short)n, .filter = code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("seccomp_deny: prctl");
        return 2;
    }
    execvp(argv[3], argv + 3);
    perror("seccomp_deny: exec");
    return 127;
}
