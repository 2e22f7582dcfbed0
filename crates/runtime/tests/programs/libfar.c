/* A library for the far-module test: mapped near 0x7f..., terabytes away
 * from the executable, so its sites need trampolines of their own. */
#define NOINLINE __attribute__((noinline, noipa))
NOINLINE int lib_leaf(int x) { return x + 1; }
NOINLINE int lib_twice(int x) { return lib_leaf(lib_leaf(x)); }
