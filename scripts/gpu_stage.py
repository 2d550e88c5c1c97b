"""Run the GPU stages: python scripts/gpu_stage.py tests table3 throughput --out results/ (linformer/gpu/stages.py)."""

import sys

from linformer.gpu.stages import main

if __name__ == "__main__":
    sys.exit(main())
