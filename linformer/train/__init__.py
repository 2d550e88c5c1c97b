"""Training: one core (``core.Trainer``) and the loops that plug into it (``pretrain``, ``finetune``).

Library functions take a composed config (``linformer.cli.compose`` builds one as the scripts do) and a run
directory; the scripts are thin Hydra wrappers."""
