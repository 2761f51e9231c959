// The SoC's Verilator test bench: the clock, a reset, the UART's bytes (the `serial_source` stream LiteX's
// sim UART gives) to standard output, and a cycle limit. It stops after the firmware prints a line "END"
// (exit 0) or at the limit (exit 3). Usage: Vsim [max cycles]; the memories' .init files are read from the
// working directory.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "Vsim.h"
#include "verilated.h"

int main(int argc, char **argv) {
    Verilated::commandArgs(argc, argv);
    unsigned long long limit = argc > 1 ? strtoull(argv[1], nullptr, 0) : 200000000ULL;
    Vsim *top = new Vsim;
    top->sys_rst = 1;
    top->sim_trace = 0;
    top->serial_source_ready = 1;           // the bench takes a byte every cycle
    top->serial_sink_valid = 0;             // and sends none
    top->serial_sink_data = 0;
    static const char end[] = "\nEND\n";
    size_t matched = 1;                     // as if a line had just ended: "END" may be the first line
    for (unsigned long long cycle = 0; cycle < limit; cycle++) {
        if (cycle == 16)
            top->sys_rst = 0;
        top->sys_clk = 0;
        top->eval();
        bool sent = top->serial_source_valid && top->serial_source_ready;
        char c = (char)top->serial_source_data;
        top->sys_clk = 1;
        top->eval();
        if (!sent || c == '\r')
            continue;
        putchar(c);
        matched = c == end[matched] ? matched + 1 : (c == '\n' ? 1 : 0);
        if (matched == sizeof end - 1) {
            printf("CYCLES=%llu\n", cycle);
            fflush(stdout);
            top->final();
            delete top;
            return 0;
        }
    }
    fflush(stdout);
    fprintf(stderr, "the firmware printed no END line in %llu cycles\n", limit);
    delete top;
    return 3;
}
