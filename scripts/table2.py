"""Table 2 from finetuning runs: python scripts/table2.py 'outputs/finetune/*' --out docs/results/table2"""

import sys

from linformer.report.table2 import main

if __name__ == "__main__":
    sys.exit(main())
