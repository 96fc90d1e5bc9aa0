"""Would a cache of compiled MuJoCo models (.mjb) beside the task cache pay?

Compiles every Meta-World v3 task model from its XML, saves each as MJB, loads the files back,
and prints the CPU time of both, the models' size and whether every array of a loaded model
equals the compiled one's. Run from the project root: .venv/bin/python tools/probes/mjb_cache.py
(record: reports/bench/2026-11-28-test-processes/).
"""

import tempfile
import time

import mujoco
import numpy as np
from metaworld.env_dict import ALL_V3_ENVIRONMENTS

paths = sorted({cls.model_name.fget(None) for cls in ALL_V3_ENVIRONMENTS.values()})
with tempfile.TemporaryDirectory() as folder:
    t = time.process_time()
    compiled = [mujoco.MjModel.from_xml_path(p) for p in paths]
    compile_s = time.process_time() - t
    for i, model in enumerate(compiled):
        mujoco.mj_saveModel(model, f"{folder}/{i}.mjb", None)
    t = time.process_time()
    loaded = [mujoco.MjModel.from_binary_path(f"{folder}/{i}.mjb") for i in range(len(paths))]
    load_s = time.process_time() - t
size = sum(mujoco.mj_sizeModel(m) for m in compiled)
differ = sum(1 for a, b in zip(compiled, loaded) for f in dir(a)
             if isinstance(getattr(a, f, None), np.ndarray)
             and getattr(a, f).tobytes() != getattr(b, f).tobytes())
print(f"mujoco {mujoco.__version__}: {len(paths)} task XML files (MT50's; MT10 uses 8)")
print(f"compile from XML: {compile_s:.2f} CPU-s; load from MJB: {load_s:.2f} CPU-s")
print(f"size: {size / 2**20:.0f} MiB in all, {size / len(paths) / 2**20:.1f} MiB a model")
print(f"arrays that differ between a compiled and a loaded model: {differ}")
