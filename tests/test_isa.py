"""The instruction encoding and static validation (docs/ISA.md, "Encoding" and "Validation and error codes")."""

import pytest
from hypothesis import given, settings, strategies as st

from ga2_sw import isa
from ga2_sw.config import Config
from ga2_sw.isa import Op, Err, Instr, rows_moved

CFG = Config()


def field_values(op):
    """A strategy for the assembly fields of one opcode, each over its whole encodable range."""
    return st.fixed_dictionaries({name: st.integers(*isa.field_range(op, name)) for name, _ in isa.FIELDS[op]})


instrs = st.sampled_from(list(Op)).flatmap(lambda op: field_values(op).map(lambda f: Instr(op, **f)))


# -- encoding -------------------------------------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(instrs)
def test_encode_decode_round_trip(instr):
    word = isa.encode(instr)
    assert 0 <= word < 1 << 128
    assert isa.decode(word) == (instr, Err.NONE)


def test_field_ranges_follow_the_bit_layout():
    # widths from the table in docs/ISA.md
    widths = {"dst": 16, "src": 16, "len": 16, "A": 16, "B": 16, "K": 16, "M": 8, "N": 8, "tb": 1, "rb": 1, "sa": 1,
              "wd": 1, "ws": 1, "lda": 12, "ldb": 12, "ldc": 12, "s": 6, "st": 16, "a": 16, "ld": 12}
    external = {(Op.LD, "src"), (Op.ST, "dst")}          # 32-bit external addresses
    for op in Op:
        for name, _ in isa.FIELDS[op]:
            expected = (-(1 << 15), (1 << 15) - 1) if name == "m" else (0, (1 << widths[name]) - 1)
            if (op, name) in external:
                expected = (0, (1 << 32) - 1)
            assert isa.field_range(op, name) == expected, (op, name)


def test_st_s_whole_word_flag_is_bit_4_on_chips_built_with_it():
    # docs/ISA.md: [4] wd (ST), chips built with st_words = 1 only, elsewhere a stray bit (ILLEGAL)
    from ga2_sw.config import Config
    word = isa.encode(isa.st(src=1, dst=8, len=2, wd=1))
    assert word == isa.encode(isa.st(src=1, dst=8, len=2)) | 1 << 4
    assert isa.decode(word) == (isa.st(src=1, dst=8, len=2, wd=1), Err.NONE)
    packed = Config(mode="decoupled", bus_bytes=4)
    assert isa.used_bits(Op.ST, isa.features_of(packed.replace(st_words=1))) >> 4 & 1 and not isa.used_bits(Op.ST, isa.features_of(packed)) >> 4 & 1
    assert isa.check(isa.st(src=1, dst=8, len=2, wd=1), packed) == Err.ILLEGAL
    assert isa.USED_BITS[Op.LD] >> 4 & 1 == 0                  # never LD's


def test_smc_s_wide_scores_flag_is_bit_4_on_chips_built_with_it():
    # docs/ISA.md: [4] ws (SMC), chips built with wide_scores = 1 only, elsewhere a stray bit (ILLEGAL)
    from ga2_sw.config import Config
    narrow = isa.smc(dst=1, src=8, len=2, m=3, s=4, st=40, ld=5)
    word = isa.encode(isa.smc(dst=1, src=8, len=2, m=3, s=4, st=40, ld=5, ws=1))
    assert word == isa.encode(narrow) | 1 << 4
    online = Config(online_unit=1)
    assert isa.used_bits(Op.SMC, isa.features_of(online.replace(wide_scores=1))) >> 4 & 1
    assert not isa.used_bits(Op.SMC, isa.features_of(online)) >> 4 & 1
    assert not isa.used_bits(Op.RSA, isa.features_of(online.replace(wide_scores=1))) >> 4 & 1      # SMC's alone


