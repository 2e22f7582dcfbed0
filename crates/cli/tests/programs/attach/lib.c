/* The shared library of work.c: a module mapped far from the program, so
 * that its sites need trampolines of their own (tests/attach.rs). */
__attribute__((noinline)) int lib_twice(int x) { return 2 * x + 1; }
