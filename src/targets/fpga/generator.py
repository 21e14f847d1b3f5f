"""Amaranth hardware generator: one accelerator per (kernel, directive config).

Architecture (all widths in bits; one clock domain ``sync``):

- input arrays X and W, each split into the config's partition banks (one ``Memory`` per bank,
  ``width``-bit words, one synchronous read port and one host write port);
- a control ROM with one word per schedule step: the read address of every bank, the bank each
  lane reads (when it varies between steps), and first/last flags of the reduction;
- ``n_out x n_red`` multiply lanes (the unroll factors), an adder tree per output lane and an
  accumulator; ``mul_core`` picks hard multipliers (``dsp``) or LUT multipliers (``lut``, Yosys
  ``synth_ecp5 -nodsp``); ``pipeline=1`` adds a register stage after the multipliers, ``pipeline=2``
  one more after the adder trees (higher Fmax, more FFs, one more cycle of latency per stage);
- ``storage`` binds the input banks to block RAM (``bram``: DP16KD), distributed LUT RAM (``lutram``)
  or flip-flops (``reg``), through Yosys' ``ram_style`` attribute (``block`` / ``distributed`` /
  ``logic``), like HLS ``bind_storage`` (``reg`` = a completely partitioned bank);
- one output memory per output lane (depth = output groups), read back by the host.

Cycles per run = steps + pipeline depth (``Design.cycles``). Host protocol: write X and W with
``(wr_sel, wr_bank, wr_addr, wr_data, wr_en)`` (the bank and address from :meth:`Kernel.bank_map`),
pulse ``start``, wait for ``done``, read ``rd_lane``/``rd_addr`` -> ``rd_data`` (combinational).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Array, Elaboratable, Module, Mux, Signal, unsigned
from amaranth.lib.memory import Memory

from tunebench.targets.fpga.kernels import Kernel, Schedule

RAM_STYLE = {"auto": None, "bram": "block", "lutram": "distributed", "reg": "logic"}  # Yosys ram_style


def _bits(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 2))))


@dataclass
class Design:
    """A generated design and the numbers the estimate fidelity and the flow need."""

    top: Accelerator
    schedule: Schedule
    cycles: int
    lanes: int
    mul_core: str
    pipeline: int


class Accelerator(Elaboratable):
    """The accelerator for one kernel config (see the module docstring)."""

    def __init__(self, kernel: Kernel, point: dict):
        self.kernel, self.point = kernel, dict(point)
        self.sched = kernel.schedule(point)
        self.pipeline = int(point["pipeline"])
        self.storage = point.get("storage", "auto")
        if self.storage not in RAM_STYLE:
            raise ValueError(f"storage={self.storage!r} is unknown; valid: {', '.join(RAM_STYLE)}")
        w, aw = kernel.width, kernel.acc_width
        self.n_out, self.n_red = self.sched.lanes
        self.n_steps = len(self.sched.steps)
        self.n_groups = len(self.sched.out_lane_elems)
        self.banks = {a: self.sched.banks[a] for a in (kernel.x_name, kernel.w_name)}
        max_banks = max(b[0] for b in self.banks.values())
        max_depth = max(b[2] for b in self.banks.values())
        self.start = Signal()
        self.done = Signal()
        self.wr_en = Signal()
        self.wr_sel = Signal()  # 0: X, 1: W
        self.wr_bank = Signal(_bits(max_banks))
        self.wr_addr = Signal(_bits(max_depth))
        self.wr_data = Signal(w)
        self.rd_lane = Signal(_bits(self.n_out))
        self.rd_addr = Signal(_bits(self.n_groups))
        self.rd_data = Signal(aw)
        self.ports = [self.start, self.done, self.wr_en, self.wr_sel, self.wr_bank, self.wr_addr, self.wr_data,
                      self.rd_lane, self.rd_addr, self.rd_data]

    @property
    def cycles(self) -> int:
        """Clock cycles from ``start`` to ``done``: steps + ROM + bank read + pipeline stages + acc."""
        return self.n_steps + 2 + self.pipeline + 1

    def _control_table(self):
        """Per step: bank addresses (per array, per bank), lane bank selects (per array, per lane)."""
        k = self.kernel
        addr, sel = {}, {}
        for a, pos in ((k.x_name, 1), (k.w_name, 2)):
            n_banks, mapping, _ = self.banks[a]
            addr[a] = np.zeros((self.n_steps, n_banks), dtype=np.int64)
            sel[a] = np.zeros((self.n_steps, self.n_out * self.n_red), dtype=np.int64)
            for s, step in enumerate(self.sched.steps):
                for lane, item in enumerate(step):
                    b, ad = mapping[item[pos]]
                    addr[a][s, b] = ad
                    sel[a][s, lane] = b
        return addr, sel

    def elaborate(self, platform):
        """The datapath, stage by stage: control ROM, step counter, banks, multiply lanes,
        adder trees with accumulators and output memories."""
        m = Module()
        addr_tab, sel_tab = self._control_table()
        ctl, rom_rd = self._control_rom(m, addr_tab, sel_tab)
        issue = self._step_counter(m, rom_rd)
        lane_data, v2, ctl_d = self._banks(m, ctl, issue, sel_tab)
        prods, v_acc, first, last = self._multiply(m, lane_data, v2, ctl_d)
        self._reduce_and_store(m, prods, v_acc, first, last)
        return m

    def _control_rom(self, m, addr_tab, sel_tab):
        """Control ROM, one word per step: [bank addrs..., dynamic lane selects..., first, last]."""
        k = self.kernel
        n_lanes = self.n_out * self.n_red
        fields = []  # (name, width, column values)
        for a in (k.x_name, k.w_name):
            n_banks, _, depth = self.banks[a]
            for b in range(n_banks):
                fields.append((f"addr_{a}_{b}", _bits(depth), addr_tab[a][:, b]))
            for lane in range(n_lanes):
                col = sel_tab[a][:, lane]
                if len(set(col.tolist())) > 1:
                    fields.append((f"sel_{a}_{lane}", _bits(n_banks), col))
        fields.append(("first", 1, np.array(self.sched.first, dtype=np.int64)))
        fields.append(("last", 1, np.array(self.sched.last, dtype=np.int64)))
        words = []
        for s in range(self.n_steps):
            v, off = 0, 0
            for _, fw, col in fields:
                v |= int(col[s]) << off
                off += fw
            words.append(v)
        rom_w = sum(f[1] for f in fields)
        m.submodules.rom = rom = Memory(shape=unsigned(rom_w), depth=self.n_steps, init=words)
        rom_rd = rom.read_port()
        ctl, off = {}, 0
        for name, fw, _ in fields:
            ctl[name] = rom_rd.data[off:off + fw]
            off += fw
        return ctl, rom_rd

    def _step_counter(self, m, rom_rd):
        """Counts the schedule's steps after ``start``; returns the issue signal."""
        running = Signal()
        step = Signal(_bits(self.n_steps + 1))
        issue = Signal()
        m.d.comb += [rom_rd.addr.eq(step), issue.eq(running)]
        with m.If(self.start):
            m.d.sync += [running.eq(1), step.eq(0), self.done.eq(0)]
        with m.Elif(running):
            m.d.sync += step.eq(step + 1)
            with m.If(step == self.n_steps - 1):
                m.d.sync += running.eq(0)
        return issue

    def _banks(self, m, ctl, issue, sel_tab):
        """The memory banks of both input arrays and each lane's operand; returns the operands per
        array, the bank-data valid signal and the control fields delayed to match it."""
        k = self.kernel
        n_lanes = self.n_out * self.n_red
        lane_data = {}
        v1 = Signal()  # ROM word valid
        v2 = Signal()  # bank data valid
        m.d.sync += [v1.eq(issue), v2.eq(v1)]
        ctl_d = {n: Signal(len(ctl[n]), name=f"{n}_d") for n in ctl if n.startswith("sel_") or n in ("first", "last")}
        for n, s in ctl_d.items():
            m.d.sync += s.eq(ctl[n])  # aligned with bank read data
        for ai, a in enumerate((k.x_name, k.w_name)):
            n_banks, _, depth = self.banks[a]
            datas = []
            for b in range(n_banks):
                style = RAM_STYLE[self.storage]
                mem = Memory(shape=unsigned(k.width), depth=depth, init=[], attrs={"ram_style": style} if style else None)
                m.submodules[f"bank_{a}_{b}"] = mem
                wp, rp = mem.write_port(), mem.read_port()
                m.d.comb += [wp.addr.eq(self.wr_addr), wp.data.eq(self.wr_data),
                             wp.en.eq(self.wr_en & (self.wr_sel == ai) & (self.wr_bank == b)),
                             rp.addr.eq(ctl[f"addr_{a}_{b}"])]
                datas.append(rp.data)
            arr = Array(datas)
            lane_data[a] = []
            for lane in range(n_lanes):
                key = f"sel_{a}_{lane}"
                if key in ctl_d:
                    lane_data[a].append(arr[ctl_d[key]])
                else:
                    lane_data[a].append(datas[int(sel_tab[a][0, lane])])
        return lane_data, v2, ctl_d

    def _multiply(self, m, lane_data, v2, ctl_d):
        """One multiplier per lane, registered when ``pipeline >= 1``; returns the products and the
        valid/first/last signals aligned with them."""
        k, w = self.kernel, self.kernel.width
        n_lanes = self.n_out * self.n_red
        prods = [Signal(2 * w, name=f"p{l}") for l in range(n_lanes)]
        m.d.comb += [p.eq(lane_data[k.x_name][l] * lane_data[k.w_name][l]) for l, p in enumerate(prods)]
        v_acc, first, last = v2, ctl_d["first"], ctl_d["last"]
        if self.pipeline >= 1:
            prods_r = [Signal(2 * w, name=f"pr{l}") for l in range(n_lanes)]
            v3, first3, last3 = Signal(), Signal(), Signal()
            m.d.sync += [pr.eq(p) for pr, p in zip(prods_r, prods)]
            m.d.sync += [v3.eq(v2), first3.eq(first), last3.eq(last)]
            prods, v_acc, first, last = prods_r, v3, first3, last3
        return prods, v_acc, first, last

    def _adder_trees(self, m, prods):
        """Per output lane, the sum of its ``n_red`` products (a balanced tree, combinational)."""
        aw = self.kernel.acc_width
        sums = []
        for o in range(self.n_out):
            terms = prods[o * self.n_red:(o + 1) * self.n_red]
            while len(terms) > 1:
                nxt = []
                for i in range(0, len(terms) - 1, 2):
                    s = Signal(aw, name=f"t{o}_{len(terms)}_{i}")
                    m.d.comb += s.eq(terms[i] + terms[i + 1])
                    nxt.append(s)
                if len(terms) % 2:
                    nxt.append(terms[-1])
                terms = nxt
            sums.append(terms[0])
        return sums

    def _reduce_and_store(self, m, prods, v_acc, first, last) -> None:
        """Adder trees (registered when ``pipeline >= 2``), accumulators, output memories, ``done``."""
        aw = self.kernel.acc_width
        group = Signal(_bits(self.n_groups + 1))
        out_rd = []
        sums = self._adder_trees(m, prods)
        if self.pipeline >= 2:  # register after the adder trees
            sums_r = [Signal(aw, name=f"sr{o}") for o in range(self.n_out)]
            v4, first4, last4 = Signal(), Signal(), Signal()
            m.d.sync += [r.eq(t) for r, t in zip(sums_r, sums)]
            m.d.sync += [v4.eq(v_acc), first4.eq(first), last4.eq(last)]
            sums, v_acc, first, last = sums_r, v4, first4, last4
        for o in range(self.n_out):
            acc = Signal(aw, name=f"acc{o}")
            new = Signal(aw, name=f"new{o}")
            m.d.comb += new.eq(Mux(first, 0, acc) + sums[o])
            omem = Memory(shape=unsigned(aw), depth=self.n_groups, init=[])
            m.submodules[f"out_{o}"] = omem
            wp, rp = omem.write_port(), omem.read_port(domain="comb")
            m.d.comb += [wp.addr.eq(group), wp.data.eq(new), wp.en.eq(v_acc & last), rp.addr.eq(self.rd_addr)]
            with m.If(v_acc):
                m.d.sync += acc.eq(new)
            out_rd.append(rp.data)
        with m.If(self.start):
            m.d.sync += group.eq(0)
        with m.Elif(v_acc & last):
            m.d.sync += group.eq(group + 1)
            with m.If(group == self.n_groups - 1):
                m.d.sync += self.done.eq(1)
        m.d.comb += self.rd_data.eq(Array(out_rd)[self.rd_lane])


