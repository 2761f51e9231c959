// GA-2 Verilator harness: runs many programs on the Verilated `ga2` top, one process, one model.
//
// Reads a job file (docs/SIMULATORS.md: "Job files"), runs each job to HALT, a fault or its cycle limit, and
// writes one result per job. The external memory is modelled here exactly like sim/extmem.py: the data of a
// read made in cycle t is presented in cycle t + ext_latency with rvalid; a write takes effect at the end of
// its cycle; a read of a word written in the same cycle returns the old word.
//
//   Vga2 [--jobs FILE|-] [--out FILE|-] [--trace FILE]
//
// Results are flushed after every job, so a parent process may stream jobs through stdin and read results
// from stdout one at a time (sim/verilator.py does that for VerilatorRunner).
//
// The Verilated top is `ga2_sim` (sim/verilator.py, sim_wrapper): the `ga2` ports, with `rst` behind a
// register driven by `rst_req`, which keeps the reset out of Verilator's per-eval input logic.
//
// Per clock cycle the loop calls eval() exactly twice (clk=0 with the new inputs, then clk=1) and touches
// only the port variables: the memories are loaded and dumped between runs, never inside the loop.

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <memory>
#include <ctime>
#include <string>
#include <unistd.h>
#include <vector>

#include "Vga2.h"
#include "Vga2___024root.h"
#include "verilated.h"
#include "verilated_syms.h"

#if defined(VM_TRACE_FST) && VM_TRACE_FST
#include "verilated_fst_c.h"
typedef VerilatedFstC TraceFile;
#define GA2_HAS_TRACE 1
#elif defined(VM_TRACE) && VM_TRACE
#include "verilated_vcd_c.h"
typedef VerilatedVcdC TraceFile;
#define GA2_HAS_TRACE 1
#else
#define GA2_HAS_TRACE 0
#endif

// Verilator escapes the double underscore of Amaranth's port names (`ext__addr`, `host__start`) as `___05F`.
#define EXT_PORT(name) ext___05F##name
#define HOST_PORT(name) host___05F##name
#define DEBUG_PORT(name) debug___05F##name
// The external port's beat: GA2_BUS_BYTES = 1 is one 32-bit word per beat (the chapter's port); W > 1 is W
// bytes per beat, the memory holding one byte per element (ga2_sw/packing.py): `addr` is a beat address, byte
// lane j of rdata/wdata is element addr * W + j, and a write stores only the lanes of `wstrb`. Passed in by
// sim/verilator.py, like the latency below; the port's width in the model is Verilator's to choose
// (IData, QData or VlWide), so the lanes are read and written through the overloads below.
#ifndef GA2_BUS_BYTES
#define GA2_BUS_BYTES 1
#endif
template <typename T> static inline uint32_t lane_byte(const T& v, unsigned j) {
    return static_cast<uint32_t>((v >> (8 * j)) & 0xFF);
}
template <std::size_t N> static inline uint32_t lane_byte(const VlWide<N>& v, unsigned j) {
    return (v[j / 4] >> (8 * (j % 4))) & 0xFF;
}
template <typename T> static inline void set_lane_byte(T& v, unsigned j, uint32_t b) {
    v = static_cast<T>((v & ~(static_cast<T>(0xFF) << (8 * j))) | (static_cast<T>(b & 0xFF) << (8 * j)));
}
template <std::size_t N> static inline void set_lane_byte(VlWide<N>& v, unsigned j, uint32_t b) {
    v[j / 4] = (v[j / 4] & ~(0xFFu << (8 * (j % 4)))) | ((b & 0xFF) << (8 * (j % 4)));
}

// GA2_AXI = 1: the chip's external port is an AXI4 manager (ga2_hdl/dma/axi_dma.py), answered by the subordinate in
// Bench (the same as sim/axi_mem.py): AR and AW taken every cycle, a read burst taken in cycle c answered a
// beat per cycle from c + ext_latency on, W taken every cycle (before its AW too), B --axi-write-latency cycles
// (default 1) after a burst's last beat, a burst's beats landing in the memory when its B is taken; with --axi-pause P (per mille) each ready (AR, AW, W) and valid (R, B) is also held low in a
// cycle with probability P, from --axi-seed S plus the job's id.
#ifndef GA2_AXI
#define GA2_AXI 0
#endif

#ifndef GA2_DEBUG_LATENCY   // cycles from a debug address to its data: ga2_sw.timing.DEBUG_READ_LATENCY, passed in
#error "build with -DGA2_DEBUG_LATENCY=<ga2_sw.timing.DEBUG_READ_LATENCY> (sim/verilator.py does)"
#endif

// With GA2_DIRECT_EVAL (set by sim/verilator.py when the generated model has it), a clock phase calls the
// model's own evaluation function instead of eval(), skipping the per-call bookkeeping of the Verilator
// runtime (deferred deletes, the cross-thread message queue and their mutexes: ~15% of the instructions of
// a cycle here). This design has no classes, DPI or $display, which is what that bookkeeping serves; the
// first eval() (initialisation) always goes through the public API, and trace builds never use it.
#if defined(GA2_DIRECT_EVAL) && !GA2_HAS_TRACE
void Vga2___024root___eval(Vga2___024root* vlSelf);
#define GA2_EVAL(top) Vga2___024root___eval((top)->rootp)
#else
#define GA2_EVAL(top) (top)->eval()
#endif

