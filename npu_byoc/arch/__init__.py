"""The hardware description, at the bottom of the layers: the configuration (config), the
command-stream ISA and its encoding (isa, encoder), the integer formulas of the TFLite
reference kernels (fixed_point, numerics), the NPU's addressing and shape facts (limits), the
analytic cycle model (cycles), and the generated C header / Verilog include (hwgen). Imports
nothing of npu_byoc above it."""
