// Command kube-controller-manager is Kubernetes' own controller manager command, unchanged, for
// Leoflow's tests (namespace deletion, the default ServiceAccount, the root CA ConfigMap, the
// garbage collector).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