def test_external_addresses_split_across_their_slot_and_xhi():
    # docs/ISA.md: LD's src and ST's dst, bits [15:0] in their 16-bit slot and bits [31:16] in [71:56].
    ld = isa.encode(isa.ld(dst=0x0102, src=0xABCD1234, len=0x0304))
    assert (ld >> 8) & 0xFFFF == 0x0102 and (ld >> 24) & 0xFFFF == 0x1234 and (ld >> 40) & 0xFFFF == 0x0304
    assert (ld >> 56) & 0xFFFF == 0xABCD and ld >> 72 == 0
    st_ = isa.encode(isa.st(src=0x0102, dst=0x00050006, len=7))
    assert (st_ >> 8) & 0xFFFF == 0x0006 and (st_ >> 24) & 0xFFFF == 0x0102 and (st_ >> 56) & 0xFFFF == 0x0005
    # below 65,536 the encoding is the one of 16-bit external addresses: xhi is zero
    assert isa.encode(isa.ld(dst=1, src=0xFFFF, len=2)) >> 56 == 0
    # xhi's bits are stray for SM and HALT (MM and RQ hold K and m there)
    for op in (Op.SM, Op.HALT):
        assert isa.USED_BITS[op] >> 56 & 0xFFFF == 0
    assert isa.decode(int(Op.SM) | 1 << 60)[1] == Err.ILLEGAL
    assert isa.decode(int(Op.HALT) | 1 << 56)[1] == Err.ILLEGAL


def test_external_range_counts_the_high_half():
    cfg = Config(ext_words=1 << 20)
    assert isa.check(isa.ld(dst=0, src=(1 << 20) - 4, len=4), cfg) == Err.NONE
    assert isa.check(isa.ld(dst=0, src=(1 << 20) - 3, len=4), cfg) == Err.EXT_RANGE
    assert isa.check(isa.st(src=0, dst=0x000F_FFFF, len=1), cfg) == Err.NONE
    assert isa.check(isa.st(src=0, dst=0x0010_0000, len=1), cfg) == Err.EXT_RANGE


def test_encoding_puts_fields_where_the_table_says():
    word = isa.encode(isa.mm(dst=0x1234, A=0x5678, B=0x9ABC, M=0x12, K=0xDEF0, N=0x34, tb=1,
                             lda=0x567, ldb=0x89A, ldc=0xBCD))
    assert word & 0xF == 3 and (word >> 4) & 1 == 1 and (word >> 5) & 1 == 0
    assert (word >> 8) & 0xFFFF == 0x1234 and (word >> 24) & 0xFFFF == 0x5678 and (word >> 40) & 0xFFFF == 0x9ABC
    assert (word >> 56) & 0xFFFF == 0xDEF0 and (word >> 72) & 0xFF == 0x12 and (word >> 80) & 0xFF == 0x34
    assert (word >> 88) & 0xFFF == 0x567 and (word >> 100) & 0xFFF == 0x89A and (word >> 112) & 0xFFF == 0xBCD
    assert word >> 124 == 0
    rq = isa.encode(isa.rq(dst=1, src=2, len=3, m=-1, s=47))
    assert (rq >> 56) & 0xFFFF == 0xFFFF and (rq >> 72) & 0x3F == 47 and rq >> 78 == 0
    assert isa.encode(isa.halt()) == 6


@settings(max_examples=300, deadline=None)
@given(instrs, st.integers(0, 127))
def test_a_stray_bit_makes_an_instruction_illegal(instr, bit):
    word = isa.encode(instr)
    used = isa.USED_BITS[instr.op]
    if used >> bit & 1:
        return                                   # a field bit: flipping it gives another legal instruction
    assert isa.decode(word | 1 << bit) == (None, Err.ILLEGAL)


