"""Model files into Relax: TVM's TFLite and ONNX frontends plus what npu_byoc adds (quantized
TFLite data movement, ONNX QOperator / 4-bit / external data, converters), Relax ``.json``
files checked as data (relax_json), and the bundled models. ``load.load_model`` is the entry."""
