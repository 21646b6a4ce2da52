// CoreDNS for the real nodes with only the plugins their Corefile uses (hack/trainjob_dev/realnodes.py,
// corefile(): bind, errors, ready, kubernetes). Upstream's own main (github.com/coredns/coredns) links every
// plugin in plugin.cfg, cloud DNS backends and tracing SDKs among them: about 1,000 packages to compile cold
// against about 350 for these four. The same way CoreDNS documents for a build with a chosen plugin set: import
// the plugins, run coremain. The directive order stays CoreDNS's own (core/dnsserver.Directives).
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
