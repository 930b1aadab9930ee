// Command etcd is etcd's own server main at the version Kubernetes v1.34.4 requires, for Leoflow's
// tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