def test_every_unused_bit_of_every_opcode_is_illegal():
    for op in Op:
        for bit in range(128):
            if not isa.USED_BITS[op] >> bit & 1:
                assert isa.decode(int(op) | 1 << bit)[1] == Err.ILLEGAL, (op, bit)
    # the reserved bits of the table are never used ([5] and [6] only by MM's rb and sa, [127:124] only by the
    # online instructions' st and a)
    for op in Op:
        assert isa.USED_BITS[op] & (1 << 7) == 0
        assert isa.USED_BITS[op] & (0b11 << 5) == 0 or op == Op.MM
        assert isa.USED_BITS[op] >> 124 == 0 or op in isa.ONLINE_OPS


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([0] + list(range(10, 16))), st.integers(0, (1 << 124) - 1))
def test_opcodes_0_and_10_to_15_are_illegal(opcode, rest):
    assert isa.decode(opcode | rest << 4) == (None, Err.ILLEGAL)
    assert isa.decode(opcode) == (None, Err.ILLEGAL)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([7, 8, 9]), st.integers(0, (1 << 124) - 1))
def test_opcodes_7_to_9_are_illegal_without_the_online_unit(opcode, rest):
    """SMC, RSA, NRM exist on chips built with them (Config.online_unit); elsewhere they fault ILLEGAL."""
    for word in (opcode | rest << 4, opcode):
        instr, err = isa.decode(word)
        assert err == Err.ILLEGAL or isa.check(instr, Config()) == Err.ILLEGAL


def test_decode_rejects_words_that_are_not_128_bit():
    for bad in (-1, 1 << 128):
        with pytest.raises(ValueError, match="128-bit"):
            isa.decode(bad)


def test_instr_rejects_bad_fields():
    with pytest.raises(isa.EncodingError, match=r"LD has no field 'M'"):
        Instr(Op.LD, M=1)
    with pytest.raises(isa.EncodingError, match=r"MM: field 'M' must be in range 0\.\.255, not 256"):
        isa.mm(0, 0, 0, M=256, K=1, N=1)
    with pytest.raises(isa.EncodingError, match=r"RQ: field 'm' must be in range -32768\.\.32767, not 32768"):
        isa.rq(0, 0, 1, m=32768, s=0)
    with pytest.raises(isa.EncodingError, match="must be an integer"):
        isa.ld(0, 0, True)


# -- validation ----------------------------------------------------------------------------------------

def test_check_accepts_legal_instructions():
    assert isa.check(isa.ld(0, 0, 16), CFG) == Err.NONE
    assert isa.check(isa.mm(0, 0, 0, M=4, K=1, N=4), CFG) == Err.NONE
    assert isa.check(isa.rq(0, 0, 1, m=-5, s=47), CFG) == Err.NONE
    assert isa.check(isa.sm(0, 0, CFG.sm_max_len), CFG) == Err.NONE
    assert isa.check(isa.halt(), CFG) == Err.NONE


@pytest.mark.parametrize("instr, err", [
    # SHAPE wins over both range errors
    (isa.ld(dst=5000, src=9000, len=0), Err.SHAPE),
    (isa.st(src=5000, dst=9000, len=0), Err.SHAPE),
    (isa.mm(dst=4095, A=4095, B=4095, M=5, K=2, N=1), Err.SHAPE),
    (isa.mm(dst=4095, A=4095, B=4095, M=1, K=2, N=5), Err.SHAPE),
    (isa.mm(dst=4095, A=4095, B=4095, M=0, K=2, N=1), Err.SHAPE),
    (isa.mm(dst=4095, A=4095, B=4095, M=1, K=0, N=1), Err.SHAPE),
    (isa.rq(dst=4095, src=4095, len=2, m=1, s=48), Err.SHAPE),
    (isa.sm(dst=4095, src=4095, len=65), Err.SHAPE),
    (isa.sm(dst=0, src=0, len=0), Err.SHAPE),
    # SP_RANGE wins over EXT_RANGE
    (isa.ld(dst=4095, src=8191, len=2), Err.SP_RANGE),
    (isa.st(src=4095, dst=8191, len=2), Err.SP_RANGE),
    # EXT_RANGE alone
    (isa.ld(dst=0, src=8191, len=2), Err.EXT_RANGE),
    (isa.st(src=0, dst=8191, len=2), Err.EXT_RANGE),
    (isa.ld(dst=0, src=8191, len=1), Err.NONE),
    (isa.rq(dst=4095, src=0, len=2, m=1, s=0), Err.SP_RANGE),
    (isa.rq(dst=0, src=4095, len=2, m=1, s=0), Err.SP_RANGE),
    (isa.sm(dst=4032, src=0, len=64), Err.NONE),
    (isa.sm(dst=4033, src=0, len=64), Err.SP_RANGE),
])
def test_check_error_codes_in_the_documented_order(instr, err):
    assert isa.check(instr, CFG) == err


