/* A library that work.c loads and unloads while fntrace is attached
 * (tests/attach.rs): its sites must be taken in at once, and given back. */
__attribute__((noinline)) int plug_inner(int x) { return x * 7; }
__attribute__((noinline)) int plug_work(int x) { return plug_inner(x) + 2; }
