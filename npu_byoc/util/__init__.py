"""Helpers that know nothing of NPUs: escaping untrusted names, Relax expression reading, TVM
builder scopes, the private build cache, progress lines and build logs. Imports nothing of
npu_byoc but its errors."""