static const char* const FORMAT_MAGIC_IN = "ga2jobs";
static const char* const FORMAT_MAGIC_OUT = "ga2results";
static const int FORMAT_VERSION = 3;

[[noreturn]] static void die(const std::string& msg) {
    std::fprintf(stderr, "ga2_harness: error: %s\n", msg.c_str());
    std::exit(2);
}

// -- input: whitespace-separated tokens, read with read(2) so a pipe is consumed as soon as data arrives ---

class Reader {
public:
    explicit Reader(int fd) : fd_(fd) {}

    // Next token into `out`; false at end of input.
    bool token(std::string& out) {
        out.clear();
        int c;
        do {
            c = get();
            if (c < 0) return false;
        } while (c == ' ' || c == '\n' || c == '\t' || c == '\r');
        while (c >= 0 && c != ' ' && c != '\n' && c != '\t' && c != '\r') {
            out.push_back(static_cast<char>(c));
            c = get();
        }
        return true;
    }

    std::string expect_token(const char* what) {
        std::string t;
        if (!token(t)) die(std::string("unexpected end of input, expected ") + what);
        return t;
    }

    void keyword(const char* kw) {
        std::string t = expect_token(kw);
        if (t != kw) die(std::string("expected '") + kw + "' in the job file, got '" + t + "'");
    }

    unsigned long long number(const char* what) {
        std::string t = expect_token(what);
        char* end = nullptr;
        errno = 0;
        unsigned long long v = std::strtoull(t.c_str(), &end, 10);
        if (errno || end == t.c_str() || *end) die(std::string("bad number for ") + what + ": '" + t + "'");
        return v;
    }

    // A hex token of at most nwords*32 bits into little-endian 32-bit words.
    void hex(uint32_t* words, int nwords) {
        std::string t = expect_token("a hex word");
        for (int i = 0; i < nwords; ++i) words[i] = 0;
        int bit = 0;
        for (int i = static_cast<int>(t.size()) - 1; i >= 0; --i, bit += 4) {
            char c = t[i];
            uint32_t d;
            if (c >= '0' && c <= '9') d = c - '0';
            else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
            else die("bad hex digit in '" + t + "'");
            if (d && bit >= nwords * 32) die("hex word '" + t + "' is too wide");
            if (bit < nwords * 32) words[bit / 32] |= d << (bit % 32);
        }
    }

private:
    int get() {
        if (pos_ == len_) {
            if (eof_) return -1;
            ssize_t n;
            do { n = ::read(fd_, buf_, sizeof buf_); } while (n < 0 && errno == EINTR);
            if (n <= 0) { eof_ = true; return -1; }
            pos_ = 0;
            len_ = static_cast<size_t>(n);
        }
        return static_cast<unsigned char>(buf_[pos_++]);
    }
    int fd_;
    char buf_[1 << 16];
    size_t pos_ = 0, len_ = 0;
    bool eof_ = false;
};

// -- output ----------------------------------------------------------------------------------------------

class Writer {
public:
    explicit Writer(FILE* f) : f_(f) { buf_.reserve(1 << 20); }
    void str(const char* s) { buf_.append(s); }
    void num(unsigned long long v) { char t[32]; std::snprintf(t, sizeof t, "%llu", v); buf_.append(t); }
    void hex32(uint32_t v) {
        static const char digits[] = "0123456789abcdef";
        char t[8];
        for (int i = 7; i >= 0; --i, v >>= 4) t[i] = digits[v & 15];
        buf_.append(t, 8);
    }
    void words(const char* name, const std::vector<uint32_t>& w) { words(name, w, 0, w.size()); }
    void words(const char* name, const std::vector<uint32_t>& w, size_t from, size_t n) {
        str(name); str(" "); num(n); str("\n");
        for (size_t i = 0; i < n; ++i) { hex32(w[from + i]); str((i % 16 == 15 || i + 1 == n) ? "\n" : " "); }
    }
    void flush() {
        if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) die("cannot write the results");
        std::fflush(f_);
        buf_.clear();
    }
private:
    FILE* f_;
    std::string buf_;
};

// CPU time of this process: the speed figure that does not depend on what else the machine is running.
static double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// -- the machine under test --------------------------------------------------------------------------------

struct Config {
    unsigned ext_words = 0, sp_words = 0, sp_banks = 0, imem_words = 0, ext_latency = 0;   // sp_banks 0: one memory
};

#if GA2_AXI
// --dram: a DRAM's timing instead of the two latencies (ga2_sw/dram.py's module docstring is the specification;
// this is its rendering in C++, written from that text). The grade's timings and the model's constants come on
// the command line (sim/verilator.harness_args), in DramParams's order, so the numbers are written only there.
struct DramParams {
    long long tck_ps, cl, cwl, trcd, trp, tras, trc, trrd, twr, twtr, trtp, tccd, trfc, trefi;
    long long controller_cycles, banks, row_bytes, burst_bytes, data_bytes_per_ck, clock_mhz;
};
static constexpr int DRAM_PARAMS = 20;

class Dram {
public:
    explicit Dram(const DramParams& p) : p_(p), open_(p.banks, -1), activated_(p.banks, NEVER),
        may_precharge_(p.banks, 0), may_activate_(p.banks, 0), next_refresh_(p.trefi) {}

