"""Summary statistics of timing samples and confidence intervals.

Latencies are summarized by their median (the reported value), minimum, mean, standard deviation,
coefficient of variation (std / mean) and its robust form ``rcv = 1.4826 * MAD / median`` (equal
to the CV for normally distributed samples, but not moved by one interrupted repeat; the noise
test uses it). Ratios between independent groups (a method's seeds vs
the baseline's seeds) get a percentile-bootstrap interval of the ratio of means; paired ratios
(the rounds of one interleaved A/B measurement) get a Student-t interval of their geometric mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95      # confidence level of every interval tunebench reports
N_BOOT = 2000     # bootstrap resamples (percentile method)


@dataclass(frozen=True)
class SampleStats:
    """Summary of timing samples (any unit; :meth:`scaled` converts).

    Attributes:
        n: number of samples; median, min, mean, std (population, ddof=0); cv: std / mean;
        rcv: 1.4826 * median absolute deviation / median (robust CV).
    """

    n: int
    median: float
    min: float
    mean: float
    std: float
    cv: float
    rcv: float = 0.0

    def scaled(self, factor: float) -> SampleStats:
        """The same statistics in another unit (e.g. ``1e3`` for seconds -> ms); CV is unitless."""
        return SampleStats(self.n, self.median * factor, self.min * factor, self.mean * factor,
                           self.std * factor, self.cv, self.rcv)

    def to_dict(self, prefix: str = "") -> dict:
        return {f"{prefix}median": self.median, f"{prefix}min": self.min, f"{prefix}mean": self.mean,
                f"{prefix}std": self.std, f"{prefix}cv": self.cv, f"{prefix}rcv": self.rcv, f"{prefix}n": self.n}


def summarize(samples: Sequence[float]) -> SampleStats:
    """Median, minimum, mean, std, CV and robust CV of ``samples`` (at least one finite value)."""
    x = np.asarray([float(s) for s in samples], dtype=float)
    x = x[np.isfinite(x)]
    if x.size == 0:
        raise ValueError("summarize: no finite samples")
    mean = float(np.mean(x))
    std = float(np.std(x))
    median = float(np.median(x))
    mad = float(np.median(np.abs(x - median)))
    return SampleStats(int(x.size), median, float(np.min(x)), mean, std, std / mean if mean > 0 else math.inf,
                       1.4826 * mad / median if median > 0 else math.inf)


def _rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(0 if seed is None else seed)


def bootstrap_ci(values: Sequence[float], statistic: Callable[[np.ndarray], float] = np.mean,
                 level: float = LEVEL, n_boot: int = N_BOOT, seed: int | None = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of ``statistic(values)``; ``(nan, nan)`` for fewer than 2 values."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return math.nan, math.nan
    idx = _rng(seed).integers(0, x.size, size=(n_boot, x.size))
    stats = np.apply_along_axis(statistic, 1, x[idx])
    a = (1.0 - level) / 2.0
    return float(np.quantile(stats, a)), float(np.quantile(stats, 1.0 - a))


def geomean(values: Sequence[float]) -> float:
    x = np.asarray(values, dtype=float)
    return float(np.exp(np.mean(np.log(x)))) if x.size and np.all(x > 0) else math.nan


def paired_ratio_ci(numerators: Sequence[float], denominators: Sequence[float],
                    level: float = LEVEL) -> tuple[float, float, float]:
    """Ratios ``num_i / den_i`` of paired measurements (the rounds of an interleaved A/B timing):
    ``(geometric mean, low, high)``, the interval a Student-t interval of the mean log ratio with the
    pairs as the independent units: ``exp(m -/+ t_{n-1} * s / sqrt(n))`` with ``m``, ``s`` the mean
    and standard deviation of the ``n`` log ratios. Fewer than 2 positive finite ratios: the interval
    is ``(nan, nan)``.

    Not a bootstrap: over 5 rounds a percentile bootstrap of the geometric mean is about a normal
    interval with ``z`` for ``t_4`` and ``n`` for ``n - 1`` in the standard error, 0.63 of this width; on
    quiet timings it contained the quiet median for 72 % of them, this interval for 85 %
    (docs/MEASUREMENT.md §How wide a speedup's interval is)."""
    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.shape != den.shape:
        raise ValueError(f"paired_ratio_ci: {num.size} numerators vs {den.size} denominators")
    ratios = num / den
    point = geomean(ratios)
    logs = np.log(ratios[np.isfinite(ratios) & (ratios > 0)])
    if logs.size < 2:
        return point, math.nan, math.nan
    lo, hi = student_t_ci(logs, level)
    return point, math.exp(lo), math.exp(hi)


def timing_ratios(numerators: Sequence[Sequence[float]], denominators: Sequence[Sequence[float]]) -> list[float]:
    """The ratio of each of ``k`` separate timings: the geometric mean of its rounds' ``num / den``
    (``numerators[i]``, ``denominators[i]``: timing ``i``'s paired per-round values). No timing, or a timing
    whose two sides differ in length: ValueError."""
    if len(numerators) != len(denominators) or not len(numerators):
        raise ValueError(f"timing_ratios: {len(numerators)} numerator timings vs {len(denominators)} denominator "
                         "timings (at least one, as many on each side)")
    out = []
    for i, (num, den) in enumerate(zip(numerators, denominators)):
        num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
        if num.shape != den.shape or not num.size:
            raise ValueError(f"timing_ratios: timing {i}: {num.size} numerators vs {den.size} denominators")
        out.append(geomean(num / den))
    return out


def timings_ratio_ci(numerators: Sequence[Sequence[float]], denominators: Sequence[Sequence[float]],
                     level: float = LEVEL) -> tuple[float, float, float]:
    """A ratio timed as ``k`` separate interleaved timings (``numerators[i]``, ``denominators[i]``: timing
    ``i``'s paired per-round values): ``(geometric mean of the k per-timing ratios, low, high)``, the interval a
    Student-t interval (``k - 1`` df) of the mean log ratio with the timings as the independent units
    (:func:`timing_ratios`). ``k = 1``: :func:`paired_ratio_ci` over that timing's rounds.

    Why the timings and not the rounds: consecutive timings on a shared machine sit at different levels,
    which the rounds of one timing cannot see; on quiet timings of a shared 2-core VM the interval over the 5
    rounds of one timing contained the quiet median 65-85 % of the time, the interval over 3 timings 82-98 %
    (three runs; docs/MEASUREMENT.md §How wide a speedup's interval is).

    The variance of a timing's mean log ratio is estimated as the larger of the k means' sample variance and
    the rounds' pooled within-timing variance divided by the rounds per timing (:func:`_within_timing_floor`): the
    one-way random-effects (ANOVA) estimate with the between-timing component truncated at 0. A timing's mean
    varies at least as much as its rounds make it, and with k = 3 the means' own variance has 2 df and now and
    then comes out near 0 where the rounds say otherwise."""
    ratios = timing_ratios(numerators, denominators)
    if len(ratios) == 1:
        return paired_ratio_ci(numerators[0], denominators[0], level)
    x = np.asarray(ratios)
    logs = np.log(x[np.isfinite(x) & (x > 0)])
    lo, hi = student_t_ci(logs, level, min_var=_within_timing_floor(numerators, denominators))
    return geomean(ratios), math.exp(lo), math.exp(hi)


def _within_timing_floor(numerators: Sequence[Sequence[float]], denominators: Sequence[Sequence[float]]) -> float:
    """The variance a timing's mean log ratio has from its rounds alone: the pooled within-timing variance of
    the rounds' log ratios times the mean of ``1 / rounds``, over the timings whose every round ratio is
    positive and finite (0 when none of them has two rounds)."""
    ss, df, inv_n = 0.0, 0, []
    for num, den in zip(numerators, denominators):
        r = np.asarray(num, dtype=float) / np.asarray(den, dtype=float)
        if not (np.all(np.isfinite(r)) and np.all(r > 0)):
            continue
        lr = np.log(r)
        inv_n.append(1.0 / lr.size)
        ss += float(np.sum((lr - lr.mean()) ** 2))
        df += lr.size - 1
    return ss / df * float(np.mean(inv_n)) if df else 0.0


def student_t_ci(values: Sequence[float], level: float = LEVEL, min_var: float = 0.0) -> tuple[float, float]:
    """Student-t interval of the mean of ``values`` (independent, about normal): ``mean -/+ t * sd / sqrt(n)``,
    ``sd**2`` the sample variance or ``min_var`` where that is larger (n - 1 df either way); ``(nan, nan)`` for
    fewer than 2 finite values."""
    from scipy.stats import t as student_t

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2:
        return math.nan, math.nan
    sd = math.sqrt(max(float(np.var(x, ddof=1)), min_var))
    half = float(student_t.ppf(0.5 + level / 2.0, x.size - 1)) * sd / math.sqrt(x.size)
    m = float(np.mean(x))
    return m - half, m + half


def ratio_of_means_ci(numerators: Sequence[float], denominators: Sequence[float], level: float = LEVEL,
                      n_boot: int = N_BOOT, seed: int | None = 0) -> tuple[float, float, float]:
    """``mean(num) / mean(den)`` of two independent groups (e.g. a method's seeds and the baseline's)
    with a percentile-bootstrap interval (each group resampled on its own). The interval is
    ``(nan, nan)`` unless both groups have at least 2 values."""
    num = np.asarray([v for v in numerators if math.isfinite(v)], dtype=float)
    den = np.asarray([v for v in denominators if math.isfinite(v)], dtype=float)
    if num.size == 0 or den.size == 0 or np.mean(den) == 0:
        return math.nan, math.nan, math.nan
    point = float(np.mean(num) / np.mean(den))
    if num.size < 2 or den.size < 2:
        return point, math.nan, math.nan
    rng = _rng(seed)
    a = np.mean(num[rng.integers(0, num.size, size=(n_boot, num.size))], axis=1)
    b = np.mean(den[rng.integers(0, den.size, size=(n_boot, den.size))], axis=1)
    ratios = a / b
    q = (1.0 - level) / 2.0
    return point, float(np.quantile(ratios, q)), float(np.quantile(ratios, 1.0 - q))


def verdict(low: float, high: float, better_below: bool = True, reference: float = 1.0) -> str:
    """``"better"`` / ``"worse"`` when the interval ``[low, high]`` excludes ``reference``, else
    ``"n.s."`` (not significant; also when the interval is unknown). ``better_below``: a ratio below
    the reference is better (times, latencies); False for speedups."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "n.s."
    if high < reference:
        return "better" if better_below else "worse"
    if low > reference:
        return "worse" if better_below else "better"
    return "n.s."


def reduction_product_ci(t: Sequence[float], lat: Sequence[float], t_base: Sequence[float],
                         lat_base: Sequence[float], level: float = LEVEL, n_boot: int = N_BOOT,
                         seed: int | None = 0) -> tuple[float, float, float]:
    """``(1 - mean(t)/mean(t_base)) * (1 - mean(lat)/mean(lat_base)) * 100`` (the HV of a method
    against a baseline) with a percentile-bootstrap interval: ``(point, low, high)``.

    ``t[i], lat[i]`` belong to one run of the method, ``t_base[j], lat_base[j]`` to one run of the
    baseline; each resample draws runs with replacement from each group on its own (the method's
    draws first, as :func:`ratio_of_means_ci`, so with every value finite the search part uses the
    same draws as that function's interval). Runs with a non-finite value are left out; the
    interval is ``(nan, nan)`` unless both groups keep at least 2 runs.
    """
    def pairs(a, b):
        x = np.column_stack([np.asarray(a, dtype=float), np.asarray(b, dtype=float)])
        return x[np.all(np.isfinite(x), axis=1)]

    m, b = pairs(t, lat), pairs(t_base, lat_base)
    if len(m) == 0 or len(b) == 0 or np.any(np.mean(b, axis=0) == 0):
        return math.nan, math.nan, math.nan
    point = float(np.prod(1.0 - np.mean(m, axis=0) / np.mean(b, axis=0)) * 100.0)
    if len(m) < 2 or len(b) < 2:
        return point, math.nan, math.nan
    rng = _rng(seed)
    ms = m[rng.integers(0, len(m), size=(n_boot, len(m)))].mean(axis=1)  # (n_boot, 2)
    bs = b[rng.integers(0, len(b), size=(n_boot, len(b)))].mean(axis=1)
    hv = np.prod(1.0 - ms / bs, axis=1) * 100.0
    q = (1.0 - level) / 2.0
    return point, float(np.quantile(hv, q)), float(np.quantile(hv, 1.0 - q))


def expected_best_of_random(values: Sequence[float], k: int) -> float:
    """The expected best (smallest) of ``k`` draws without replacement from ``values`` (inf: an invalid
    config), computed, not sampled: with the values sorted ascending, the best is the j-th smallest
    with probability C(N - j, k - 1) / C(N, k). The calculated random-search baseline of a measured space."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = len(v)
    if not 1 <= k <= n:
        raise ValueError(f"k={k}: must be between 1 and the number of values ({n})")
    total = math.comb(n, k)
    p = np.array([math.comb(n - j, k - 1) / total for j in range(1, n + 1)])
    finite = np.isfinite(v)
    if np.any(p[~finite] > 0):
        return math.inf
    return float(np.sum(p[finite] * v[finite]))
