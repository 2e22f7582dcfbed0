/* The traced program's "module": linked into its own section far away
 * (outside the 256 MB `jal` region on MIPS, beyond the ±128 MB of `bl` on
 * AArch64), so that its sites need veneers to reach the trampolines. */
#define NOINLINE __attribute__((noinline, noipa))

int leaf(int x);

NOINLINE int mod_leaf(int x) { return x * 7 + 2; }

NOINLINE int mod_mid(int x) { return mod_leaf(x) - leaf(x) + 1; }