    // The first chip cycle each beat of a read burst taken in `cycle` may be on R.
    std::vector<long long> read(long long cycle, long long byte_addr, long long beats, long long beat_bytes) {
        const long long t = ck_of_cycle(cycle + p_.controller_cycles);
        std::vector<long long> ready;
        long long burst = -1, end = 0;
        for (long long n = 0; n < beats; ++n) {
            const long long b = (byte_addr + n * beat_bytes) / p_.burst_bytes;
            if (b != burst) { burst = b; end = access(t, b * p_.burst_bytes, false); }
            ready.push_back(cycle_of_ck(end) + p_.controller_cycles);
        }
        return ready;
    }
    // The first chip cycle the answer of a write burst complete in `cycle` may be on B.
    long long write(long long cycle, long long byte_addr, long long beats, long long beat_bytes) {
        const long long t = ck_of_cycle(cycle + p_.controller_cycles);
        long long burst = -1, end = t;
        for (long long n = 0; n < beats; ++n) {
            const long long b = (byte_addr + n * beat_bytes) / p_.burst_bytes;
            if (b != burst) { burst = b; end = access(t, b * p_.burst_bytes, true); }
        }
        return cycle_of_ck(end) + p_.controller_cycles;
    }

private:
    static constexpr long long NEVER = -(1LL << 40);
    static long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }
    long long ck_of_cycle(long long c) const { return ceil_div(c * 1000000LL, p_.clock_mhz * p_.tck_ps); }
    long long cycle_of_ck(long long ck) const { return ceil_div(ck * p_.tck_ps * p_.clock_mhz, 1000000LL); }

    long long refresh(long long t) {          // refreshes due by clock t
        while (t >= next_refresh_) {
            long long start = std::max(next_refresh_, last_command_);
            for (long long b = 0; b < p_.banks; ++b)
                if (open_[b] >= 0) start = std::max(start, may_precharge_[b]);
            const long long done = start + p_.trp + p_.trfc;
            std::fill(open_.begin(), open_.end(), -1);
            std::fill(may_activate_.begin(), may_activate_.end(), done);
            last_command_ = done;
            next_refresh_ += p_.trefi;
            t = std::max(t, done);
        }
        return t;
    }

    long long access(long long t, long long addr, bool write) {   // the clock the burst's data have crossed the pins
        const long long bank = addr / p_.row_bytes % p_.banks, row = addr / (p_.row_bytes * p_.banks);
        t = refresh(std::max(t, last_command_));
        if (open_[bank] != row) {
            long long act = open_[bank] >= 0 ? std::max(t, may_precharge_[bank]) + p_.trp
                                             : std::max(t, may_activate_[bank]);
            act = std::max({act, activated_[bank] + p_.trc, last_activate_ + p_.trrd});
            open_[bank] = row; activated_[bank] = act; last_activate_ = act;
            may_precharge_[bank] = act + p_.tras;
            t = act + p_.trcd;
        }
        const long long col = std::max({t, next_column_, write ? next_write_ : next_read_});
        last_command_ = col;
        next_column_ = col + p_.tccd;
        const long long burst_ck = p_.burst_bytes / p_.data_bytes_per_ck;
        long long end;
        if (write) {
            end = col + p_.cwl + burst_ck;
            may_precharge_[bank] = std::max(may_precharge_[bank], end + p_.twr);
            next_read_ = std::max(next_read_, end + p_.twtr);
        } else {
            end = col + p_.cl + burst_ck;
            may_precharge_[bank] = std::max(may_precharge_[bank], col + p_.trtp);
            next_write_ = std::max(next_write_, col + p_.cl + p_.tccd + 2 - p_.cwl);
        }
        return end;
    }

    DramParams p_;
    std::vector<long long> open_, activated_, may_precharge_, may_activate_;
    long long last_activate_ = NEVER, next_column_ = 0, next_read_ = 0, next_write_ = 0, last_command_ = 0;
    long long next_refresh_;
};
#endif

struct Job {
    unsigned long long id = 0, limit = 0;
    bool reset = true, dump_ext = true, dump_sp = true;
    unsigned long long window_from = 0, window_words = 0;   // the external words dump_ext returns
    std::vector<uint32_t> prog;      // 4 little-endian words per instruction
    std::vector<uint32_t> ext, sp;   // images; the rest of each memory is zero
};

