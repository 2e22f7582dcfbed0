/* The first function of this object is one that nobody calls: gcc 12 links
 * the object's whole __patchable_function_entries to it, so
 * --gc-sections, collecting it, drops the entry of called() too. */
int never_called(int x) { return x * 7; }

__attribute__((noinline)) int called(int x) { return x + 1; }
