# A program whose tables lie: each wrong entry must be rejected with its
# reason, and the right ones kept.
        .text
        .globl  good
        .type   good, @function
good:
        call    __fentry__@PLT
        movl    $7, %eax
        ret
        .size   good, .-good

        .globl  wrong_call
        .type   wrong_call, @function
wrong_call:
1:      call    puts@PLT
        ret
        .size   wrong_call, .-wrong_call

        .globl  not_a_call
        .type   not_a_call, @function
not_a_call:
2:      movl    $1, %eax
        ret
        .size   not_a_call, .-not_a_call

        .globl  not_nops
        .type   not_nops, @function
not_nops:
3:      xorl    %eax, %eax
        ret
        .size   not_nops, .-not_nops

        .globl  padded
        .type   padded, @function
padded:
4:      nop
        nop
        nop
        nop
        nop
        movl    $2, %eax
        ret
        .size   padded, .-padded

        .section __mcount_loc, "aw", @progbits
        .quad   good            # right
        .quad   1b              # a call, to puts
        .quad   2b              # not a call at all
        .quad   some_data       # not code
        .quad   good + 1        # inside an instruction

        .section __patchable_function_entries, "aw", @progbits
        .quad   3b              # not NOPs
        .quad   4b              # right
        .quad   4b + 2          # inside the site above

        .data
some_data:
        .quad   0
        .section .note.GNU-stack, "", @progbits
