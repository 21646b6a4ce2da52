// Optional helm CLI (built only with `make tools WITH_HELM=1` /
// build.sh --with-helm). Separate module: helm tracks k8s.io/* v0.37,
// which must not leak into the 1.36 control-plane build.
module trainjob-operator.invalid/hack/cluster/helm

go 1.26.0

require helm.sh/helm/v3 v3.22.0

tool helm.sh/helm/v3/cmd/helm