def build(kernel: Kernel, point: dict) -> Design:
    """The :class:`Design` of ``point`` (knob name -> value) for ``kernel``."""
    top = Accelerator(kernel, point)
    return Design(top, top.sched, top.cycles, top.n_out * top.n_red, point["mul_core"], int(point["pipeline"]))


def to_rtlil(design: Design) -> str:
    """The design as RTLIL text (top module ``top``), for Yosys."""
    from amaranth.back import rtlil

    return rtlil.convert(design.top, name="top", ports=design.top.ports)


def simulate(kernel: Kernel, point: dict, x: np.ndarray, w: np.ndarray, max_cycles: int = 100_000) -> tuple[np.ndarray, int]:
    """Run ``point``'s design in Amaranth's simulator on inputs ``x``, ``w`` (unsigned ints, the
    kernel's array shapes). Returns (output array, cycles from start to done)."""
    from amaranth.sim import Simulator

    design = build(kernel, point)
    top = design.top
    out_shape = tuple(kernel.out_sizes)
    result = np.zeros(int(np.prod(out_shape)), dtype=np.int64)
    cycles = [0]

    async def bench(ctx):
        for sel, (a, arr) in enumerate(((kernel.x_name, x), (kernel.w_name, w))):
            _, mapping, _ = top.banks[a]
            for flat, v in enumerate(np.asarray(arr).reshape(-1)):
                b, ad = mapping[flat]
                ctx.set(top.wr_en, 1)
                ctx.set(top.wr_sel, sel)
                ctx.set(top.wr_bank, b)
                ctx.set(top.wr_addr, ad)
                ctx.set(top.wr_data, int(v))
                await ctx.tick()
        ctx.set(top.wr_en, 0)
        ctx.set(top.start, 1)
        await ctx.tick()
        ctx.set(top.start, 0)
        n = 1
        while not ctx.get(top.done):
            await ctx.tick()
            n += 1
            if n > max_cycles:
                raise RuntimeError("simulation: done never rose")
        cycles[0] = n
        for g, lane_outs in enumerate(top.sched.out_lane_elems):
            for lane, o in enumerate(lane_outs):
                ctx.set(top.rd_lane, lane)
                ctx.set(top.rd_addr, g)
                await ctx.delay(1e-9)
                result[o] = ctx.get(top.rd_data)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result.reshape(out_shape), cycles[0]
