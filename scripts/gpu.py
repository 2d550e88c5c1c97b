"""Run the GPU targets: python scripts/gpu.py tests table3 throughput --out results/ (linformer/gpu/targets.py)."""

import sys

from linformer.gpu.targets import main

if __name__ == "__main__":
    sys.exit(main())
