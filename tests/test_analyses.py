"""The chapter's analyses, figure by figure: the planner, the 7B table, traffic and intensity, static against
continuous batching, the latency model, and the roofline; their JSON schemas, plots and error handling.

Expected values are the chapter's printed numbers, written here as literals. Figures that depend only on
arithmetic (planner, 7B table, traffic, wasted slots) must equal the chapter's exactly; cycle counts are
GA-2's own (faster than the chapter's chip), so they are checked against the cycle model, recomputed here.
"""

import json

import pytest

from ga2_sw import cycles, decode
from ga2_cli.analyses import latency
from ga2_sw.analyses import model7b, planner, serving, traffic
from ga2_cli import main
from ga2_sw.config import Config

CFG = Config()


def fmt0(x):
    """The chapter prints its tokens/s with '%.0f'."""
    return f"{x:.0f}"


def run_json(tmp_path, *argv):
    path = tmp_path / "out.json"
    assert main([*argv, "--json", str(path)]) == 0
    return json.loads(path.read_text())


# -- planner (running example A) -----------------------------------------------------------------------------

# (chip, context): (max batch, B=1, B=4, B=16, B=64, best, limit), as printed by the chapter.
CHAPTER_PLANNER = {
    ("A", 2048): (31, "66", "219", "513", "--", "656", "931"),
    ("B", 2048): (135, "265", "875", "2053", "3095", "3397", "3725"),
    ("C", 2048): (344, "663", "2186", "5132", "7737", "8973", "9313"),
    ("A", 8192): (7, "55", "128", "--", "--", "159", "233"),
    ("B", 8192): (33, "219", "513", "774", "--", "848", "931"),
    ("C", 8192): (86, "547", "1283", "1934", "2215", "2243", "2328"),
    ("A", 32768): (1, "32", "--", "--", "--", "32", "58"),
    ("B", 32768): (8, "128", "193", "--", "--", "211", "233"),
    ("C", 32768): (21, "321", "484", "554", "--", "560", "582"),
}


def test_planner_reproduces_every_cell_of_the_chapter():
    rows = planner.plan()
    assert len(rows) == 9
    for r in rows:
        mb, *cells = CHAPTER_PLANNER[(r["chip"], r["context"])]
        assert r["max_batch"] == mb
        got = ["--" if r["tokens_per_s"][b] is None else fmt0(r["tokens_per_s"][b]) for b in ("1", "4", "16", "64")]
        assert got + [fmt0(r["best"]), fmt0(r["limit"])] == cells, (r["chip"], r["context"])


def test_planner_json_schema_and_values(tmp_path):
    data = run_json(tmp_path, "planner")
    assert list(data) == ["rows"]
    assert len(data["rows"]) == 9
    for r in data["rows"]:
        assert set(r) == {"chip", "capacity_bytes", "bandwidth_bytes_per_s", "context", "max_batch",
                          "tokens_per_s", "best", "limit"}
        assert set(r["tokens_per_s"]) == {"1", "4", "16", "64"}
    b2048 = next(r for r in data["rows"] if r["chip"] == "B" and r["context"] == 2048)
    assert (b2048["capacity_bytes"], b2048["bandwidth_bytes_per_s"]) == (80e9, 2e12)
    a32k = next(r for r in data["rows"] if r["chip"] == "A" and r["context"] == 32768)
    assert a32k["tokens_per_s"]["4"] is None and a32k["max_batch"] == 1


def test_planner_options_and_toml(tmp_path):
    data = run_json(tmp_path, "planner", "--chip", "X:16:0.3", "--context", "4096")
    (r,) = data["rows"]
    # 16 GB - 7 GB leaves room for 8 requests of 1 GiB; batch 1 at 0.3 TB/s.
    assert r["chip"] == "X" and r["max_batch"] == 8 and fmt0(r["tokens_per_s"]["1"]) == "37"
    toml = tmp_path / "plan.toml"
    toml.write_text('weight_bytes = 3.5e9\ncontexts = [2048]\n\n[[chip]]\nname = "B"\ncapacity_gb = 80\n'
                    'bandwidth_tb_per_s = 2\n')
    data = run_json(tmp_path, "planner", "--config", str(toml))
    (r,) = data["rows"]
    assert r["max_batch"] == 142 and fmt0(r["limit"]) == "3725"      # int4 weights: more room, same limit


