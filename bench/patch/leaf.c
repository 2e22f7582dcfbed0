/* leaf: the traced function of bench/patch.sh, part 2 (cost of one traced
 * call). Built with -O2 -fpatchable-function-entry=5 in its own file, so the
 * driver (call.c) cannot inline it or see through it. */
__attribute__((noinline)) unsigned leaf(unsigned x) { return x * 2654435761u + 1; }