def test_check_order_holds_on_a_small_configuration():
    cfg = Config(rows=2, cols=3, sp_words=64, ext_words=128, sm_max_len=16)
    assert isa.check(isa.mm(dst=63, A=0, B=0, M=3, K=1, N=1), cfg) == Err.SHAPE
    assert isa.check(isa.mm(dst=63, A=0, B=0, M=2, K=1, N=4), cfg) == Err.SHAPE
    assert isa.check(isa.mm(dst=63, A=0, B=0, M=2, K=1, N=3, ldc=0), cfg) == Err.SP_RANGE
    assert isa.check(isa.sm(0, 0, 17), cfg) == Err.SHAPE


SP = CFG.sp_words


@pytest.mark.parametrize("tb", [0, 1])
def test_mm_footprint_of_b_at_the_last_word(tb):
    K, N, ldb = 3, 2, 10
    last = (N - 1) * ldb + K - 1 if tb else (K - 1) * ldb + N - 1      # 12 (tb=1) or 21 (tb=0)
    ok = isa.mm(dst=0, A=0, B=SP - 1 - last, M=1, K=K, N=N, tb=tb, ldb=ldb)
    assert isa.check(ok, CFG) == Err.NONE
    over = isa.mm(dst=0, A=0, B=SP - last, M=1, K=K, N=N, tb=tb, ldb=ldb)
    assert isa.check(over, CFG) == Err.SP_RANGE


def test_mm_footprints_differ_with_tb():
    # B = SP - 13: with tb=1 the last word read is B + 1*10 + 2 = SP - 1; with tb=0 it is B + 2*10 + 1
    common = dict(dst=0, A=0, B=SP - 13, M=1, K=3, N=2, ldb=10)
    assert isa.check(isa.mm(tb=1, **common), CFG) == Err.NONE
    assert isa.check(isa.mm(tb=0, **common), CFG) == Err.SP_RANGE
    # B = SP - 22: both fit
    common["B"] = SP - 22
    assert isa.check(isa.mm(tb=0, **common), CFG) == Err.NONE
    assert isa.check(isa.mm(tb=1, **common), CFG) == Err.NONE


@pytest.mark.parametrize("operand", ["A", "dst"])
def test_mm_footprint_of_a_and_c_at_the_last_word(operand):
    M, K, N, stride = 3, 5, 4, 7
    last = (M - 1) * stride + (K - 1 if operand == "A" else N - 1)
    fields = dict(dst=0, A=0, B=0, M=M, K=K, N=N, lda=stride, ldc=stride)
    fields[operand] = SP - 1 - last
    assert isa.check(isa.mm(**fields), CFG) == Err.NONE
    fields[operand] += 1
    assert isa.check(isa.mm(**fields), CFG) == Err.SP_RANGE


def test_mm_stride_zero_reads_one_row_repeatedly():
    # lda = 0: every row of A is the same K words; the footprint is A .. A + K - 1
    assert isa.check(isa.mm(dst=0, A=SP - 4, B=0, M=4, K=4, N=1, lda=0), CFG) == Err.NONE
    assert isa.check(isa.mm(dst=0, A=SP - 3, B=0, M=4, K=4, N=1, lda=0), CFG) == Err.SP_RANGE


