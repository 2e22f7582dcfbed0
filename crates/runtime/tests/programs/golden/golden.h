/* Shared by the golden programs: functions that stay real calls in every
 * build (no inlining, no interprocedural shortcuts) and a side effect that
 * keeps each call from being folded away. */
#ifndef GOLDEN_H
#define GOLDEN_H

#if defined(__clang__)
#define TRACED __attribute__((noinline))
#else
#define TRACED __attribute__((noinline, noipa))
#endif

static volatile int sink;

#endif
