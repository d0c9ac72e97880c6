"""The external memory system (npu_byoc.arch.memory): its timing against a plain recurrence and
hand-derived values, its defaults against the zero-wait-state formula, and the three timing
specifications (cycle model, C model, RTL under Verilator) equal under several memories."""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from npu_byoc.arch import cycles
from npu_byoc.arch.config import DEFAULT_CONFIG, HwConfig, configure
from npu_byoc.arch.encoder import Dma, encode
from npu_byoc.arch.isa import Opcode, Region, Status
from npu_byoc.arch.memory import InFlight, Memory, memory, sustained_bytes_per_cycle, transfer_cycles
from npu_byoc.arch.options import config_from
from npu_byoc.arch.vela_config import from_vela_ini
from npu_byoc.errors import NpuByocError
from npu_byoc.codegen.schedule import schedule_partition
from npu_byoc.runtime.functional import FunctionalNpu

from .test_cycles import bind


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def recurrence(rows: int, row_bytes: int, port: int, m: Memory, write: bool) -> int:
    """docs/memory.md's definition, burst by burst, with no shortcut."""
    latency = m.write_latency if write else m.read_latency
    window = m.max_writes if write else m.max_reads
    per_burst = 256 * port  # AXI4's longest burst, in requests
    times = []
    for _ in range(rows):
        offset = 0
        while offset < row_bytes:
            b = min(per_burst, row_bytes - offset)
            charged = max(b, m.burst_bytes) if offset == 0 else b
            times.append(max(_ceil_div(b, port), _ceil_div(m.clock_divider * charged, m.bytes_per_cycle)))
            offset += b
    d = [0] * window
    for t in times:
        d.append(max(d[-1], d[-window] + latency) + t)
    return d[-1]


def test_transfer_cycles_equal_the_recurrence():
    rng = random.Random(25)
    for _ in range(2000):
        m = Memory(rng.choice([1, 3, 8, 16, 64]), rng.choice([1, 2, 8]), rng.choice([0, 1, 5, 32, 64]),
                   rng.choice([0, 3, 32]), rng.choice([1, 8, 32, 128]), rng.randint(1, 8), rng.randint(1, 8))  # fmt: skip
        args = (rng.randint(1, 9), rng.choice([1, 3, 16, 40, 100, 300]), rng.choice([1, 8, 16]), m, rng.random() < 0.5)
        assert transfer_cycles(*args) == recurrence(*args), args


def test_vela_sram_by_hand():
    """Ethos_U55_High_End_Embedded's SRAM (8 bytes per cycle, latency 32, bursts of 32 bytes, 4
    reads in flight) behind a 16-byte port: 1024 contiguous bytes are one burst of 128 cycles
    after the latency; 32 rows of 32 bytes are 32 bursts of 4 cycles, and 4 in flight cover 16
    of every 36 cycles: d_32 = 48 + 7 * 36 = 300."""
    hw = configure(fm_mem_bytes_per_cycle=8, fm_mem_read_latency=32, fm_mem_burst_bytes=32, fm_mem_max_reads=4)
    assert cycles.dma_cycles(1024, hw=hw, region=int(Region.SCRATCH)) == cycles.DMA_SETUP_CYCLES + 32 + 128
    assert cycles.dma_cycles(32, 32, hw=hw, region=int(Region.SCRATCH)) == cycles.DMA_SETUP_CYCLES + 300
    # 8 in flight cover 32 of the 36 cycles a burst waits: each later window of 8 loses 4
    hw8 = replace(hw, fm_mem_max_reads=8)
    assert cycles.dma_cycles(32, 32, hw=hw8, region=int(Region.SCRATCH)) == cycles.DMA_SETUP_CYCLES + 160 + 3 * 4
    # 9 hide the latency: paid once, then 4 cycles a burst
    hw9 = replace(hw, fm_mem_max_reads=9)
    assert cycles.dma_cycles(32, 32, hw=hw9, region=int(Region.SCRATCH)) == cycles.DMA_SETUP_CYCLES + 32 + 128
    # a 4-byte row still costs a whole 32-byte burst: 4 cycles, not 1
    assert transfer_cycles(1, 4, 16, memory(hw9, "fm_mem"), False) == 32 + 4
    # the weights are in const_mem, untouched: today's 1024 / 16 requests
    assert cycles.dma_cycles(1024, hw=hw, region=int(Region.CONST)) == cycles.DMA_SETUP_CYCLES + 64
    # a slower clock: 8 bytes every 8 core cycles is one byte a cycle
    flash = configure(const_mem_bytes_per_cycle=8, const_mem_clock_divider=8)
    assert cycles.dma_cycles(1000, hw=flash, region=int(Region.CONST)) == cycles.DMA_SETUP_CYCLES + 1000


