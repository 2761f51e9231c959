/* GA-2's firmware: copy the payload's external-memory image into DRAM, then for each of its programs load the
   instructions into GA-2 through its CSRs, start it, wait for done and print the status, the six counters and
   the whole external memory on the UART. No libc, no BIOS: it runs from the ROM's first word. */
#include <stdint.h>
#include <generated/csr.h>
#include <generated/mem.h>
#include <generated/soc.h>
#include <generated/sdram_phy.h>
#include "payload.h"

static const struct ga2_payload *const payload = (const struct ga2_payload *)(ROM_BASE + GA2_PAYLOAD_OFFSET);

static void put(char c) { while (uart_txfull_read()) {} uart_rxtx_write(c); }
static void say(const char *s) { while (*s) put(*s++); }
static void hex(uint32_t v, int digits) { while (digits--) put("0123456789abcdef"[(v >> (4 * digits)) & 15]); }
static void field(const char *name, uint32_t v) { say(name); say("=0x"); hex(v, 8); put('\n'); }

/* VexRiscv's L1 data cache is write-through: invalidating it is enough (its custom instruction). */
static void flush_l1(void) { __asm__ volatile(".word(0x500F)" ::: "memory"); }
/* LiteX's L2 is write-back and direct-mapped: reading twice its size elsewhere evicts every line. */
static void flush_l2(void) {
#ifdef CONFIG_L2_SIZE
    for (unsigned i = 0; i < 2 * CONFIG_L2_SIZE / 4; i++) (void)((volatile uint32_t *)MAIN_RAM_BASE)[i];
#endif
}

/* The SDRAM's start-up (LiteX's generated init_sequence for the module: precharge, refreshes, the mode
   register) under software control of the DFI, then the controller takes it (cdelay: LiteX's hw/common.h). */
static void sdram_start(void) {
    sdram_dfii_control_write(DFII_CONTROL_CKE | DFII_CONTROL_ODT | DFII_CONTROL_RESET_N);
    init_sequence();
    sdram_dfii_control_write(DFII_CONTROL_SEL);
}

static void load(const uint32_t *words, uint32_t n) {
    for (uint32_t i = 0; i <= n; i++) {             /* and a zero word after the last: running past is ILLEGAL */
        ga2_imem_addr_write(i);
        ga2_imem_data0_write(i < n ? words[4 * i + 0] : 0);
        ga2_imem_data1_write(i < n ? words[4 * i + 1] : 0);
        ga2_imem_data2_write(i < n ? words[4 * i + 2] : 0);
        ga2_imem_data3_write(i < n ? words[4 * i + 3] : 0);
        ga2_imem_write_write(1);
    }
}

static void dump(volatile const uint8_t *ext, uint32_t bytes) {
    say("EXT\n");
    for (uint32_t i = 0; i < bytes; i++) {
        hex(ext[i], 2);
        if ((i & 31) == 31 || i + 1 == bytes) put('\n');
    }
    say("EXTEND\n");
}

int main(void) {
    say("GA-2 firmware\n");
    if (payload->magic != GA2_PAYLOAD_MAGIC || payload->version != GA2_PAYLOAD_VERSION) {
        field("bad_payload", payload->magic);
        say("END\n");
        for (;;) ;
    }
    sdram_start();
    volatile uint32_t *ext = (volatile uint32_t *)GA2_EXT_BASE;
    const uint32_t *image = (const uint32_t *)((const uint8_t *)payload + payload->ext_offset);
    for (uint32_t i = 0; i < payload->ext_bytes / 4; i++) ext[i] = image[i];
    flush_l2();                                     /* GA-2 reads the DRAM behind the L2 */
    for (uint32_t p = 0; p < payload->programs; p++) {
        const struct ga2_program *prog = &payload->program[p];
        load((const uint32_t *)((const uint8_t *)payload + prog->offset), prog->instructions);
        ga2_start_write(1);
        uint32_t status;
        do status = ga2_status_read(); while (!(status & 2));
        field("program", p);
        field("error", (status >> 4) & 7);
        field("pc", status >> 16);
        field("cycles", ga2_cycles_read());
        field("mm_cycles", ga2_mm_cycles_read());
        field("dma_cycles", ga2_dma_cycles_read());
        field("vec_cycles", ga2_vec_cycles_read());
        field("instructions", ga2_instructions_read());
        field("stall_cycles", ga2_stall_cycles_read());
        flush_l1();                                 /* drop what the caches hold of what GA-2 wrote */
        flush_l2();
        dump((volatile const uint8_t *)ext, payload->ext_bytes);
    }
    say("END\n");
    for (;;) ;
}
