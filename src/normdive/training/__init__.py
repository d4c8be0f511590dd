"""Training the ablation rows. The only code in normdive that imports torch."""