def test_in_flight_across_transfers_equals_the_recurrence():
    """memory.InFlight against docs/memory.md's definition with no shortcut: the bursts of every
    transfer on one memory and direction in one sequence, burst i starting at
    ``max(d_{i-1}, max(ready, d_{i-O}) + L)``, a transfer's first at its first request at the
    earliest; random transfers, queued (ready before origin) or not, on both memories."""
    rng = random.Random(2025)
    for _ in range(300):
        hw = random_memory_config(rng, replace(DEFAULT_CONFIG, dma_bytes_per_cycle=rng.choice([1, 8, 16])))
        flights, seen = InFlight(hw), {}  # seen: per (memory, write) every burst's d so far
        t = 0
        for _ in range(rng.randint(1, 6)):
            rows, row_bytes = rng.randint(1, 40), rng.choice([1, 3, 16, 40, 300, 5000])
            region, write = rng.choice([int(Region.CONST), int(Region.SCRATCH)]), rng.random() < 0.5
            ready = t + rng.randint(0, 3)
            origin = ready + rng.choice([0, 0, 1, 20, 200])
            got = flights.transfer(rows, row_bytes, region, write, ready, origin)
            name = "const_mem" if region == int(Region.CONST) else "fm_mem"
            m = memory(hw, name)
            latency, window = (m.write_latency, m.max_writes) if write else (m.read_latency, m.max_reads)
            d = seen.setdefault((name, write), [])
            times = []  # the recurrence's own bursts (test_transfer_cycles_equal_the_recurrence)
            per_burst = 256 * hw.dma_bytes_per_cycle
            for _ in range(rows):
                for offset in range(0, row_bytes, per_burst):
                    b = min(per_burst, row_bytes - offset)
                    charged = max(b, m.burst_bytes) if offset == 0 else b
                    times.append(max(_ceil_div(b, hw.dma_bytes_per_cycle),
                                     _ceil_div(m.clock_divider * charged, m.bytes_per_cycle)))  # fmt: skip
            prev = origin
            for tb in times:
                oldest = d[-window] if len(d) >= window else 0
                prev = max(prev, max(ready, oldest) + latency) + tb
                d.append(prev)
            assert got == prev, (hw, rows, row_bytes, region, write, ready, origin)
            t = got + rng.choice([0, 1, 3, 50])


def test_a_queued_transfer_finds_its_latency_paid():
    """Two 1024-byte loads queued back to back on U55's SRAM (latency 32, 4 reads in flight, an
    8-byte port), by hand: the first acts at 0, is queued at 3 and streams its one burst of 128
    cycles from 3 + 32, done at 35 + 128 + 2 = 165. The second, queued at 7, had its requests
    issued then (one burst in flight before it): the mover takes it at 166 and its data streams
    at once, done at 166 + 128 + 2 = 296, not 328 (the latency paid again after the first).
    With one read in flight its request waits for the first burst's end (163): data at 195."""
    hw = configure(dma_bytes_per_cycle=8, fm_mem_bytes_per_cycle=8, fm_mem_read_latency=32, fm_mem_burst_bytes=32,
                   fm_mem_max_reads=4, dma_queue_depth=4)  # fmt: skip
    load = Dma(Opcode.DMA_IN, int(Region.SCRATCH), 0, 0, 1024, background=True)
    for reads, second in ((4, 296), (1, 195 + 128 + 2)):
        hw_r = replace(hw, fm_mem_max_reads=reads)
        clock = cycles.Timeline(4, hw_r)
        for _ in range(2):
            clock.command(load.opcode, cycles.step_cycles(load, hw_r), 0, cycles.dma_registers(load))
        assert clock.ends == [165, second]
        alone = cycles.Timeline(4)  # each transfer timed alone: the latency paid twice
        for _ in range(2):
            alone.command(load.opcode, cycles.step_cycles(load, hw_r))
        assert alone.ends == [165, 165 + 165 - cycles.QUEUE_HANDOFF_CYCLES]
    # a synchronous DMA is queued the cycle the mover takes it: nothing to look ahead to
    sync = replace(load, background=False)
    clock = cycles.Timeline(4, hw)
    for _ in range(2):
        clock.command(sync.opcode, cycles.step_cycles(sync, hw), 0, cycles.dma_registers(sync))
    assert clock.ends == [165, 166 + 165]


