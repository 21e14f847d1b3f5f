"""Per-machine facts measured once and cached: the peak and the quiet calibration reference.

One JSON file per (host, device, thread count, TVM version) in the cache folder
(``measure.cache_dir``; default ``$XDG_CACHE_HOME/tunebench`` or ``~/.cache/tunebench``), created
private (mode 0700) and written atomically (temporary file + rename), so concurrent runs never
read a half-written file:

```json
{"key": {...}, "peak": {"fma_gflops": 513.5, "mem_gbps": 48.5, "threads": 2, "measured_at": "..."},
 "calibration": {"reference_s": 6.8e-05, "updated_at": "..."}}
```

The calibration reference is the fastest clean calibration time seen on the machine: a later
calibration is compared with it (``slowdown``). A peak or calibration measured while the machine
was noisy is never cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tunebench")


class MachineCache:
    """The cache file of one machine configuration.

    Args:
        key: what identifies the configuration (host, device name, threads, TVM version, ...).
        cache_dir: the folder (None: :func:`default_cache_dir`).
    """

    def __init__(self, key: dict, cache_dir: str | None = None):
        self.key = dict(key)
        self.dir = os.path.expanduser(cache_dir) if cache_dir else default_cache_dir()
        digest = hashlib.sha1(json.dumps(self.key, sort_keys=True).encode()).hexdigest()[:16]
        self.path = os.path.join(self.dir, f"machine-{digest}.json")

    def read(self) -> dict:
        try:
            with open(self.path) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("key") == self.key else {}

    def _write(self, data: dict) -> None:
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".machine-", suffix=".json", dir=self.dir)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump({**data, "key": self.key}, fh, indent=1)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    def peak(self) -> dict | None:
        return self.read().get("peak")

    def store_peak(self, peak: dict) -> None:
        data = self.read()
        data["peak"] = {**peak, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        self._write(data)

    def calibration_reference(self) -> float | None:
        ref = self.read().get("calibration", {}).get("reference_s")
        return float(ref) if ref else None

    def offer_calibration(self, seconds: float) -> float:
        """Record a clean calibration time; returns the reference (the fastest seen so far)."""
        data = self.read()
        ref = data.get("calibration", {}).get("reference_s")
        if ref is None or seconds < float(ref):
            data["calibration"] = {"reference_s": float(seconds), "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
            self._write(data)
            return float(seconds)
        return float(ref)