def _touched(i):
    """Every scratchpad address an MM reads or writes, by enumeration (no formula)."""
    addrs = set()
    for r in range(i.M):
        for k in range(i.K):
            addrs.add(i.A + r * i.lda + k)
    for k in range(i.K):
        for c in range(i.N):
            addrs.add(i.B + (c * i.ldb + k if i.tb else k * i.ldb + c))
    for r in range(i.M):
        for c in range(i.N):
            addrs.add(i.dst + r * i.ldc + c)
    return addrs


SMALL = Config(rows=4, cols=4, sp_words=64, ext_words=64, sm_max_len=16)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 70), st.integers(0, 70), st.integers(0, 70), st.integers(1, 4), st.integers(1, 9),
       st.integers(1, 4), st.integers(0, 1), st.integers(0, 12), st.integers(0, 12), st.integers(0, 12))
def test_mm_sp_range_matches_the_enumerated_footprint(dst, A, B, M, K, N, tb, lda, ldb, ldc):
    i = isa.mm(dst=dst, A=A, B=B, M=M, K=K, N=N, tb=tb, lda=lda, ldb=ldb, ldc=ldc)
    expected = Err.SP_RANGE if max(_touched(i)) >= SMALL.sp_words else Err.NONE
    assert isa.check(i, SMALL) == expected


def test_explain_says_why():
    assert isa.explain(isa.ld(0, 0, 1), CFG) == ""
    assert "M=5 is outside 1..4 (rows)" in isa.explain(isa.mm(0, 0, 0, M=5, K=1, N=1), CFG)
    assert "scratchpad" in isa.explain(isa.ld(4095, 0, 2), CFG)
    assert "external" in isa.explain(isa.ld(0, 8191, 2), CFG)


def test_rb_is_illegal_on_a_chip_built_without_row_b():
    """MM's rb (bit 5, docs/ISA.md) decodes anywhere, but only chips built with row_b = 1 execute it: elsewhere
    the sequencer faults ILLEGAL, as on a stray bit, before SHAPE and the range checks."""
    word = isa.encode(isa.mm(0, 0, 0, 2, 3, 2, rb=1))
    assert (word >> 5) & 1 == 1 and isa.decode(word) == (isa.mm(0, 0, 0, 2, 3, 2, rb=1), Err.NONE)
    plain, built = Config(mode="decoupled"), Config(mode="decoupled", row_b=1)
    assert isa.check(isa.mm(0, 0, 0, 2, 3, 2, rb=1), plain) == Err.ILLEGAL
    assert isa.check(isa.mm(0, 0, 0, 9, 3, 2, rb=1), plain) == Err.ILLEGAL        # before SHAPE
    assert isa.check(isa.mm(0, 0, 0, 2, 3, 2, rb=1), built) == Err.NONE
    assert "row_b=1" in isa.explain(isa.mm(0, 0, 0, 2, 3, 2, rb=1), plain)
    # an MM without it prints and assembles as it always has
    assert "rb" not in str(isa.mm(0, 0, 0, 2, 3, 2)) and "rb=1" in str(isa.mm(0, 0, 0, 2, 3, 2, rb=1))


def test_rb_footprint_spans_every_row_b():
    """With rb, row r's B starts r*lda words past B: B's range runs from B to row M-1's last operand, worked
    by hand: M=3, lda=100, N=2, K=4, tb=0, ldb=10: row 2's last is 200 + 3*10 + 1 past B."""
    i = isa.mm(dst=0, A=1000, B=2000, M=3, K=4, N=2, tb=0, lda=100, ldb=10, ldc=2, rb=1)
    assert isa.footprints(i)[0][1] == (2000, 2000 + 200 + 31)
    assert isa.footprints(i.__class__(**{**i.__dict__, "rb": 0}))[0][1] == (2000, 2031)
    cfg = Config(mode="decoupled", row_b=1, sp_words=2232)        # words 0..2231: row 2's last fits, just
    assert isa.check(i, cfg) == Err.NONE
    assert isa.check(isa.Instr(**{**i.__dict__, "B": 2001}), cfg) == Err.SP_RANGE


