"""The partition pass and what reports on it: the pipeline (canonicalisation, matching with the
op table and the compiler's dry run, composites, Codegen="npu" functions), the fallback that
sends a layer the compiler refuses back to the CPU, coverage reports and the generated docs of
the table."""
