/* Bare sites of three forms (issue 19): spin jumps back to its own entry
 * (refused: every turn would count as a call), tiny is one ret with the
 * next function right after it (a trap site), after takes a jump. */
#include <stdio.h>
int spin(int n);
__asm__(".text\n.globl spin\n.type spin,@function\nspin:\n  test %edi,%edi\n  jz 1f\n  dec %edi\n  jmp spin\n1:\n  xor %eax,%eax\n  ret\n.size spin,.-spin\n"
        ".globl tiny\n.type tiny,@function\ntiny:\n  ret\n.size tiny,.-tiny\n"
        ".globl after\n.type after,@function\nafter:\n  mov $7,%eax\n  ret\n.size after,.-after\n");
void tiny(void); int after(void);
int main(void) { tiny(); printf("%d %d\n", spin(3), after()); return 0; }
