/* minimal start-up: stack at the top of SRAM, clear .bss, main(), spin */
    .section .text.start, "ax"
    .global _start
_start:
    la   sp, _fstack
    la   t0, _fbss
    la   t1, _ebss
1:  bgeu t0, t1, 2f
    sw   zero, 0(t0)
    addi t0, t0, 4
    j    1b
2:  call main
3:  j    3b
