"""Differential fuzzing of npu_byoc (``npu-byoc fuzz``, docs/fuzz.md).

- generators: random int8 models (single ops and 2-4 op chains over every op and convention of
  the pattern table) as JSON specs;
- builder: a spec as a Relax module;
- runner: one case through the golden model, the C functional model, the RTL and TVM's CPU
  build, compared (exact among the NPU backends, per op ≤ 1 LSB against TVM);
- reducer: shrinking a failing case and saving / replaying its reproducer;
- campaign: N cases, counted;
- files: mutated model files and the one-clean-line rule;
- command: the ``fuzz`` subcommand.
"""