def test_defaults_are_the_zero_wait_state_memory():
    """With the default memories a DMA is today's formula (docs/cosim.md §5), any shape."""
    rng = random.Random(3)
    for _ in range(500):
        d = rng.choice([1, 3, 8, 16, 64])
        hw = replace(DEFAULT_CONFIG, dma_bytes_per_cycle=d)
        n0, n1, n2, s0 = rng.randint(1, 300), rng.randint(1, 5), rng.randint(1, 3), rng.choice([1, 1, 2, -1])
        want = 5 + n2 * n1 * (_ceil_div(n0, d) if s0 == 1 else n0)
        for region in (0, 1, 2):
            for write in (False, True):
                assert cycles.dma_cycles(n0, n1, n2, s0, hw, region, write) == want


def random_memory_config(rng: random.Random, base: HwConfig = DEFAULT_CONFIG) -> HwConfig:
    """A configuration with random memories (the fuzz --random-hw kind)."""
    fields = {}
    for mem in ("fm_mem", "const_mem"):
        fields |= {f"{mem}_bytes_per_cycle": rng.choice([1, 4, 8, 16, 32]),
                   f"{mem}_clock_divider": rng.choice([1, 1, 2, 4, 8]),
                   f"{mem}_read_latency": rng.choice([0, 1, 7, 32, 64]),
                   f"{mem}_write_latency": rng.choice([0, 5, 32]),
                   f"{mem}_burst_bytes": rng.choice([1, 16, 32, 100, 128]),
                   f"{mem}_max_reads": rng.randint(1, 8),
                   f"{mem}_max_writes": rng.randint(1, 8)}  # fmt: skip
    return configure(base, **fields)


# Ethos_U55_High_End_Embedded, Shared_Sram: feature maps in SRAM, weights in the flash
VELA_LIKE = configure(
    dma_bytes_per_cycle=8, fm_mem_bytes_per_cycle=8, fm_mem_read_latency=32, fm_mem_write_latency=32,
    fm_mem_burst_bytes=32, fm_mem_max_reads=4, fm_mem_max_writes=4, const_mem_bytes_per_cycle=8,
    const_mem_clock_divider=8, const_mem_read_latency=64, const_mem_burst_bytes=128, const_mem_max_reads=2,
)  # fmt: skip


def test_c_model_equals_the_cycle_model_under_random_memories(plans):
    rng = random.Random(7)
    for model in ("tiny_cnn_int8.tflite", "mobilenet_v2_int8.tflite"):
        for name, plan in plans(model).items():
            for k in range(3):
                hw = random_memory_config(rng, replace(DEFAULT_CONFIG, dma_overlap=k % 2))
                schedule = schedule_partition(plan, hw)
                got = FunctionalNpu(hw).run(schedule.words(), bind(plan, schedule))
                assert got.status == Status.OK
                assert got.cycles == cycles.stream_cycles(schedule.steps, hw), f"{model} {name} {hw}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", ["vela", 11])
