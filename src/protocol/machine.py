"""Per-machine facts measured once and cached: the peak and the quiet calibration reference.

One JSON file per (host, device, thread count, TVM version, TVM target: e.g. the LLVM CPU model) in the cache folder
(``measure.cache_dir``; default ``$XDG_CACHE_HOME/tunebench`` or ``~/.cache/tunebench``), created
private (mode 0700, owner and mode checked: :mod:`tunebench.safe_files`) and written atomically
(temporary file + rename), so concurrent runs never read a half-written file:

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
import time

from tunebench.safe_files import atomic_write_bytes, private_dir, read_nofollow, user_dir


class MachineCache:
    """The cache file of one machine configuration.

    Args:
        key: what identifies the configuration (host, device name, threads, TVM version, ...).
        cache_dir: the folder (None: :func:`tunebench.safe_files.user_dir`); created private, and
            refused with a one-line UserError when another user owns it or may write to it.
    """

    def __init__(self, key: dict, cache_dir: str | None = None):
        self.key = dict(key)
        self.dir = private_dir(cache_dir) if cache_dir else user_dir()
        digest = hashlib.sha1(json.dumps(self.key, sort_keys=True).encode()).hexdigest()[:16]
        self.path = os.path.join(self.dir, f"machine-{digest}.json")

    def read(self) -> dict:
        try:
            data = json.loads(read_nofollow(self.path))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("key") == self.key else {}

    def _write(self, data: dict) -> None:
        atomic_write_bytes(self.path, json.dumps({**data, "key": self.key}, indent=1).encode())

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