class Bench {
public:
    Bench(const Config& cfg, const char* trace_path) : cfg_(cfg), ext_(cfg.ext_words, 0),
                                                      pipe_v_(cfg.ext_latency, 0),
                                                      pipe_d_(cfg.ext_latency * GA2_BUS_BYTES, 0) {
        if (cfg.ext_words % GA2_BUS_BYTES) die("ext_words is not a multiple of the build's bus bytes");
        ctx_.reset(new VerilatedContext);
        top_.reset(new Vga2(ctx_.get(), "TOP"));
        // The scratchpad has no host write port: its memories are made public by the build (public_flat_rw in
        // a generated .vlt) and written directly between runs. In order it is one memory, `mem`; decoupled,
        // `sp_banks` banks `bank0`, `bank1`, ..., word a in row a >> b of bank (a + (a >> b)) mod sp_banks
        // (ga2_sw/banking.py; the debug-port check below fails if the two ever disagree).
        const unsigned n_mems = cfg.sp_banks ? cfg.sp_banks : 1;
        for (unsigned n = 0; n < n_mems; ++n) {
            const std::string var_name = cfg.sp_banks ? "bank" + std::to_string(n) : std::string("mem");
            const VerilatedVar* var = find_scratchpad_var(var_name.c_str());
            if (!var) die("the scratchpad memory " + var_name + " (scope ga2.scratchpad) is not public (built without public.vlt?)");
            if (var->totalSize() != static_cast<size_t>(cfg.sp_words / n_mems) * sizeof(uint32_t))
                die("the model's scratchpad memory " + var_name + " has " + std::to_string(var->totalSize()) +
                    " bytes, not " + std::to_string(4ull * cfg.sp_words / n_mems));
            sp_mems_.push_back(static_cast<uint32_t*>(var->datap()));
        }
        bank_bits_ = 0;
        while ((1u << bank_bits_) < cfg.sp_banks) ++bank_bits_;
        if (trace_path && *trace_path) {
#if GA2_HAS_TRACE
            ctx_->traceEverOn(true);
            trace_.reset(new TraceFile);
            top_->trace(trace_.get(), 99);
            trace_->open(trace_path);
#else
            die(std::string("--trace ") + trace_path + ": this binary was built without tracing");
#endif
        }
        top_->clk = 0;
        top_->rst_req = 0;
        top_->HOST_PORT(start) = 0;
        top_->HOST_PORT(imem_we) = 0;
        top_->eval();
    }

    ~Bench() {
#if GA2_HAS_TRACE
        if (trace_) trace_->close();
#endif
        top_->final();
    }

    void run(const Job& job, Writer& out) {
        // A fresh external memory and an empty read pipeline, like a new pysim harness.
        std::fill(ext_.begin(), ext_.end(), 0);
        std::copy(job.ext.begin(), job.ext.end(), ext_.begin());
        std::fill(pipe_v_.begin(), pipe_v_.end(), 0);
        std::fill(pipe_d_.begin(), pipe_d_.end(), 0);
        oob_ = 0;
#if GA2_AXI
        reads_.clear(); writes_.clear(); beats_in_.clear(); answers_.clear();
        axi_cycle_ = 0;
        dram_.reset();
        was_running_ = false;
        rng_ = (axi_seed + job.id) * 0x9E3779B97F4A7C15ull + 1;
#endif
        set_ext_inputs();
        if (job.reset || last_hung_) {   // a hung program leaves its unit busy: always reset after one
            top_->rst_req = 1;            // registered in the wrapper: the chip sees rst in the next cycle
            cycle();
            top_->rst_req = 0;
            cycle();
        }
        // Instruction memory through the host port; words a previous job left beyond this program are cleared.
        unsigned n = static_cast<unsigned>(job.prog.size() / 4);
        top_->HOST_PORT(imem_we) = 1;
        for (unsigned a = 0; a < std::max(n, imem_dirty_); ++a) {
            top_->HOST_PORT(imem_addr) = a;
            for (int w = 0; w < 4; ++w) top_->HOST_PORT(imem_data)[w] = a < n ? job.prog[4 * a + w] : 0;
            cycle();
        }
        top_->HOST_PORT(imem_we) = 0;
        imem_dirty_ = n;
        // Scratchpad: the image, then zeros.
        for (unsigned a = 0; a < cfg_.sp_words; ++a) sp_word(a) = a < job.sp.size() ? job.sp[a] : 0;

        auto t0 = std::chrono::steady_clock::now();
        const double c0 = cpu_now();
        top_->HOST_PORT(start) = 1;
        cycle();
        top_->HOST_PORT(start) = 0;
        unsigned long long simulated = 1, start_wait = 0;
        // docs: `done` is high from HALT until the next start. A chip that holds a start back (here: until its
        // instruction checker has finished the last write) may keep the previous run's `done` up for a few
        // cycles; wait for it to fall first, and report how long that took (start_wait, 0 when it falls in the
        // start cycle as documented).
        while (top_->HOST_PORT(done) && simulated < job.limit) {
            cycle();
            ++simulated;
            ++start_wait;
        }
        const bool started = !top_->HOST_PORT(done);        // false: the start never took effect within the limit
        while (!top_->HOST_PORT(done)) {
            if (simulated >= job.limit) break;
            cycle();
            ++simulated;
        }
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        double cpu_seconds = cpu_now() - c0;
        bool hang = !top_->HOST_PORT(done) || !started;
        last_hung_ = hang;

        out.str("result "); out.num(job.id);
        out.str(hang ? " status hang" : " status ok");
        out.str(" sim_cycles "); out.num(simulated);
        char t[64];
        std::snprintf(t, sizeof t, " seconds %.9f", seconds);
        out.str(t);
        std::snprintf(t, sizeof t, " cpu_seconds %.9f", cpu_seconds);
        out.str(t);
        out.str(" cycles "); out.num(top_->HOST_PORT(cycles));
        out.str(" mm "); out.num(top_->HOST_PORT(mm_cycles));
        out.str(" dma "); out.num(top_->HOST_PORT(dma_cycles));
        out.str(" vec "); out.num(top_->HOST_PORT(vec_cycles));
        out.str(" instr "); out.num(top_->HOST_PORT(instructions));
        out.str(" stall "); out.num(top_->HOST_PORT(stall_cycles));
        out.str(" error "); out.num(top_->HOST_PORT(error));
        out.str(" pc "); out.num(top_->HOST_PORT(pc));
        out.str(" ext_oob "); out.num(oob_);
        out.str(" start_wait "); out.num(start_wait);

        std::vector<uint32_t> sp;
        unsigned long long port_mismatch = 0;
        if (job.dump_sp && !hang) {
            // Through the debug port (data GA2_DEBUG_LATENCY cycles after the address, a new address every
            // cycle), checked against the memory itself.
            sp.resize(cfg_.sp_words);
            for (unsigned n = 0; n < cfg_.sp_words + GA2_DEBUG_LATENCY - 1; ++n) {
                if (n < cfg_.sp_words) top_->DEBUG_PORT(addr) = n;
                cycle();
                if (n + 1 >= GA2_DEBUG_LATENCY) {
                    unsigned a = n + 1 - GA2_DEBUG_LATENCY;
                    sp[a] = top_->DEBUG_PORT(data);
                    if (sp[a] != sp_word(a)) ++port_mismatch;
                }
            }
        }
        out.str(" sp_port_mismatch "); out.num(port_mismatch);
        out.str("\n");
        if (job.dump_ext && !hang) out.words("ext", ext_, job.window_from, job.window_words);
        else out.str("ext 0\n");
        if (job.dump_sp && !hang) out.words("sp", sp);
        else out.str("sp 0\n");
        out.str("end\n");
        out.flush();
    }

private:
    const VerilatedVar* find_scratchpad_var(const char* var_name) {
        for (const char* name : {"TOP.ga2_sim.dut.scratchpad", "TOP.ga2.scratchpad"}) {
            const VerilatedScope* scope = ctx_->scopeFind(name);
            if (scope) if (const VerilatedVar* var = scope->varFind(var_name)) return var;
        }
        if (ctx_->scopeNameMap()) {      // scope naming differs between releases: look for it
            for (const auto& it : *ctx_->scopeNameMap()) {
                const std::string name = it.first;
                if (name.size() >= 10 && name.compare(name.size() - 10, 10, "scratchpad") == 0)
                    if (const VerilatedVar* var = it.second->varFind(var_name)) return var;
            }
        }
        return nullptr;
    }

