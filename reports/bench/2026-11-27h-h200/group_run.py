"""One process of a node: EXPERIMENT's SEEDS (comma-separated) as one group, or one run, for
SECONDS measured after a warm-up; prints its per-seed vector steps/s (the bench node's worker)."""
import json
import sys
import threading

if __name__ == "__main__":
    from ptsl.core.runtime import Runtime
    from ptsl.tools.bench.node import _worker

    exp, seeds, secs = sys.argv[1], tuple(int(s) for s in sys.argv[2].split(",")), float(sys.argv[3])
    print(json.dumps(_worker("params.yaml", exp, seeds, Runtime.from_env(), None, 10, secs,
                             threading.Barrier(1))), flush=True)