@pytest.mark.parametrize("text, key", [
    ('[[chip]]\nname = "A"\ncapacity_gb = "lots"\nbandwidth_tb_per_s = 1\n', "chip[0].capacity_gb"),
    ('[[chip]]\nname = "A"\ncapacity_gb = 24\n', "chip[0].bandwidth_tb_per_s"),
    ("contexts = [2048, -1]\n", "contexts"),
    ("weight_bytes = 0\n", "weight_bytes"),
    ("colour = 'red'\n", "colour"),
    ("weight_bytes = = 1\n", "not valid TOML"),
])
def test_planner_bad_toml_is_one_clear_line(tmp_path, capsys, text, key):
    toml = tmp_path / "bad.toml"
    toml.write_text(text)
    assert main(["planner", "--config", str(toml)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(toml) in err and key in err


@pytest.mark.parametrize("chip", ["A:24", "A:lots:1", "A:24:-1", ":24:1"])
def test_planner_bad_chip_is_one_clear_line(capsys, chip):
    assert main(["planner", "--chip", chip]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--chip" in err and repr(chip) in err


# -- the 7B-class table ---------------------------------------------------------------------------------------

CHAPTER_7B = {"fp16": ["66", "219", "513", "774", "886"], "int8": ["124", "354", "662", "845", "908"],
              "int4": ["219", "513", "774", "886", "920"]}
CHAPTER_CACHE_EQUALS_WEIGHTS = {"fp16": "13.0", "int8": "6.5", "int4": "3.3"}


def test_model7b_reproduces_the_chapter(tmp_path):
    result = model7b.analyse()
    for r in result["rows"]:
        assert [fmt0(r["tokens_per_s"][b]) for b in ("1", "4", "16", "64", "256")] == CHAPTER_7B[r["weights"]]
        assert f"{r['cache_equals_weights_at']:.1f}" == CHAPTER_CACHE_EQUALS_WEIGHTS[r["weights"]]
    assert fmt0(result["limit"]) == "931"
    data = run_json(tmp_path, "model7b")
    assert set(data) == {"rows", "limit"}
    assert [r["weights"] for r in data["rows"]] == ["fp16", "int8", "int4"]
    for r in data["rows"]:
        assert set(r) == {"weights", "tokens_per_s"}
        assert set(r["tokens_per_s"]) == {"1", "4", "16", "64", "256"}


def test_model7b_options_change_the_result(tmp_path):
    data = run_json(tmp_path, "model7b", "--bandwidth", "2e12", "--context", "2048")
    assert fmt0(data["limit"]) == "3725"        # twice the bandwidth, half the cache: 4 x 931 (chip B's limit)


# -- traffic and intensity ------------------------------------------------------------------------------------

def test_traffic_split_equals_the_programs():
    assert traffic.weight_words(CFG) == 768
    assert traffic.sequence_words(CFG, 16) == 544
    progs = traffic.measured_programs(CFG)
    assert [p["words"] for p in progs[:4]] == [1312, 1856, 2400, 2944]
    assert [p["words"] for p in progs[:4]] == [768 + 544 * b for b in (1, 2, 3, 4)]
    ragged = progs[4]
    assert ragged["lengths"] == [3, 9, 1, 14] and (ragged["words"], ragged["macs"]) == (1760, 3936)
    assert [p["macs"] for p in progs[:4]] == [1280, 2560, 3840, 5120]
    # The formula at every length and batch shape equals the words of the real program.
    P = decode.rq_params(decode.make_workload(CFG, 1, 1, 0))
    for lengths in ([1], [2, 16], [5, 5, 5], [16, 1, 7, 12]):
        macs, words = decode.traffic(decode.program(CFG, list(range(len(lengths))), lengths, P))
        assert words == traffic.step_words(CFG, lengths) and macs == traffic.step_macs(CFG, lengths)
    assert len(progs) == 5


def test_intensity_against_batch_and_its_limit(tmp_path):
    data = run_json(tmp_path, "traffic")
    assert set(data) == {"programs", "intensity", "limit", "limit_vs_context"}
    assert all(set(p) == {"name", "lengths", "macs", "words"} for p in data["programs"])
    assert all(set(r) == {"batch", "mac_per_word"} for r in data["intensity"])
    assert all(set(r) == {"context", "limit"} for r in data["limit_vs_context"])
    got = {r["batch"]: f"{r['mac_per_word']:.2f}" for r in data["intensity"]}
    assert got == {1: "0.98", 2: "1.38", 4: "1.74", 16: "2.16", 64: "2.30", 1000000: "2.35"}
    assert f"{data['limit']:.2f}" == "2.35"
    limits = [r["limit"] for r in data["limit_vs_context"] if r["context"] >= 16]
    assert limits == sorted(limits, reverse=True) and 1 < limits[-1] < 1.001      # tends to 1 as L grows


def test_roofline_places_the_measured_steps(tmp_path):
    data = run_json(tmp_path, "roofline", "--mode", CFG.mode.value)
    assert set(data) == {"peak", "ridge", "points"} and (data["peak"], data["ridge"]) == (16, 16)
    assert all(set(p) == {"name", "intensity", "achieved", "ceiling"} for p in data["points"])
    P = decode.rq_params(decode.make_workload(CFG, 1, 1, 0))
    for b, p in zip((1, 2, 3, 4), data["points"]):
        prog = decode.program(CFG, list(range(b)), [16] * b, P)
        assert p["achieved"] == 1280 * b / cycles.cycle_counts(prog, CFG)[0].cycles
        assert p["ceiling"] == p["intensity"] == 1280 * b / (768 + 544 * b)
    assert all(p["achieved"] < p["ceiling"] for p in data["points"])      # memory-bound, below the roof


# -- serving (running example B) ------------------------------------------------------------------------------

def _cycles(P, ts):
    return cycles.cycle_counts(decode.program(CFG, list(range(len(ts))), list(ts), P), CFG)[0].cycles


def test_serving_slots_and_step_costs_come_from_the_cycle_model(tmp_path):
    data = run_json(tmp_path, "serving", "--mode", CFG.mode.value)
    assert set(data) == {"static", "continuous", "requests", "capacity"}
    for policy in ("static", "continuous"):
        assert set(data[policy]) == {"total_cycles", "steps", "slots", "useful_slots"}
    assert data["requests"] == [14, 3, 9, 5, 12, 2, 7, 10] and data["capacity"] == 4
    st, co = data["static"], data["continuous"]
    assert (st["slots"], st["slots"] - st["useful_slots"]) == (104, 42)
    assert co["slots"] == co["useful_slots"] == 62
    assert (st["steps"], co["steps"]) == (26, 19)

    # Static, recomputed by hand: groups (14, 3, 9, 5) and (12, 2, 7, 10), all four at the group's step.
    P = decode.rq_params(decode.make_workload(CFG, 4, 16, 123))
    expected_static = sum(_cycles(P, [s] * 4) for s in range(1, 15)) + sum(_cycles(P, [s] * 4) for s in range(1, 13))
    assert st["total_cycles"] == expected_static

    # Continuous, recomputed by hand: token counts of the live requests at each of the 19 steps.
    lens = [14, 3, 9, 5, 12, 2, 7, 10]
    slots, nxt, made, total = [None] * 4, 0, [0] * 8, 0
    while nxt < 8 or any(s is not None for s in slots):
        for k in range(4):
            if slots[k] is None and nxt < 8:
                slots[k], nxt = nxt, nxt + 1
        live = [i for i in slots if i is not None]
        for i in live:
            made[i] += 1
        total += _cycles(P, [made[i] for i in live])
        slots = [None if i is not None and made[i] == lens[i] else i for i in slots]
    assert co["total_cycles"] == total
    assert co["total_cycles"] < st["total_cycles"]


def test_serving_completion_times_and_policies():
    result = serving.serve(CFG)
    st, co = result["static"], result["continuous"]
    # The first static group's 3-token request ends after its third step; the whole run ends with request 4.
    first = st["schedule"]
    assert st["completion"][1] == sum(s["cycles"] for s in first[:3])
    assert st["worst_completion"] == st["total_cycles"] == st["completion"][4]
    assert co["worst_completion"] == co["total_cycles"]
    assert [len(s["slots"]) for s in co["schedule"]] == [4] * 14 + [2, 1, 1, 1, 1]
    assert [sum(live for *_, live in s["slots"]) for s in st["schedule"]] == \
        [4, 4, 4, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 4, 4, 3, 3, 3, 3, 3, 2, 2, 2, 1, 1]


def test_serving_rejects_requests_beyond_max_ctx(capsys):
    with pytest.raises(ValueError, match="max_ctx"):
        serving.serve(CFG, [14, 17])
    assert main(["serving", "--requests", "3,40"]) == 2
    assert "max_ctx" in capsys.readouterr().err
    assert main(["serving", "--capacity", "5"]) == 2
    assert "rows" in capsys.readouterr().err


def test_serving_other_capacity(tmp_path):
    data = run_json(tmp_path, "serving", "--capacity", "2", "--requests", "4,1,2")
    # Static: (4, 1) for 4 steps then (2) for 2 steps: 10 slots, 7 useful. Continuous wastes none.
    assert (data["static"]["slots"], data["static"]["useful_slots"]) == (10, 7)
    assert data["continuous"]["slots"] == data["continuous"]["useful_slots"] == 7


# -- latency --------------------------------------------------------------------------------------------------

def test_latency_schema_and_model(tmp_path):
    data = run_json(tmp_path, "latency", "--mode", CFG.mode.value)
    assert set(data) == {"assumed", "ga2"}
    assert set(data["assumed"]) == set(data["ga2"]) == {"vs_batch", "vs_context"}
    assert all(set(r) == {"batch", "cycles", "compute", "weights", "kv", "bound"} for r in data["ga2"]["vs_batch"])
    assert all(set(r) == {"context", "cycles", "compute", "weights", "kv", "bound"}
               for r in data["ga2"]["vs_context"])
    assert all(set(r) == {"batch", "compute", "weights", "kv", "bound"} for r in data["assumed"]["vs_batch"])
    assert all(set(r) == {"context", "compute", "weights", "kv", "bound"} for r in data["assumed"]["vs_context"])
    vb = data["ga2"]["vs_batch"]
    assert [r["batch"] for r in vb] == [1, 2, 3, 4]
    assert [r["weights"] + r["kv"] for r in vb] == [1312, 1856, 2400, 2944]
    assert [r["compute"] for r in vb] == [80, 160, 240, 320]
    assert [r["context"] for r in data["ga2"]["vs_context"]] == list(range(1, 17))
    # The in-order chip never beats the bound, and the measured cycles are the cycle model's.
    P = decode.rq_params(decode.make_workload(CFG, 1, 1, 5))
    for r in vb:
        assert r["cycles"] == _cycles(P, [16] * r["batch"]) > r["bound"]
    # Assumed chip at B = 1, context 4,096: weights 7 ms, cache 1.07 ms, compute about 20 us.
    a1 = data["assumed"]["vs_batch"][0]
    assert a1["weights"] == pytest.approx(7e-3) and a1["kv"] == pytest.approx(1.073741824e-3)
    assert a1["bound"] == pytest.approx(a1["weights"] + a1["kv"])
    assert latency.compute_binds_from(latency.ASSUMED) is None


def test_latency_measured_on_the_long_context_steps(tmp_path):
    """`ga2 latency --measured`: each point is the cycle model's count of the program the chip runs, never
    below the words it moves; the terms are the traffic formula's; the crossings follow from them."""
    from ga2_sw.analyses.traffic import sequence_words, weight_words
    data = run_json(tmp_path, "latency", "--measured", "--sizes", "2,4", "--modes", "inorder,decoupled",
                    "--contexts", "16,64,256", "--batch-context", "64", "--d", "32", "--d-model", "64",
                    "--no-progress")
    assert [(p["rows"], p["mode"]) for p in data["panels"]] == [(2, "inorder"), (2, "decoupled"), (4, "inorder"),
                                                                (4, "decoupled")]
    for p in data["panels"]:
        cfg = latency.study_config(Config(d=32, d_model=64), p["rows"], p["mode"], [16, 64, 256])
        assert [r["batch"] for r in p["vs_batch"]] == list(range(1, p["rows"] + 1))
        assert [r["context"] for r in p["vs_context"]] == [16, 64, 256]
        for r in p["vs_batch"] + p["vs_context"]:
            assert r["weights"] == weight_words(cfg) == 3 * 64 * 32
            assert r["words"] == r["weights"] + r["kv"]          # the formula is the program's traffic
            assert r["cycles"] >= r["words"]
        c = p["crossings"]
        L = c["context_analytic"]
        assert p["rows"] * sequence_words(cfg, L) >= c["weights_words"] > p["rows"] * sequence_words(cfg, L - 1)
    fast = data["panels"][3]["vs_context"][-1]
    assert fast["cycles"] <= 1.10 * fast["bound"]               # decoupled, memory-bound at 256 tokens


# -- plots ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["traffic", "roofline", "model7b", "planner", "serving", "latency"])
def test_plot_writes_a_png(tmp_path, command):
    path = tmp_path / f"{command}.png"
    assert main([command, "--plot", str(path)]) == 0
    data = path.read_bytes()
    assert len(data) > 10_000 and data[:8] == b"\x89PNG\r\n\x1a\n"


def test_bank_conflicts_count_operands_per_bank():
    """A hand-counted slice: A's column at 0 and 8, Bop's row at 16, 17: under mod 8 three operands share bank 0
    (two extra cycles); under mod 16 only 0 and 16 do (one)."""
    from ga2_sw.analyses.banks import BANK_MAPS, bank_conflicts, slice_addresses
    from ga2_sw.isa import halt, mm
    prog = [mm(dst=100, A=0, B=16, M=2, K=1, N=2, lda=8, ldb=4), halt()]
    assert list(slice_addresses(prog[0])) == [[0, 8, 16, 17]]
    assert bank_conflicts([prog], BANK_MAPS["mod 8"][1]) == (1, 2, 3)
    assert bank_conflicts([prog], BANK_MAPS["mod 16"][1]) == (1, 1, 2)


def test_banks_command_on_the_decode_programs(tmp_path):
    """The figures docs/ARCHITECTURE.md quotes for the decode-table programs as laid out today: for the chip's 8
    banks, where only the P V tiles still meet (374 extra slice cycles), and for 16 banks (619)."""
    import json
    from ga2_cli import main

    def rows(*options):
        assert main(["banks", "--json", str(tmp_path / "b.json"), *options]) == 0
        return {r["map"]: r for r in json.loads((tmp_path / "b.json").read_text())["rows"]}
    eight, sixteen = rows(), rows("--sp-banks", "16")
    assert eight["mod 8"]["slices"] == sixteen["mod 8"]["slices"] == 2492
    assert (eight["mod 8"]["extra_cycles"], eight["add-skew 8"]["extra_cycles"], eight["row-skew 8"]["extra_cycles"]) \
        == (8934, 1422, 374)
    assert sixteen["add-skew 16"]["extra_cycles"] == 619