    uint32_t& sp_word(unsigned a) {
        if (!cfg_.sp_banks) return sp_mems_[0][a];
        return sp_mems_[(a + (a >> bank_bits_)) % cfg_.sp_banks][a >> bank_bits_];
    }

#if GA2_AXI
    bool open_channel() {                   // false with probability axi_pause / 1000 (xorshift64)
        if (!axi_pause) return true;
        rng_ ^= rng_ << 13; rng_ ^= rng_ >> 7; rng_ ^= rng_ << 17;
        return rng_ % 1000 >= axi_pause;
    }
    static constexpr unsigned BEAT_BYTES = GA2_BUS_BYTES == 1 ? 4 : GA2_BUS_BYTES;
    inline void set_ext_inputs() {
        const unsigned W = GA2_BUS_BYTES, beats = cfg_.ext_words / W;
        ar_ready_ = open_channel();
        aw_ready_ = open_channel();
        w_ready_ = open_channel();
        // (with a DRAM, each beat from the cycle it delivers it)
        r_valid_ = !reads_.empty() && (dram_ ? reads_.front().ready[reads_.front().next] <= axi_cycle_
                                              : reads_.front().first <= axi_cycle_) && open_channel();
        b_valid_ = !answers_.empty() && answers_.front().first <= axi_cycle_ && open_channel();
        top_->EXT_PORT(arready) = ar_ready_;
        top_->EXT_PORT(awready) = aw_ready_;
        top_->EXT_PORT(wready) = w_ready_;
        top_->EXT_PORT(rvalid) = r_valid_;
        top_->EXT_PORT(bvalid) = b_valid_;
        top_->EXT_PORT(rresp) = 0;
        top_->EXT_PORT(bresp) = 0;
        if (r_valid_) {
            const Burst& b = reads_.front();
            const bool in_range = b.beat < beats;
            if (!in_range) ++oob_;
#if GA2_BUS_BYTES == 1
            top_->EXT_PORT(rdata) = in_range ? ext_[b.beat] : 0;
#else
            for (unsigned j = 0; j < W; ++j)
                set_lane_byte(top_->EXT_PORT(rdata), j, in_range ? ext_[b.beat * W + j] : 0);
#endif
            top_->EXT_PORT(rlast) = b.left == 1;
        }
    }
#else
    inline void set_ext_inputs() {
        top_->EXT_PORT(rvalid) = pipe_v_[cfg_.ext_latency - 1];
#if GA2_BUS_BYTES == 1
        top_->EXT_PORT(rdata) = pipe_d_[cfg_.ext_latency - 1];
#else
        const uint32_t* beat = &pipe_d_[(cfg_.ext_latency - 1) * GA2_BUS_BYTES];
        for (unsigned j = 0; j < GA2_BUS_BYTES; ++j) set_lane_byte(top_->EXT_PORT(rdata), j, beat[j]);
#endif
    }
#endif

