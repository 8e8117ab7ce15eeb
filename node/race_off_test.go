//go:build !race

package node_test

const raceBuild = false
