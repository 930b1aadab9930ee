// Command kube-scheduler is Kubernetes' own scheduler command, unchanged, for Leoflow's tests: it
// binds pods to the node the kubelet simulator registers.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
