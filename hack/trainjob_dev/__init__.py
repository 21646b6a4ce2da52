"""Developer tooling of trainjob-operator, outside the wheel: the local control plane (`cluster`) and the CRD
generator (`crdgen`). Tests, benchmarks and hack/ scripts import it with `hack/` on `sys.path` (pytest's
`pythonpath`, or `sys.path.insert`); both modules also run as scripts."""
