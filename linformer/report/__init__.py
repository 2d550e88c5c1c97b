"""Reports generated from run directories: Table 2 (finetuning accuracy), pretraining curves."""
