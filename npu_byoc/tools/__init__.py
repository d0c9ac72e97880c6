"""Tools above the runtime: differential fuzzing (fuzz) and design-space sweeps (sweep)."""