    // One clock cycle: settle with clk low and the current inputs, sample the memory port, clock edge, then
    // the memory's own edge (read pipeline shift, write) and its outputs for the next cycle.
    // The clock's rising edge (the trace's two samples around it), the inputs of the cycle being settled.
    inline void clock_edge() {
#if GA2_HAS_TRACE
        if (trace_) trace_->dump(static_cast<uint64_t>(2 * time_));
#endif
        top_->clk = 1;
        GA2_EVAL(top_);
#if GA2_HAS_TRACE
        if (trace_) trace_->dump(static_cast<uint64_t>(2 * time_ + 1));
#endif
        ++time_;
    }

#if GA2_AXI
    // One clock cycle: settle with clk low, sample the manager's side of every channel, clock edge; then the
    // handshakes of the cycle and the subordinate's outputs for the next one.
    inline void cycle() {
        top_->clk = 0;
        GA2_EVAL(top_);
        const unsigned W = GA2_BUS_BYTES, beats = cfg_.ext_words / W;
        const bool ar = top_->EXT_PORT(arvalid) && ar_ready_, aw = top_->EXT_PORT(awvalid) && aw_ready_;
        const bool r = r_valid_ && top_->EXT_PORT(rready), wr = top_->EXT_PORT(wvalid) && w_ready_;
        const bool b = b_valid_ && top_->EXT_PORT(bready);
        const uint32_t araddr = top_->EXT_PORT(araddr), awaddr = top_->EXT_PORT(awaddr);
        const unsigned arlen = top_->EXT_PORT(arlen), awlen = top_->EXT_PORT(awlen);
        const bool wlast = top_->EXT_PORT(wlast);
        const unsigned wstrb = top_->EXT_PORT(wstrb);
        const bool running = top_->HOST_PORT(running);
        uint32_t wbytes[BEAT_BYTES];
#if GA2_BUS_BYTES == 1
        const uint32_t wword = top_->EXT_PORT(wdata);
        for (unsigned j = 0; j < 4; ++j) wbytes[j] = (wword >> (8 * j)) & 0xFF;
#else
        for (unsigned j = 0; j < W; ++j) wbytes[j] = lane_byte(top_->EXT_PORT(wdata), j);
#endif
        clock_edge();
        if ((ar && araddr % 4096 + (arlen + 1) * BEAT_BYTES > 4096) || (aw && awaddr % 4096 + (awlen + 1) * BEAT_BYTES > 4096))
            die("AXI protocol: a burst of " + std::to_string((ar ? arlen : awlen) + 1) + " beats at byte " +
                std::to_string(ar ? araddr : awaddr) + " crosses a 4 KiB boundary");
        // A DRAM starts afresh in the chip's first counted cycle (the cycle model's cycle 0).
        if (dram_params.tck_ps && running && !was_running_) {
            dram_ = std::make_unique<Dram>(dram_params);
            dram_origin_ = axi_cycle_;
        }
        was_running_ = running;
        if (ar) {
            reads_.push_back({axi_cycle_ + cfg_.ext_latency, araddr / BEAT_BYTES, arlen + 1, {}, {}, 0, 0});
            if (dram_)
                for (long long c : dram_->read(axi_cycle_ - dram_origin_, araddr, arlen + 1, BEAT_BYTES))
                    reads_.back().ready.push_back(static_cast<unsigned long long>(c) + dram_origin_);
        }
        if (r) {
            Burst& f = reads_.front();
            ++f.beat;
            ++f.next;
            if (--f.left == 0) reads_.pop_front();
            if (!reads_.empty() && reads_.front().first <= axi_cycle_) reads_.front().first = axi_cycle_ + 1;
        }
        if (aw) writes_.push_back({axi_cycle_, awaddr / BEAT_BYTES, awlen + 1, {}, {}, 0, awaddr});
        if (wr) {
            WBeat in{axi_cycle_, wstrb, wlast, {}};
            for (unsigned j = 0; j < BEAT_BYTES; ++j) in.bytes[j] = wbytes[j];
            beats_in_.push_back(in);
        }
        // Each W beat belongs to the oldest burst still short of beats. A burst's beats land when its B is
        // taken (below): until then a read returns the old bytes.
        while (!writes_.empty() && !beats_in_.empty()) {
            const WBeat in = beats_in_.front();
            beats_in_.pop_front();
            Burst& f = writes_.front();
            if (f.beat < beats) {
                Beat beat{f.beat, in.strobe, {}};
                for (unsigned j = 0; j < BEAT_BYTES; ++j) beat.bytes[j] = in.bytes[j];
                f.data.push_back(beat);
            } else {
                ++oob_;
            }
            ++f.beat;
            if (in.last != (f.left == 1))
                die("AXI protocol: WLAST " + std::to_string(in.last) + " on a beat with " + std::to_string(f.left) +
                    " beats of its burst left");
            if (--f.left == 0) {
                const unsigned long long arrived = std::max(in.taken, f.first);
                f.first = dram_ ? dram_->write(arrived - dram_origin_, f.addr, f.beat - f.addr / BEAT_BYTES, BEAT_BYTES)
                                  + dram_origin_
                                : arrived + axi_write_latency;
                answers_.push_back(std::move(f));
                writes_.pop_front();
            }
        }
        if (b) {
            for (const Beat& beat : answers_.front().data) {
#if GA2_BUS_BYTES == 1
                uint32_t word = ext_[beat.beat];
                for (unsigned j = 0; j < 4; ++j)
                    if ((beat.strobe >> j) & 1) word = (word & ~(0xFFu << (8 * j))) | (beat.bytes[j] << (8 * j));
                ext_[beat.beat] = word;
#else
                for (unsigned j = 0; j < W; ++j)
                    if ((beat.strobe >> j) & 1) ext_[beat.beat * W + j] = beat.bytes[j];
#endif
            }
            answers_.pop_front();
        }
        ++axi_cycle_;
        set_ext_inputs();
    }
#else
    inline void cycle() {
        top_->clk = 0;
        GA2_EVAL(top_);
        const uint32_t addr = top_->EXT_PORT(addr);
        const bool re = top_->EXT_PORT(re), we = top_->EXT_PORT(we);
#if GA2_BUS_BYTES == 1
        const uint32_t wdata = top_->EXT_PORT(wdata);
#else
        uint32_t wbytes[GA2_BUS_BYTES];
        for (unsigned j = 0; j < GA2_BUS_BYTES; ++j) wbytes[j] = lane_byte(top_->EXT_PORT(wdata), j);
        const uint32_t wstrb = top_->EXT_PORT(wstrb);
#endif
        clock_edge();
        const unsigned lat = cfg_.ext_latency;
        const unsigned W = GA2_BUS_BYTES;
        for (unsigned k = lat - 1; k > 0; --k) {
            pipe_v_[k] = pipe_v_[k - 1];
            for (unsigned j = 0; j < W; ++j) pipe_d_[k * W + j] = pipe_d_[(k - 1) * W + j];
        }
        const bool in_range = addr < cfg_.ext_words / W;
        if ((re || we) && !in_range) ++oob_;
        pipe_v_[0] = re;
#if GA2_BUS_BYTES == 1
        if (re) pipe_d_[0] = in_range ? ext_[addr] : 0;   // the old word: the write below lands after
        if (we && in_range) ext_[addr] = wdata;
#else
        if (re) for (unsigned j = 0; j < W; ++j) pipe_d_[j] = in_range ? ext_[addr * W + j] : 0;   // old bytes
        if (we && in_range)
            for (unsigned j = 0; j < W; ++j)
                if ((wstrb >> j) & 1) ext_[addr * W + j] = wbytes[j];
#endif
        set_ext_inputs();
    }
#endif

