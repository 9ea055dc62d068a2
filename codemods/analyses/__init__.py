"""The shared analyses: whole-file (and project) facts several rules read, computed from the
per-file model (`codemods.model`): device values and positions, CUDA-only code, loaders, loops,
capabilities, constants, the environment map and portable devices. No rule lives here."""
