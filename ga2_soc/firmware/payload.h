/* The payload table ga2_soc/payload.py writes into the ROM at GA2_PAYLOAD (its docstring has the layout). */
#ifndef GA2_PAYLOAD_H
#define GA2_PAYLOAD_H
#include <stdint.h>

#define GA2_PAYLOAD_MAGIC 0x50324147u   /* "GA2P" */
#define GA2_PAYLOAD_VERSION 1u

struct ga2_program {
    uint32_t instructions;              /* 128-bit instructions, four words each, bits 31:0 first */
    uint32_t offset;                    /* from the table's start, in bytes */
};

struct ga2_payload {
    uint32_t magic, version;
    uint32_t ext_bytes, ext_offset;     /* the external memory's image */
    uint32_t programs;
    struct ga2_program program[];
};

#endif