    Config cfg_;
    std::unique_ptr<VerilatedContext> ctx_;
    std::unique_ptr<Vga2> top_;
#if GA2_HAS_TRACE
    std::unique_ptr<TraceFile> trace_;
#endif
    std::vector<uint32_t> ext_;
#if GA2_AXI
    struct Beat { uint32_t beat, strobe; uint32_t bytes[GA2_BUS_BYTES == 1 ? 4 : GA2_BUS_BYTES]; };
    // `first`: a read's first beat's cycle, a write's AW cycle and then its answer's; `ready`: each read beat's
    // cycle from a DRAM, `next` the next of them; `addr`: a write's first byte.
    struct Burst { unsigned long long first; uint32_t beat, left; std::vector<Beat> data;
                   std::vector<unsigned long long> ready; std::size_t next; uint32_t addr; };
    struct WBeat { unsigned long long taken; uint32_t strobe; bool last; uint32_t bytes[GA2_BUS_BYTES == 1 ? 4 : GA2_BUS_BYTES]; };
    std::deque<Burst> reads_, writes_;                  // read bursts (first beat's cycle); write bursts (AW's cycle)
    std::deque<WBeat> beats_in_;                        // W beats not yet matched to an AW (W may come first)
    std::deque<Burst> answers_;                         // written bursts: B due from `first`, beats land then
    unsigned long long axi_cycle_ = 0, rng_ = 1, dram_origin_ = 0;
    std::unique_ptr<Dram> dram_;
    bool was_running_ = false;
    bool ar_ready_ = false, aw_ready_ = false, w_ready_ = false, r_valid_ = false, b_valid_ = false;
public:
    unsigned axi_pause = 0;                             // per mille
    unsigned axi_write_latency = 1;                     // cycles from a burst's last beat to its B
    unsigned long long axi_seed = 0;
    DramParams dram_params{};                           // tck_ps 0: no DRAM (the ideal subordinate)
private:
#endif
    std::vector<uint32_t> pipe_v_, pipe_d_;   // stage 1 .. ext_latency of the read pipeline (pipe_d_: W each)
    std::vector<uint32_t*> sp_mems_;          // the scratchpad's memory, or its banks
    unsigned bank_bits_ = 0;
    unsigned imem_dirty_ = 0;                 // instruction words that may be nonzero
    bool last_hung_ = false;
    unsigned long long oob_ = 0, time_ = 0;
};

static void read_words(Reader& in, const char* name, unsigned limit, int per_word, std::vector<uint32_t>& out) {
    in.keyword(name);
    unsigned long long n = in.number(name);
    if (n > limit) die(std::string(name) + " image has " + std::to_string(n) + " words but the memory holds " + std::to_string(limit));
    out.assign(n * per_word, 0);
    for (unsigned long long i = 0; i < n; ++i) in.hex(&out[i * per_word], per_word);
}