def test_sa_is_illegal_on_a_chip_built_without_row_b():
    """MM's sa (bit 6, docs/ISA.md), like rb: decodes anywhere, executes only on chips built with row_b = 1,
    prints only when set."""
    i = isa.mm(0, 0, 0, 2, 3, 2, sa=1)
    word = isa.encode(i)
    assert word >> 6 & 1 == 1 and word >> 5 & 1 == 0 and isa.decode(word) == (i, Err.NONE)
    plain, built = Config(mode="decoupled"), Config(mode="decoupled", row_b=1)
    assert isa.check(i, plain) == Err.ILLEGAL and isa.check(i, built) == Err.NONE
    assert isa.check(isa.mm(0, 0, 0, 9, 3, 2, sa=1), plain) == Err.ILLEGAL        # before SHAPE
    assert "sa=1 needs a chip built with row_b=1" in isa.explain(i, plain)
    assert "sa" not in str(isa.mm(0, 0, 0, 2, 3, 2)) and str(i).endswith(" sa=1")


def test_sa_footprint_is_row_0s_a():
    """With sa every row reads A's row 0: A's range is A .. A+K-1 whatever M and lda, while rb's Bs still run
    (M-1)*lda past B, worked by hand: M=3, K=4, lda=100, N=2, tb=0, ldb=10."""
    i = isa.mm(dst=0, A=1000, B=2000, M=3, K=4, N=2, tb=0, lda=100, ldb=10, ldc=2, rb=1, sa=1)
    assert isa.footprints(i)[0][:2] == [(1000, 1003), (2000, 2231)]
    assert isa.footprints(isa.Instr(**{**i.__dict__, "sa": 0}))[0][0] == (1000, 1203)
    cfg = Config(mode="decoupled", row_b=1, sp_words=2232)
    edge = isa.Instr(**{**i.__dict__, "A": 2228, "B": 0})             # row 0's A ends at 2231, the last word
    assert isa.check(edge, cfg) == Err.NONE
    assert isa.check(isa.Instr(**{**edge.__dict__, "A": 2229}), cfg) == Err.SP_RANGE
    assert isa.check(isa.Instr(**{**edge.__dict__, "sa": 0}), cfg) == Err.SP_RANGE


@pytest.mark.parametrize("op,rows,length,sp_stride,ext_stride", [
    ("LD", 3, 100, 100, 100), ("LD", 50, 1600, 1600, 1600), ("ST", 41, 1600, 1600, 1600), ("LD", 5, 64, 80, 64),
    ("ST", 4, 64, 64, 70), ("LD", 0, 64, 64, 64)])
def test_rows_moved_moves_each_row_once_in_instructions_that_encode(op, rows, length, sp_stride, ext_stride):
    """Rows between strided scratchpad and external rows: every element of every row moved exactly once to the
    right place, in as few instructions as ``len``'s 16 bits allow where both sides are packed (40 rows of 1,600
    words an instruction), one a row where they are not."""
    moves = rows_moved(op, 1000, sp_stride, 50_000, ext_stride, rows, length)
    pairs = [(i.dst + k, i.src + k) if op == "LD" else (i.src + k, i.dst + k) for i in moves for k in range(i.len)]
    want = [(1000 + r * sp_stride + k, 50_000 + r * ext_stride + k) for r in range(rows) for k in range(length)]
    assert sorted(pairs) == want and all(i.op == Op[op] for i in moves)
    packed = sp_stride == ext_stride == length
    assert len(moves) == (max(1, -(-rows * length // (65535 // length * length))) if packed else rows)
