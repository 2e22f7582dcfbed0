/* What a caller built with gcc's -fipa-ra may assume: a callee that uses
 * no register leaves every register as it was. `keep` (assembly: two
 * `mov` of a register to itself, so its first five bytes hold an interior
 * boundary, then `ret`) is such a callee; `check` (assembly) loads every
 * general register but rsp, and both halves of every vector register
 * with known values, calls `keep` and counts the registers
 * that changed. Traced as a bare site, with its return hijacked, nothing
 * may change. Prints "changed=N rounds=R"; exit status 0.
 *
 * Built with -DKEEP_LIB -shared it is a library with `keep` and
 * `lib_check` (calling `keep` through its PLT, as a library calls its own
 * exported function); with -DKEEP_USER, a program whose `check` calls the
 * library's `keep` (a library call: `keep` is traced behind its guard)
 * and which calls `lib_check` too (the library's own call: skipped by the
 * guard), both counted. */
#include <stdio.h>
#include <stdlib.h>

#define CHECK(NAME, CALL) \
        ".globl " NAME "\n" \
        ".type " NAME ",@function\n" \
        NAME ":\n" \
        "  push %rbx\n  push %rbp\n  push %r12\n  push %r13\n  push %r14\n  push %r15\n" \
        "  sub $8, %rsp\n" \
        /* xmm/ymm k: every byte k + 1 */ \
        "  .irp k,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n" \
        "  mov $(0x0101010101010101 * (\\k + 1)), %rax\n" \
        "  movq %rax, %xmm\\k\n" \
        "  punpcklqdq %xmm\\k, %xmm\\k\n" \
        "  .endr\n" \
        "  mov $0x1111, %rax\n  mov $0x2222, %rbx\n  mov $0x3333, %rcx\n  mov $0x4444, %rdx\n" \
        "  mov $0x5555, %rsi\n  mov $0x6666, %rdi\n  mov $0x7777, %rbp\n  mov $0x8888, %r8\n" \
        "  mov $0x9999, %r9\n  mov $0xaaaa, %r10\n  mov $0xbbbb, %r11\n  mov $0xcccc, %r12\n" \
        "  mov $0xdddd, %r13\n  mov $0xeeee, %r14\n  mov $0xffff, %r15\n" \
        "  call " CALL "\n" \
        /* count in r12 what changed (r12 checked first) */ \
        "  cmp $0xcccc, %r12\n  setne %r12b\n  movzbl %r12b, %r12d\n" \
        "  cmp $0x1111, %rax\n  setne %al\n  movzbl %al, %eax\n  add %rax, %r12\n" \
        "  cmp $0x2222, %rbx\n  setne %bl\n  movzbl %bl, %ebx\n  add %rbx, %r12\n" \
        "  cmp $0x3333, %rcx\n  setne %cl\n  movzbl %cl, %ecx\n  add %rcx, %r12\n" \
        "  cmp $0x4444, %rdx\n  setne %dl\n  movzbl %dl, %edx\n  add %rdx, %r12\n" \
        "  cmp $0x5555, %rsi\n  setne %sil\n  movzbl %sil, %esi\n  add %rsi, %r12\n" \
        "  cmp $0x6666, %rdi\n  setne %dil\n  movzbl %dil, %edi\n  add %rdi, %r12\n" \
        "  cmp $0x7777, %rbp\n  setne %bpl\n  movzbl %bpl, %ebp\n  add %rbp, %r12\n" \
        "  cmp $0x8888, %r8\n  setne %r8b\n  movzbl %r8b, %r8d\n  add %r8, %r12\n" \
        "  cmp $0x9999, %r9\n  setne %r9b\n  movzbl %r9b, %r9d\n  add %r9, %r12\n" \
        "  cmp $0xaaaa, %r10\n  setne %r10b\n  movzbl %r10b, %r10d\n  add %r10, %r12\n" \
        "  cmp $0xbbbb, %r11\n  setne %r11b\n  movzbl %r11b, %r11d\n  add %r11, %r12\n" \
        "  cmp $0xdddd, %r13\n  setne %r13b\n  movzbl %r13b, %r13d\n  add %r13, %r12\n" \
        "  cmp $0xeeee, %r14\n  setne %r14b\n  movzbl %r14b, %r14d\n  add %r14, %r12\n" \
        "  cmp $0xffff, %r15\n  setne %r15b\n  movzbl %r15b, %r15d\n  add %r15, %r12\n" \
        /* both halves of every vector register */ \
        "  .irp k,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n" \
        "  mov $(0x0101010101010101 * (\\k + 1)), %rdx\n" \
        "  movq %xmm\\k, %rax\n  cmp %rdx, %rax\n  setne %al\n  movzbl %al, %eax\n  add %rax, %r12\n" \
        "  pextrq $1, %xmm\\k, %rax\n  cmp %rdx, %rax\n  setne %al\n  movzbl %al, %eax\n  add %rax, %r12\n" \
        "  .endr\n" \
        "  mov %r12, %rax\n" \
        "  add $8, %rsp\n" \
        "  pop %r15\n  pop %r14\n  pop %r13\n  pop %r12\n  pop %rbp\n  pop %rbx\n" \
        "  ret\n" \
        ".size " NAME ", .-" NAME "\n"

#define KEEP                     \
    ".text\n"                    \
    ".globl keep\n"              \
    ".type keep,@function\n"     \
    "keep:\n"                    \
    "  mov %rax, %rax\n"         \
    "  mov %rbx, %rbx\n"         \
    "  ret\n"                    \
    ".size keep, .-keep\n"

#if defined(KEEP_LIB)
__asm__(KEEP CHECK("lib_check", "keep@PLT"));
#elif defined(KEEP_USER)
long check(void);
long lib_check(void);
__asm__(".text\n" CHECK("check", "keep@PLT"));
#else
long check(void);
__asm__(KEEP CHECK("check", "keep"));
#endif

#ifndef KEEP_LIB

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 1000;
    long changed = 0;
    for (int i = 0; i < rounds; i++) {
        changed += check();
#ifdef KEEP_USER
        changed += lib_check();
#endif
    }
    printf("changed=%ld rounds=%d\n", changed, rounds);
    return 0;
}
#endif