int main(int argc, char** argv) {
    const char* jobs_path = "-";
    const char* out_path = "-";
    const char* trace_path = nullptr;
    unsigned axi_pause = 0, axi_write_latency = 1;
    unsigned long long axi_seed = 0;
    const char* dram_arg = nullptr;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if ((a == "--jobs" || a == "--out" || a == "--trace" || a == "--axi-pause" || a == "--axi-seed" ||
             a == "--axi-write-latency" || a == "--dram")
            && i + 1 < argc) {
            const char* v = argv[++i];
            if (a == "--jobs") jobs_path = v;
            else if (a == "--out") out_path = v;
            else if (a == "--axi-pause") axi_pause = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
            else if (a == "--axi-seed") axi_seed = std::strtoull(v, nullptr, 10);
            else if (a == "--axi-write-latency") axi_write_latency = static_cast<unsigned>(std::strtoul(v, nullptr, 10));
            else if (a == "--dram") dram_arg = v;
            else trace_path = v;
        } else if (a == "--help" || a == "-h") {
            std::printf("usage: %s [--jobs FILE|-] [--out FILE|-] [--trace FILE] [--axi-pause PERMILLE] "
                        "[--axi-seed N] [--axi-write-latency N] [--dram P1,...,P20]\n", argv[0]);
            return 0;
        } else {
            die("unknown argument '" + a + "' (try --help)");
        }
    }
    int fd = 0;
    if (std::strcmp(jobs_path, "-") != 0) {
        fd = ::open(jobs_path, O_RDONLY);
        if (fd < 0) die(std::string("cannot open job file '") + jobs_path + "'");
    }
    FILE* fout = stdout;
    if (std::strcmp(out_path, "-") != 0) {
        fout = std::fopen(out_path, "w");
        if (!fout) die(std::string("cannot open result file '") + out_path + "'");
    }
    Reader in(fd);
    Writer out(fout);

    in.keyword(FORMAT_MAGIC_IN);
    if (in.number("format version") != static_cast<unsigned long long>(FORMAT_VERSION))
        die("unsupported job-file version (this harness reads version 3)");
    Config cfg;
    in.keyword("ext_words");   cfg.ext_words = static_cast<unsigned>(in.number("ext_words"));
    in.keyword("sp_words");    cfg.sp_words = static_cast<unsigned>(in.number("sp_words"));
    in.keyword("sp_banks");    cfg.sp_banks = static_cast<unsigned>(in.number("sp_banks"));
    in.keyword("imem_words");  cfg.imem_words = static_cast<unsigned>(in.number("imem_words"));
    in.keyword("ext_latency"); cfg.ext_latency = static_cast<unsigned>(in.number("ext_latency"));
    if (!cfg.ext_words || !cfg.sp_words || !cfg.imem_words || !cfg.ext_latency)
        die("the job-file header needs nonzero sizes and latency");

    if (axi_pause > 999) die("--axi-pause is per mille: 0..999");
    Bench bench(cfg, trace_path);
#if GA2_AXI
    bench.axi_pause = axi_pause;
    if (axi_write_latency < 1) die("--axi-write-latency must be at least 1");
    bench.axi_write_latency = axi_write_latency;
    bench.axi_seed = axi_seed;
    if (dram_arg) {
        long long v[DRAM_PARAMS];
        const char* s = dram_arg;
        for (int k = 0; k < DRAM_PARAMS; ++k) {
            char* e;
            v[k] = std::strtoll(s, &e, 10);
            if (e == s || v[k] < 0 || (k < DRAM_PARAMS - 1 ? *e != ',' : *e != 0))
                die("--dram takes " + std::to_string(DRAM_PARAMS) + " comma-separated counts (sim/verilator.py)");
            s = e + 1;
        }
        bench.dram_params = DramParams{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
                                       v[12], v[13], v[14], v[15], v[16], v[17], v[18], v[19]};
        if (!bench.dram_params.tck_ps || !bench.dram_params.clock_mhz || !bench.dram_params.banks ||
            !bench.dram_params.row_bytes || !bench.dram_params.burst_bytes || !bench.dram_params.data_bytes_per_ck)
            die("--dram: tCK, the clock, banks, row, burst and transfer sizes must be nonzero");
    }
#else
    if (dram_arg) die("--dram needs a chip built with an AXI4 port (axi = 1)");
    if (axi_pause) die("--axi-pause needs a chip built with an AXI4 port (axi = 1)");
#endif
    out.str(FORMAT_MAGIC_OUT); out.str(" 1\n");
    out.flush();

    std::string tok;
    Job job;
    while (in.token(tok)) {
        if (tok != "job") die("expected 'job', got '" + tok + "'");
        job.id = in.number("job id");
        in.keyword("limit");  job.limit = in.number("limit");
        in.keyword("reset");  job.reset = in.number("reset") != 0;
        in.keyword("dump");
        unsigned long long dump = in.number("dump");
        job.dump_ext = dump & 1;
        job.dump_sp = dump & 2;
        in.keyword("window");
        job.window_from = in.number("window start");
        job.window_words = in.number("window words");
        if (job.window_from > cfg.ext_words || job.window_words > cfg.ext_words - job.window_from)
            die("job " + std::to_string(job.id) + ": the window passes the end of the external memory");
        read_words(in, "prog", cfg.imem_words, 4, job.prog);
        read_words(in, "ext", cfg.ext_words, 1, job.ext);
        read_words(in, "sp", cfg.sp_words, 1, job.sp);
        in.keyword("end");
        if (job.limit < 1) die("job " + std::to_string(job.id) + " has a cycle limit below 1");
        bench.run(job, out);
    }
    out.str("done\n");
    out.flush();
    if (fout != stdout) std::fclose(fout);
    return 0;
}
