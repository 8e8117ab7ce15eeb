//go:build race

package node_test

// raceBuild: the test binary runs under the race detector, so the node
// binary it starts is built with it too (the daemon's code runs there).
const raceBuild = true