def test_rtl_equals_the_c_model_and_the_cycle_model(plans, seed):
    """The RTL harness's memory grants the requests at the model's cycles: per command and in
    total, on the tiny CNN's partitions (the overlapped schedule, background DMAs queued) and
    on strided and short transfers of every direction and memory."""
    from npu_byoc.runtime import verilator as V

    hw = VELA_LIKE if seed == "vela" else random_memory_config(random.Random(seed))
    npu, c_model = V.VerilatorNpu(hw), FunctionalNpu(hw)
    for name, plan in plans("tiny_cnn_int8.tflite").items():
        schedule = schedule_partition(plan, hw)
        regions = bind(plan, schedule)
        got = npu.run(schedule.words(), {r: a.copy() for r, a in regions.items()}, trace=True)
        assert got.status == Status.OK, f"{name}: {got}"
        executed = [e.cycles for e in got.trace if e.opcode != Opcode.STOP]
        assert executed == cycles.command_timeline(schedule.steps, hw), name
        assert got.cycles == cycles.stream_cycles(schedule.steps, hw) == c_model.run(schedule.words(), regions).cycles
    scratch = np.zeros(4096, np.uint8)
    steps = [Dma(Opcode.DMA_IN, int(Region.CONST), 0, 0, 300),  # long rows
             Dma(Opcode.DMA_IN, int(Region.SCRATCH), 3, 400, 5, 7, 3, 1, 40, 300),  # short rows
             Dma(Opcode.DMA_IN, int(Region.SCRATCH), 1000, 600, 6, 4, 2, 2, 30, 100),  # strided bytes
             Dma(Opcode.DMA_OUT, int(Region.SCRATCH), 2000, 0, 33, 3, 2, 1, 50, 400),
             Dma(Opcode.DMA_OUT, int(Region.SCRATCH), 3000, 400, 5, 3, 1, 3, 20)]  # fmt: skip
    steps += [replace(s, background=True) for s in steps[1:]]
    regions = {int(Region.CONST): np.arange(512, dtype=np.uint8), int(Region.SCRATCH): scratch}
    got = npu.run(encode(steps), {r: a.copy() for r, a in regions.items()}, trace=True)
    assert got.status == Status.OK, got
    assert got.cycles == cycles.stream_cycles(steps, hw) == c_model.run(encode(steps), regions).cycles


def test_one_rtl_build_serves_every_memory():
    """The co-simulation library's key leaves the memories out (VerilatorNpu passes their timing
    with each run; test_rtl_equals_the_c_model_and_the_cycle_model[11] runs a random memory on
    the default build and is exact); the static archive (npu_submit, no options) keeps them."""
    from npu_byoc.runtime import verilator as V

    rng = random.Random(25)
    memories = [random_memory_config(rng) for _ in range(4)]
    library_keys = {V.build_key(V._runtime_memory_config(hw)) for hw in [DEFAULT_CONFIG, *memories]}
    assert len(library_keys) == 1
    assert len({V.build_key(hw) for hw in [DEFAULT_CONFIG, *memories]}) == 5  # the archives'
    assert V.build_key(V._runtime_memory_config(replace(memories[0], sram_bytes=1 << 16))) not in library_keys


# =============================================================================================
# Vela's system configurations (npu-byoc hw --from-vela-ini; tests/fixtures/vela.ini is Arm's)

VELA_INI = Path(__file__).parent / "fixtures" / "vela.ini"


def _hw_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "npu_byoc.cli", "hw", *argv], capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def test_from_vela_ini_shared_sram(tmp_path):
    """Ethos_U55_High_End_Embedded, Shared_Sram: feature maps in the SRAM (8 bytes a cycle on
    the 64-bit port, latency 32, bursts of 32), weights in the flash (clock scale 0.125: one
    byte a cycle, latency 64, bursts of 128); the TOML reads back as the same configuration."""
    out = tmp_path / "u55.toml"
    run = _hw_cli("--from-vela-ini", str(VELA_INI), "--system-config", "Ethos_U55_High_End_Embedded",
                  "--memory-mode", "Shared_Sram", "--format", "toml", "-o", str(out))  # fmt: skip
    assert run.returncode == 0, run.stderr
    hw = config_from(file=out)
    assert (hw.fm_mem_bytes_per_cycle / hw.fm_mem_clock_divider, hw.fm_mem_read_latency, hw.fm_mem_burst_bytes,
            hw.fm_mem_max_reads) == (8, 32, 32, 4)  # fmt: skip
    assert (hw.const_mem_bytes_per_cycle / hw.const_mem_clock_divider, hw.const_mem_read_latency,
            hw.const_mem_burst_bytes, hw.const_mem_max_reads) == (1, 64, 128, 2)  # fmt: skip
    assert hw.core_clock_hz == 500_000_000
    only = from_vela_ini(VELA_INI, "Ethos_U55_High_End_Embedded", "Sram_Only")
    assert {k[len("const_mem_"):]: v for k, v in only.items() if k.startswith("const_mem_")} == \
        {k[len("fm_mem_"):]: v for k, v in only.items() if k.startswith("fm_mem_")}  # fmt: skip
    # U85: two SRAM ports of 16 bytes; Dedicated_Sram_256KB: feature maps in the flash, SRAM 256 KiB
    u85 = from_vela_ini(VELA_INI, "Ethos_U85_SYS_Flash_High", "Dedicated_Sram_256KB", port_bytes=16)
    assert u85["fm_mem_bytes_per_cycle"] == 1 and u85["sram_bytes"] == 262144
    assert from_vela_ini(VELA_INI, "Ethos_U85_SYS_Flash_High", "Sram_Only", 16)["fm_mem_bytes_per_cycle"] == 32


