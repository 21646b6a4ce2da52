"""The product's own build tool outside the wheel: the CRD generator (`crdgen`, `make crds`). Tests import it with
`hack/` on `sys.path` (pytest's `pythonpath`); it also runs as a script. The development harness is `hack/harness`."""
