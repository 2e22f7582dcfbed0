/* C++ exceptions through functions no compiler prepared (issue 19): wrapper()
 * displaces `push rbx; mov ebx,edi; call thrower` (the call last in the
 * displaced bytes), and every third call of thrower() throws through it
 * to outer(). Prints "s=6003000". */
#include <cstdio>
#include <stdexcept>
__attribute__((noinline)) void thrower(int x) { if (x % 3 == 0) throw std::runtime_error("three"); }
__attribute__((noinline)) int wrapper(int x) { thrower(x); return x + 1; }
__attribute__((noinline)) int outer(int x) { try { return wrapper(x) * 2; } catch (const std::exception &) { return -1; } }
int main() { long s = 0; for (int i = 0; i < 3000; i++) s += outer(i); std::printf("s=%ld\n", s); return 0; }
