"""Training: one core (``core.run_training`` and its ``trainer.Trainer``) and the tasks that plug into it
(``pretrain``, ``finetune``, ``transfer``, ``distill``).

Each entry point takes its typed run spec (``linformer.runconfig``: ``PretrainSpec.read(cfg)`` from a composed config,
as the scripts build one; a composed config is read into one too) and a run directory."""
