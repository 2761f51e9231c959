// GA-2 Icarus Verilog testbench: runs the jobs of a job file on the generated `ga2` top (docs/SIMULATORS.md).
//
//   vvp ga2.vvp +jobs=FILE +out=FILE [+vcd=FILE]
//
// The same job and result format as the Verilator harness (sim/harness/ga2_harness.cpp), and the same
// external-memory model as sim/extmem.py: the data of a read made in cycle t is presented in cycle
// t + EXT_LATENCY with rvalid; a write takes effect at the end of its cycle; a read of a word written in the
// same cycle returns the old word. The sizes are parameters (sim/icarus.py sets them with -P from the
// configuration); the job file's header must agree with them.
//
// The scratchpad has no host write port, so the testbench writes its memory (or, decoupled, its banks) directly
// between runs through sp_poke/sp_peek, which sim/icarus.py generates for the build (sp_access.vh);
// it reads the scratchpad back through the debug port (debug__addr/debug__data).

module ga2_tb;
    parameter EXT_WORDS = 8192;
    parameter SP_WORDS = 4096;
    parameter DEBUG_LATENCY = 2;    // cycles from a debug address to its data: ga2_sw.timing.DEBUG_READ_LATENCY
    parameter SP_BANKS = 0;         // 0: one scratchpad memory (in order); else its banks (decoupled)
    parameter IMEM_WORDS = 1024;
    parameter EXT_LATENCY = 4;
    parameter EXT_AW = 13;          // port widths of the generated top
    parameter SP_AW = 12;
    parameter IMEM_AW = 10;
    parameter PC_W = 11;
    // The external port's beat (ga2_sw/packing.py): BUS_BYTES = 1 is one 32-bit word, W > 1 is W bytes, the
    // memory holding one byte per element, EXT_AW bits of beat address, byte lane j being element addr * W + j,
    // writes storing only the lanes of wstrb (connected when sim/icarus.py defines GA2_PACKED).
    parameter BUS_BYTES = 1;
    localparam EXT_DW = BUS_BYTES == 1 ? 32 : 8 * BUS_BYTES;

    reg clk = 1'b0;
    reg rst = 1'b0;
    reg start = 1'b0;
    reg imem_we = 1'b0;
    reg [IMEM_AW-1:0] imem_addr = 0;
    reg [127:0] imem_data = 128'd0;
    reg [SP_AW-1:0] dbg_sp_addr = 0;
    wire [31:0] dbg_sp_data;
    wire running, done;
    wire [2:0] error;
    wire [PC_W-1:0] pc;
    wire [31:0] cycles, mm_cycles, dma_cycles, vec_cycles, instructions, stall_cycles;
    wire [EXT_AW-1:0] ext_addr;
    wire ext_re, ext_we;
    wire [EXT_DW-1:0] ext_wdata;
    wire [BUS_BYTES-1:0] ext_wstrb;
    reg [EXT_DW-1:0] ext_rdata = 0;
    reg ext_rvalid = 1'b0;

    ga2 dut (
        .clk(clk), .rst(rst), .host__start(start), .host__running(running), .host__done(done),
        .host__error(error), .host__pc(pc), .host__cycles(cycles), .host__mm_cycles(mm_cycles),
        .host__dma_cycles(dma_cycles), .host__vec_cycles(vec_cycles), .host__instructions(instructions),
        .host__stall_cycles(stall_cycles),
        .host__imem_we(imem_we), .host__imem_addr(imem_addr), .host__imem_data(imem_data),
        .debug__addr(dbg_sp_addr), .debug__data(dbg_sp_data),
        .ext__addr(ext_addr), .ext__re(ext_re), .ext__we(ext_we), .ext__wdata(ext_wdata),
        .ext__rdata(ext_rdata), .ext__rvalid(ext_rvalid)
`ifdef GA2_PACKED
        , .ext__wstrb(ext_wstrb)
`endif
    );