def test_from_vela_ini_refusals(tmp_path):
    run = _hw_cli("--from-vela-ini", str(VELA_INI), "--system-config", "Nope", "--memory-mode", "Sram_Only")
    assert run.returncode != 0 and "no [System_Config.Nope] section" in run.stderr
    assert "Ethos_U55_High_End_Embedded" in run.stderr and "Traceback" not in run.stderr
    run = _hw_cli("--from-vela-ini", str(VELA_INI))
    assert run.returncode != 0 and "--system-config" in run.stderr
    odd = tmp_path / "odd.ini"
    odd.write_text("[System_Config.s]\naxi0_port=Sram\nSram_clock_scale=0.007\n[Memory_Mode.m]\n")
    with pytest.raises(NpuByocError, match="Sram_clock_scale=0.007 .* cannot map"):
        from_vela_ini(odd, "s", "m")
    odd.write_text("[System_Config.s]\naxi0_port=Sram\nSram_read_latency=99999\n[Memory_Mode.m]\n")
    with pytest.raises(NpuByocError, match="fm_mem_read_latency=99999: must be in"):
        from_vela_ini(odd, "s", "m")
    for key, value in (("core_clock", "inf"), ("Sram_read_latency", "nan"), ("Sram_clock_scale", "1e400")):
        odd.write_text(f"[System_Config.s]\naxi0_port=Sram\n{key}={value}\n[Memory_Mode.m]\n")
        with pytest.raises(NpuByocError, match=f"(?i){key}='{value}' is not a finite number"):  # was OverflowError
            from_vela_ini(odd, "s", "m")
    odd.write_text("[System_Config.s]\naxi0_port=Tape\n[Memory_Mode.m]\n")
    with pytest.raises(NpuByocError, match="axi0_port='Tape'"):
        from_vela_ini(odd, "s", "m")
    odd.write_bytes(b"\xff\xfe not ini")
    with pytest.raises(NpuByocError, match="cannot read the Vela configuration"):
        from_vela_ini(odd, "s", "m")


def test_roofline_and_time_follow_the_memories(plans):
    """The roofline divides each memory's bytes by what it sustains on long runs: U55's SRAM
    streams 32 bursts of 2 KiB (256 requests of 8 bytes) in 32 + 32·256 cycles, the flash one
    byte a cycle after its latency."""
    from npu_byoc.runtime.cosim_report import LayerResult, roofline, summarize

    fm = sustained_bytes_per_cycle(memory(VELA_LIKE, "fm_mem"), 8, 4096)
    assert fm == 65536 / (32 + 32 * 256)
    tiny = list(plans("tiny_cnn_int8.tflite").values())
    default, vela = roofline(tiny, DEFAULT_CONFIG), roofline(tiny, VELA_LIKE)
    assert default["memory_bound_cycles"] == default["minimum_external_bytes"] / 16
    flash = sustained_bytes_per_cycle(memory(VELA_LIKE, "const_mem"), 8, 4096)
    assert flash == 65536 / (64 + 65536)  # 1 byte a cycle: 2 bursts of 2048 cycles in flight hide the 64
    const, rest = vela["minimum_const_bytes"], vela["minimum_external_bytes"] - vela["minimum_const_bytes"]
    assert vela["memory_bound_cycles"] == pytest.approx(const / flash + rest / fm)
    row = LayerResult(0, "p", "l", "conv", "", 1000, 5000, 4000, 900, 100, 5000, 4.0, None, None, 0, 0, 0, 0.0)
    s = summarize([row], replace(DEFAULT_CONFIG, core_clock_hz=250_000_000))
    assert s["milliseconds"] == pytest.approx(0.02) and s["inferences_per_second"] == pytest.approx(50_000)
