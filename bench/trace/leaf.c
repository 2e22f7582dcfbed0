/* The traced function of bench/trace.sh: built with instrumentation. */
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