`ifndef GA2_PACKED
    assign ext_wstrb = 1'b1;
`endif

    // -- the external memory and its read pipeline (stage 0 .. EXT_LATENCY-1) --
    reg [31:0] ext [0:EXT_WORDS-1];
    reg pv [0:EXT_LATENCY-1];
    reg [EXT_DW-1:0] pd [0:EXT_LATENCY-1];
    reg [63:0] oob;

    reg s_re, s_we;
    reg [EXT_AW-1:0] s_addr;
    reg [EXT_DW-1:0] s_wdata;
    reg [BUS_BYTES-1:0] s_wstrb;
    integer k, j;

    // One clock cycle: let the inputs settle, sample the memory port, clock edge, then the memory's edge.
    task tick;
        begin
            #1;
            s_re = ext_re;
            s_we = ext_we;
            s_addr = ext_addr;
            s_wdata = ext_wdata;
            s_wstrb = ext_wstrb;
            clk = 1'b1;
            #1;
            for (k = EXT_LATENCY - 1; k > 0; k = k - 1) begin
                pv[k] = pv[k - 1];
                pd[k] = pd[k - 1];
            end
            if ((s_re || s_we) && s_addr >= EXT_WORDS / BUS_BYTES) oob = oob + 1;
            pv[0] = s_re;
            if (BUS_BYTES == 1) begin
                if (s_re) pd[0] = (s_addr < EXT_WORDS) ? ext[s_addr] : 32'd0;   // old word: the write lands after
                if (s_we && s_addr < EXT_WORDS) ext[s_addr] = s_wdata;
            end else begin
                for (j = 0; j < BUS_BYTES; j = j + 1) begin
                    if (s_re) pd[0][8 * j +: 8] = (s_addr < EXT_WORDS / BUS_BYTES) ? ext[s_addr * BUS_BYTES + j][7:0] : 8'd0;
                    if (s_we && s_wstrb[j] && s_addr < EXT_WORDS / BUS_BYTES) ext[s_addr * BUS_BYTES + j] = {24'd0, s_wdata[8 * j +: 8]};
                end
            end
            ext_rvalid = pv[EXT_LATENCY - 1];
            ext_rdata = pd[EXT_LATENCY - 1];
            clk = 1'b0;
        end
    endtask

    // -- job-file reading --
    integer fin, fout, r, i, n;
    reg [8*16-1:0] tok;
    reg [8*1024-1:0] jobs_path, out_path, vcd_path;
    reg [63:0] num, job_id, limit, do_reset, dump, win_from, win_words, simulated, start_wait;
    reg [127:0] w128;
    reg [31:0] w32;
    reg [127:0] prog [0:IMEM_WORDS-1];
    integer prog_n, imem_dirty;
    reg last_hung = 1'b0;
    reg started, ok_run;
    reg [63:0] port_mismatch;
    reg [31:0] sp_out [0:SP_WORDS-1];
`include "sp_access.vh"

    task fail;
        input [8*64-1:0] msg;
        begin
            $display("ga2_tb: error: %0s", msg);
            $finish;
        end
    endtask

    task keyword;
        input [8*16-1:0] kw;
        begin
            tok = 0;
            r = $fscanf(fin, "%s", tok);
            if (r != 1 || tok != kw) begin
                $display("ga2_tb: error: expected '%0s' in the job file, got '%0s'", kw, tok);
                $finish;
            end
        end
    endtask

    task number;
        begin
            num = 0;
            r = $fscanf(fin, "%d", num);
            if (r != 1) fail("bad number in the job file");
        end
    endtask

    initial begin
        if (!$value$plusargs("jobs=%s", jobs_path)) fail("missing +jobs=FILE");
        if (!$value$plusargs("out=%s", out_path)) fail("missing +out=FILE");
        if ($value$plusargs("vcd=%s", vcd_path)) begin
            $dumpfile(vcd_path);
            $dumpvars(0, ga2_tb);
        end
        fin = $fopen(jobs_path, "r");
        if (fin == 0) fail("cannot open the job file");
        fout = $fopen(out_path, "w");
        if (fout == 0) fail("cannot open the result file");

        keyword("ga2jobs");
        number; if (num != 3) fail("unsupported job-file version");
        keyword("ext_words"); number; if (num != EXT_WORDS) fail("ext_words differs from the build");
        keyword("sp_words"); number; if (num != SP_WORDS) fail("sp_words differs from the build");
        keyword("sp_banks"); number; if (num != SP_BANKS) fail("sp_banks differs from the build");
        keyword("imem_words"); number; if (num != IMEM_WORDS) fail("imem_words differs from the build");
        keyword("ext_latency"); number; if (num != EXT_LATENCY) fail("ext_latency differs from the build");
        $fwrite(fout, "ga2results 1\n");
        imem_dirty = 0;

        forever begin
            tok = 0;
            r = $fscanf(fin, "%s", tok);
            if (r != 1) begin
                $fwrite(fout, "done\n");
                $fclose(fout);
                $finish;
            end
            if (tok != "job") fail("expected 'job' in the job file");
            number; job_id = num;
            keyword("limit"); number; limit = num;
            keyword("reset"); number; do_reset = num;
            keyword("dump"); number; dump = num;
            keyword("window"); number; win_from = num; number; win_words = num;
            if (win_from > EXT_WORDS || win_words > EXT_WORDS - win_from) fail("window past the external memory");
            keyword("prog"); number; prog_n = num;
            if (prog_n > IMEM_WORDS) fail("program larger than the instruction memory");
            for (i = 0; i < prog_n; i = i + 1) begin
                r = $fscanf(fin, "%h", w128);
                if (r != 1) fail("bad program word");
                prog[i] = w128;
            end
            // A fresh external memory and an empty read pipeline.
            for (i = 0; i < EXT_WORDS; i = i + 1) ext[i] = 32'd0;
            for (i = 0; i < EXT_LATENCY; i = i + 1) begin pv[i] = 1'b0; pd[i] = 0; end
            ext_rvalid = 1'b0;
            ext_rdata = 0;
            oob = 0;
            keyword("ext"); number; n = num;
            if (n > EXT_WORDS) fail("external image larger than the memory");
            for (i = 0; i < n; i = i + 1) begin
                r = $fscanf(fin, "%h", w32);
                if (r != 1) fail("bad external-memory word");
                ext[i] = w32;
            end
            for (i = 0; i < SP_WORDS; i = i + 1) sp_poke(i, 32'd0);
            keyword("sp"); number; n = num;
            if (n > SP_WORDS) fail("scratchpad image larger than the memory");
            for (i = 0; i < n; i = i + 1) begin
                r = $fscanf(fin, "%h", w32);
                if (r != 1) fail("bad scratchpad word");
                sp_poke(i, w32);
            end
            keyword("end");

            if (do_reset != 0 || last_hung) begin   // a hung program leaves its unit busy: always reset after one
                rst = 1'b1;
                tick;
                rst = 1'b0;
            end
            imem_we = 1'b1;
            for (i = 0; i < prog_n || i < imem_dirty; i = i + 1) begin
                imem_addr = i;
                imem_data = (i < prog_n) ? prog[i] : 128'd0;
                tick;
            end
            imem_we = 1'b0;
            imem_dirty = prog_n;

            start = 1'b1;
            tick;
            start = 1'b0;
            simulated = 1;
            start_wait = 0;
            #1;
            // A held start may leave the previous run's `done` up for a few cycles (see ga2_harness.cpp).
            while (done && simulated < limit) begin
                tick;
                simulated = simulated + 1;
                start_wait = start_wait + 1;
                #1;
            end
            started = !done;
            while (!done && simulated < limit) begin
                tick;
                simulated = simulated + 1;
                #1;
            end

            ok_run = done && started;
            last_hung = !ok_run;
            port_mismatch = 0;
            $fwrite(fout, "result %0d status %0s sim_cycles %0d seconds 0 cycles %0d mm %0d dma %0d vec %0d instr %0d stall %0d error %0d pc %0d ext_oob %0d start_wait %0d",
                    job_id, ok_run ? "ok" : "hang", simulated, cycles, mm_cycles, dma_cycles, vec_cycles, instructions,
                    stall_cycles,
                    error, pc, oob, start_wait);
            if (ok_run && (dump & 2)) begin
                // A new address every cycle; its data DEBUG_LATENCY cycles later.
                for (i = 0; i < SP_WORDS + DEBUG_LATENCY - 1; i = i + 1) begin
                    if (i < SP_WORDS) dbg_sp_addr = i;
                    tick;
                    #1;
                    if (i + 1 >= DEBUG_LATENCY) begin
                        sp_out[i + 1 - DEBUG_LATENCY] = dbg_sp_data;
                        if (dbg_sp_data !== sp_peek(i + 1 - DEBUG_LATENCY)) port_mismatch = port_mismatch + 1;
                    end
                end
            end
            $fwrite(fout, " sp_port_mismatch %0d\n", port_mismatch);
            if (ok_run && (dump & 1)) begin
                $fwrite(fout, "ext %0d\n", win_words);
                for (i = 0; i < win_words; i = i + 1)
                    $fwrite(fout, "%h%s", ext[win_from + i], (i % 16 == 15 || i == win_words - 1) ? "\n" : " ");
            end else
                $fwrite(fout, "ext 0\n");
            if (ok_run && (dump & 2)) begin
                $fwrite(fout, "sp %0d\n", SP_WORDS);
                for (i = 0; i < SP_WORDS; i = i + 1)
                    $fwrite(fout, "%h%s", sp_out[i], (i % 16 == 15 || i == SP_WORDS - 1) ? "\n" : " ");
            end else
                $fwrite(fout, "sp 0\n");
            $fwrite(fout, "end\n");
            $fflush(fout);
        end
    end
endmodule
