/*
 * Preloaded into the UML kernel's host process (LD_PRELOAD): lets a User-mode Linux kernel
 * whose floating-point buffer is smaller than the host's XSAVE area restore its processes'
 * registers.
 *
 * UML keeps each of its processes' FPU state in a buffer of a size fixed when it was built
 * and restores it with ptrace(PTRACE_SETREGSET, NT_X86_XSTATE). The host accepts that
 * request only with the whole XSAVE area (arch/x86/kernel/fpu/regset.c: xstateregs_set),
 * which on a CPU with AMX is about 11 KB, more than Debian's UML 6.1 holds: every restore
 * then fails with EFAULT and UML kills init at boot ("ptrace set fp regs failed, errno = 14").
 *
 * Here a restore with a short buffer reads the whole area first, lays UML's part over it and
 * writes the whole area back. The part beyond UML's buffer (AMX tiles, which no UML process
 * can use: it would need the host's arch_prctl permission) keeps its current contents. A
 * buffer that is already whole goes through untouched, so on other CPUs nothing changes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

/* Larger than any XSAVE area an x86 CPU has (AMX: 11008 bytes). */
#define XSTATE_MAX (64 * 1024)

typedef long (*ptrace_fn)(enum __ptrace_request, ...);

static ptrace_fn real_ptrace(void)
{
    static ptrace_fn real;
    if (!real)
        real = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace");
    return real;
}

long ptrace(enum __ptrace_request request, ...)
{
    va_list ap;
    va_start(ap, request);
    pid_t pid = va_arg(ap, pid_t);
    void *addr = va_arg(ap, void *);
    void *data = va_arg(ap, void *);
    va_end(ap);

    ptrace_fn real = real_ptrace();
    if (request != PTRACE_SETREGSET || (unsigned long)addr != NT_X86_XSTATE || data == NULL)
        return real(request, pid, addr, data);

    struct iovec *given = data;
    static __thread unsigned char whole_area[XSTATE_MAX] __attribute__((aligned(64)));
    struct iovec whole = {whole_area, sizeof whole_area};
    if (real(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &whole) == -1)
        return -1;
    if (given->iov_len >= whole.iov_len)
        return real(request, pid, addr, data);
    memcpy(whole_area, given->iov_base, given->iov_len);
    return real(PTRACE_SETREGSET, pid, (void *)NT_X86_XSTATE, &whole);
}
